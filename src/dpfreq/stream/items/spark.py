"""The per-item state on Spark: a Parquet directory per generation, updated in Spark SQL.

The same table ``(k, g, c)`` as the DuckDB store (:mod:`~dpfreq.stream.items.duckdb`) — item
key (BIGINT or STRING), group code (BIGINT), capped count (TINYINT up to K = 127, SMALLINT up to
32767, INT above: Spark has no unsigned types) — stored as the directory
``items-<gen>.parquet/`` of Spark's part files. An append joins the previous generation with
the aggregated events (:mod:`~dpfreq.stream.items.spark_events`) into the **kept pairs** of the
append (item, group, first period, events, previous count; at ``unit="item"`` with a bound
``m`` the new pairs of an item ranked by first period, keyed MD5 rank and name, as in
:mod:`~dpfreq.stream.items.update`), counts the increments from them (a window sum per pair
when the append closes several periods) and writes the next generation with one full outer
join (of the state with the kept pairs or, without a bound, directly with the aggregated events,
as Spark's own exact update would). Two Spark jobs read the state: the increments (with two
counts) and the next generation. Everything runs on the executors in Spark SQL; only the
increments (groups × k levels × periods numbers) and the counts reach the driver, so the state
grows with the cluster, not with the driver. The bounding key never appears in the SQL text (it
is a column of a small joined table). The state directory must be on a file system that the
driver and the executors share (any local directory with a local master); after each write the
driver checks that it sees every pair the job counted (Parquet footers), and refuses the
append, before the manifest, when it does not. A stream measuring what its cap dropped also
remembers the capped-out pairs (count 0) and counts the increments of ``T`` and ``D`` in the
first job (:mod:`.update`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

import dpfreq.stream.items.sql as rules
from dpfreq.engines import get_engine
from dpfreq.errors import public_caller
from dpfreq.stream.items.files import check_rows_visible, file_digest
from dpfreq.stream.items.reader import events_inside
from dpfreq.stream.items.spark_events import SparkEvents, read_spark_events, spark_guard
from dpfreq.stream.items.update import SEP, UpdatePlan, UpdateResult

__all__ = ["SparkItems", "count_type"]


_STATS = ("total", "nn", "late", "future")


def count_type(cap: int) -> str:
    """The smallest Spark integer type holding counts up to ``cap``."""
    return "TINYINT" if cap <= 127 else "SMALLINT" if cap <= 32767 else "INT"


class SparkItems:
    """Per-item state as Parquet directories read and written by Spark SQL."""

    engine = "spark"
    suffix = "parquet"
    read = staticmethod(read_spark_events)

    def __init__(self) -> None:
        get_engine("spark")  # pyspark missing: EngineUnavailableError naming the pip extra

    @staticmethod
    def _state(events: SparkEvents, current: Path | None, cap: int) -> str:
        name = f"{events.name}_state"
        if current is None:
            key = "BIGINT" if events.key_kind == "integer" else "STRING"
            return events.view(f"SELECT CAST(NULL AS {key}) AS k, CAST(0 AS BIGINT) AS g, "
                               f"CAST(0 AS {count_type(cap)}) AS c WHERE false", name)
        key = "BIGINT" if events.key_kind == "integer" else "STRING"
        return events.view(events.spark.read.parquet(str(current)).selectExpr(
            f"CAST(k AS {key}) AS k", "g", "c"), name)

    @staticmethod
    def _ranking(events: SparkEvents, plan: UpdatePlan) -> tuple[str, str]:
        """``(names relation, rank SQL)`` of the bounded pairs (:mod:`.sql`); the key is a
        column of the names' table, not text of the query."""
        names = events.view(events.spark.createDataFrame(
            [(i, n, plan.bound_key_hex) for i, n in enumerate(plan.group_names or ())],
            "g bigint, gname string, bk string"), f"{events.name}_names")
        sep = f"chr({ord(SEP)})"
        rank = f"substr(md5(concat(nm.bk, {sep}, CAST(p.k AS STRING), {sep}, nm.gname)), 1, 16)"
        return f"{names} AS nm", rank

    def update(self, events: SparkEvents, plan: UpdatePlan, current: Path | None,
               out: Path, check: Callable[[], None]) -> UpdateResult:
        """Apply the append's events to the previous generation; write the next to ``out``.
        ``check()`` (the stream's refusals of late and future events) runs after the first
        job, which computes the events' counts with the increments, before anything is
        written."""
        seen = None
        with spark_guard():
            st = self._state(events, current, plan.cap)
            names, rank = self._ranking(events, plan) if plan.bound is not None else ("", "")
            kept = events.view(rules.kept_sql(events.name, st, plan, names, rank),
                               f"{events.name}_kept")
            if plan.measures_capping:  # the pairs remembered (count 0 when not kept)
                seen = events.view(rules.remembered_sql(events.name, st, plan, names, rank),
                                   f"{events.name}_seen")
            inc, pairs, n_kept, cap = self._increments(events, plan, kept, st, seen)
        check()
        with spark_guard():
            # without a bound every pair of the append is kept: the next generation joins the
            # state with the aggregated events directly (the state is read and joined once)
            added = rules.added_sql(kept, seen) if plan.bound is not None else (
                f"(SELECT k, g, sum(n) AS tot FROM {events.name} GROUP BY k, g)")
            events.spark.sql(rules.next_sql(st, added, plan.cap, count_type(plan.cap))
                             ).write.mode("overwrite").parquet(str(out))
        check_rows_visible(out, pairs, public_caller())
        total = events_inside(events.periods, plan.after, plan.through)
        return UpdateResult(inc, out.name, file_digest(out), events.key_kind, pairs,
                            total - n_kept, cap)

    @staticmethod
    def _increments(events: SparkEvents, plan: UpdatePlan, kept: str, st: str,
                    seen: str | None) -> tuple[NDArray[np.int64], int, int,
                                               NDArray[np.int64] | None]:
        """``(increments, pairs after the append, events kept, increments of T and D or
        None)`` and the events' counts (:meth:`SparkEvents.fill`) in one Spark job: the
        branches share the aggregated events and the kept pairs (Spark reuses their
        exchanges)."""
        stats = ", ".join(_STATS)
        more = "0" if seen is None else f"(SELECT count_if(NOT kp) FROM {seen})"
        capped = "" if seen is None else (
            f" UNION ALL SELECT 3, p, t, d, 0, 0, 0, 0 FROM ({rules.capping_sql(seen)})")
        levels = rules.levels_sql(events.name, kept, plan)
        rows = events.rows(
            f"SELECT 0 AS what, g AS total, p AS nn, j AS late, x AS future, 0 AS c, 0 AS s, "
            f"0 AS h FROM ({levels}) UNION ALL SELECT 1, (SELECT "
            f"count(*) FROM {st}) + {more} + count_if(c0 IS NULL), coalesce(sum(tot), 0), 0, "
            f"0, 0, 0, 0 FROM {kept} UNION ALL SELECT 2, {stats}, 0, 0, 0 FROM "
            f"({events.stats_sql}) UNION ALL SELECT 4, p, c, s, h, e, 0, 0 FROM "
            f"({events.periods_sql}){capped}")
        events.fill(next(r for r in rows if r["what"] == 2),
                    [dict(zip(("p", "c", "s", "h", "e"), (r["total"], r["nn"], r["late"],
                                                          r["future"], r["c"]), strict=True))
                     for r in rows if r["what"] == 4])
        counts = next(r for r in rows if r["what"] == 1)
        found = [r for r in rows if r["what"] == 0]
        out = np.zeros((plan.n_groups, len(plan.k_values), plan.n_periods), dtype=np.int64)
        if found:  # (g, p, j, x) in the columns of the counts
            g, p, j, x = (np.array([r[c] for r in found], dtype=np.int64)
                          for c in ("total", "nn", "late", "future"))
            out[g, j, p - plan.after - 1] = x
        cap = None
        if seen is not None:  # (p, t, d) in the columns of the counts
            cap = np.zeros((2, plan.n_periods), dtype=np.int64)
            for r in (r for r in rows if r["what"] == 3):
                cap[:, int(r["total"]) - plan.after - 1] = (int(r["nn"]), int(r["late"]))
        return out, int(counts["total"]), int(counts["nn"]), cap
