"""The per-item state in DuckDB: a Parquet file per generation, updated in SQL where the data is.

The state is a table ``(k, g, c)`` — item key (BIGINT or VARCHAR), group code, capped count
(UTINYINT up to K = 255) — stored as ``items-<gen>.parquet``. An append reads the previous
generation twice, streaming: once for the pairs of the append's items only (a semi-join on the
events' keys, :mod:`~dpfreq.stream.items.reader`), which it joins with the aggregated events
into the **kept pairs** of the append (item, group, first period, events, previous count), and
once in the ``COPY … TO`` that writes the next generation as the full outer join of the whole
previous generation with the kept pairs. From the kept pairs it computes the increments of
:mod:`~dpfreq.stream.items.update` (a window sum per pair when the append closes several
periods). DuckDB streams, spills to disk when memory runs short, and never brings the items
into Python, so 10^8 items fit: what it holds is the append's pairs, not the state's. A stream
measuring what its cap dropped also remembers the capped-out pairs with count 0, up to ``M =
4m`` pairs per item (:mod:`.update`): up to ``M − m`` more rows per item. On disk an item costs
a few bytes (4–6 measured at 10^6 items, Parquet's default compression).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dpfreq.stream.items.files import file_digest
from dpfreq.stream.items.reader import EventTable, events_inside, read_events
from dpfreq.stream.items.sql import (
    added_sql,
    bounded_sql,
    capping_sql,
    kept_of,
    kept_sql,
    levels_sql,
    next_sql,
    remembered_of,
)
from dpfreq.stream.items.update import SEP, UpdatePlan, UpdateResult

__all__ = ["DuckDBItems"]


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _count_type(cap: int) -> str:
    return "UTINYINT" if cap <= 255 else "USMALLINT" if cap <= 65535 else "UINTEGER"


class DuckDBItems:
    """Per-item state as Parquet files read and written by DuckDB."""

    engine = "duckdb"
    suffix = "parquet"
    read = staticmethod(read_events)

    @staticmethod
    def _state(current: Path | None, key_kind: str, cap: int) -> str:
        """The previous generation with its keys as ``key_kind`` (integer keys read as text:
        their decimal text)."""
        key = "BIGINT" if key_kind == "integer" else "VARCHAR"
        if current is None:
            return (f"(SELECT CAST(NULL AS {key}) AS k, CAST(0 AS BIGINT) AS g, "
                    f"CAST(0 AS {_count_type(cap)}) AS c WHERE false)")
        return f"(SELECT CAST(k AS {key}) AS k, g, c FROM read_parquet({_lit(str(current))}))"

    @staticmethod
    def _bounded(events: EventTable, plan: UpdatePlan, st: str, sql: Callable[..., str]
                 ) -> str:
        """The SELECT of ``sql`` (:func:`.sql.kept_sql` or :func:`.sql.bounded_sql`) with the
        group names and the keyed rank of this store."""
        names = ", ".join(f"({i}, {_lit(n)})" for i, n in enumerate(plan.group_names or ()))
        rank = (f"substr(md5({_lit(plan.bound_key_hex)} || {_lit(SEP)} || CAST(p.k AS VARCHAR)"
                f" || {_lit(SEP)} || nm.gname), 1, 16)")
        return sql(events.name, st, plan, f"(VALUES {names}) AS nm(g, gname)", rank)

    def update(self, events: EventTable, plan: UpdatePlan, current: Path | None,
               out: Path, check: Callable[[], None]) -> UpdateResult:
        """Apply the append's events to the previous generation; write the next to ``out``."""
        check()  # the stream's refusals of late and future events, before any work
        st, kept = f"{events.name}_state", f"{events.name}_kept"
        seen = f"{events.name}_seen" if plan.measures_capping else None
        state = self._state(current, events.key_kind, plan.cap)
        # the previous generation's pairs of the append's items only (a semi-join: the hash
        # table holds the append's keys, not the state's); the next generation is written from
        # the whole previous generation, read once more by the COPY
        events.execute(f"CREATE TEMP TABLE {st} AS SELECT * FROM {state} AS s WHERE s.k IN "
                       f"(SELECT k FROM {events.name})")
        both = f"{events.name}_bounded"
        try:
            cap = None
            if seen is None:
                events.execute(f"CREATE TEMP TABLE {kept} AS "
                               f"{self._bounded(events, plan, st, kept_sql)}")
            else:  # the pairs ranked once, read for the kept and the remembered ones
                events.execute(f"CREATE TEMP TABLE {both} AS "
                               f"{self._bounded(events, plan, st, bounded_sql)}")
                events.execute(f"CREATE TEMP TABLE {kept} AS {kept_of(both)}")
                events.execute(f"CREATE TEMP TABLE {seen} AS {remembered_of(both)}")
                events.execute(f"DROP TABLE {both}")
                cap = self._capping(events, plan, seen)
            inc = self._increments(events, plan, kept)
            nxt = next_sql(state, added_sql(kept, seen), plan.cap, _count_type(plan.cap))
            pairs = events.run(f"COPY ({nxt}) TO {_lit(str(out))} (FORMAT parquet)")["Count"]
            res = events.run(f"SELECT coalesce(sum(tot), 0) AS kept FROM {kept}")
        finally:
            for name in (kept, st, seen, both):
                if name is not None:
                    events.execute(f"DROP TABLE IF EXISTS {name}")
        total = events_inside(events.periods, plan.after, plan.through)
        return UpdateResult(inc, out.name, file_digest(out), events.key_kind,
                            int(pairs[0]), total - int(res["kept"][0]), cap)

    @staticmethod
    def _capping(events: EventTable, plan: UpdatePlan, seen: str) -> NDArray[np.int64]:
        res = events.run(capping_sql(seen))
        out = np.zeros((2, plan.n_periods), dtype=np.int64)
        p = np.asarray(res["p"], dtype=np.int64) - plan.after - 1
        out[0, p] = np.asarray(res["t"], dtype=np.int64)
        out[1, p] = np.asarray(res["d"], dtype=np.int64)
        return out

    @staticmethod
    def _increments(events: EventTable, plan: UpdatePlan, kept: str) -> NDArray[np.int64]:
        res = events.run(levels_sql(events.name, kept, plan))
        out = np.zeros((plan.n_groups, len(plan.k_values), plan.n_periods), dtype=np.int64)
        g, p, j, x = (np.asarray(res[c], dtype=np.int64) for c in ("g", "p", "j", "x"))
        out[g, j, p - plan.after - 1] = x
        return out
