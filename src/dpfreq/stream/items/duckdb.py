"""The per-item state in DuckDB: a Parquet file per generation, updated in SQL where the data is.

The state is a table ``(k, g, c)`` — item key (BIGINT or VARCHAR), group code, capped count
(UTINYINT up to K = 255) — stored as ``items-<gen>.parquet``. An append joins the aggregated
events (:mod:`~dpfreq.stream.items.reader`) with the previous generation, computes the
increments of :mod:`~dpfreq.stream.items.update` with a window sum per (item, group), and writes
the next generation with one ``COPY … TO`` of the full outer join: DuckDB streams, spills to
disk when memory runs short, and never brings the items into Python, so 10^8 items fit. On
disk (zstd-free default Parquet compression) an item costs a few bytes; in flight, DuckDB's
hash join holds the append's pairs and streams the rest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpfreq.errors import DataError
from dpfreq.stream.items.files import file_digest
from dpfreq.stream.items.reader import EventTable
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

    @staticmethod
    def _state(current: Path | None, key_kind: str, cap: int) -> str:
        if current is None:
            key = "BIGINT" if key_kind == "integer" else "VARCHAR"
            return (f"(SELECT CAST(NULL AS {key}) AS k, CAST(0 AS BIGINT) AS g, "
                    f"CAST(0 AS {_count_type(cap)}) AS c WHERE false)")
        return f"read_parquet({_lit(str(current))})"

    @staticmethod
    def _kept(events: EventTable, plan: UpdatePlan, st: str) -> str:
        """The SELECT of the (item, group) pairs kept this append (:mod:`.update`)."""
        ev = events.name
        pairs = (f"SELECT e.k, e.g, min(e.p) AS fp, any_value(s.c) AS c0 FROM {ev} e "
                 f"LEFT JOIN {st} s USING (k, g) GROUP BY e.k, e.g")
        if plan.bound is None:
            return f"SELECT k, g, c0 FROM ({pairs})"
        names = ", ".join(f"({i}, {_lit(n)})" for i, n in enumerate(plan.group_names or ()))
        rank = (f"substr(md5({_lit(plan.bound_key_hex)} || {_lit(SEP)} || CAST(p.k AS VARCHAR)"
                f" || {_lit(SEP)} || nm.gname), 1, 16)")
        have = (f"SELECT k, count(*) AS have FROM {st} SEMI JOIN (SELECT DISTINCT k FROM {ev}) "
                "USING (k) GROUP BY k")
        return (f"SELECT k, g, c0 FROM ({pairs}) WHERE c0 IS NOT NULL UNION ALL "
                f"SELECT k, g, c0 FROM (SELECT p.k, p.g, p.c0, coalesce(h.have, 0) AS have, "
                f"row_number() OVER (PARTITION BY p.k ORDER BY p.fp, {rank}, nm.gname) AS r "
                f"FROM ({pairs}) p JOIN (VALUES {names}) nm(g, gname) USING (g) "
                f"LEFT JOIN ({have}) h USING (k) WHERE p.c0 IS NULL) "
                f"WHERE r <= {int(plan.bound)} - have")

    def update(self, events: EventTable, plan: UpdatePlan, current: Path | None,
               key_kind: str | None, out: Path) -> UpdateResult:
        """Apply the append's events to the previous generation; write the next to ``out``."""
        if key_kind is not None and events.key_kind != key_kind:
            raise DataError(f"item of ReachStream.append must be {key_kind} like the stream's "
                            f"earlier appends; got {events.key_kind} keys.")
        st = self._state(current, events.key_kind, plan.cap)
        kept = f"{events.name}_kept"
        events.execute(f"CREATE TEMP TABLE {kept} AS {self._kept(events, plan, st)}")
        try:
            inc, dropped = self._increments(events, plan, kept)
            totals = (f"SELECT k, g, sum(n) AS n FROM {events.name} JOIN {kept} USING (k, g) "
                      "GROUP BY k, g")
            ctype = _count_type(plan.cap)
            events.execute(
                f"COPY (SELECT k, g, CAST(least(coalesce(s.c, 0) + coalesce(t.n, 0), "
                f"{plan.cap}) AS {ctype}) AS c FROM {st} s FULL OUTER JOIN ({totals}) t "
                f"USING (k, g)) TO {_lit(str(out))} (FORMAT parquet)")
            pairs = int(events.run(f"SELECT count(*) AS n FROM read_parquet({_lit(str(out))})")
                        ["n"][0])
        finally:
            events.execute(f"DROP TABLE IF EXISTS {kept}")
        return UpdateResult(inc, out.name, file_digest(out), events.key_kind, pairs, dropped)

    @staticmethod
    def _increments(events: EventTable, plan: UpdatePlan, kept: str
                    ) -> tuple[np.ndarray, int]:
        levels = ", ".join(f"({j}, {k})" for j, k in enumerate(plan.k_values))
        run = (f"SELECT e.g, e.p, e.n, coalesce(kp.c0, 0) + sum(e.n) OVER (PARTITION BY e.k, "
               f"e.g ORDER BY e.p ROWS UNBOUNDED PRECEDING) AS run FROM {events.name} e "
               f"JOIN {kept} kp USING (k, g) WHERE coalesce(kp.c0, 0) < {plan.cap}")
        res = events.run(f"SELECT g, p, lv.j AS j, count(*) AS x FROM ({run}) r JOIN "
                         f"(VALUES {levels}) lv(j, kk) ON r.run - r.n < lv.kk AND "
                         "lv.kk <= r.run GROUP BY ALL")
        out = np.zeros((plan.n_groups, len(plan.k_values), plan.n_periods), dtype=np.int64)
        g, p, j, x = (np.asarray(res[c], dtype=np.int64) for c in ("g", "p", "j", "x"))
        out[g, j, p - plan.after - 1] = x
        lost = events.run(f"SELECT coalesce(sum(n), 0) AS n FROM {events.name} ANTI JOIN {kept} "
                          "USING (k, g)")
        return out, int(lost["n"][0])
