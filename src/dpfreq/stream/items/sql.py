"""The SQL of one append's update, shared by the DuckDB and the Spark stores.

Both stores hold the state as a table ``(k, g, c)`` and the append's events as a table
``(k, g, p, n)`` (:mod:`~dpfreq.stream.items.reader`); these functions write the update rule of
:mod:`~dpfreq.stream.items.update` once, in the SQL both engines speak (joins with ``ON``,
``max`` and ``count_if`` aggregates, explicit window frames). What differs — how the state is
read, how the group names and the bounding key reach the query, how the result is written — is
the store's.
"""

from __future__ import annotations

from dpfreq.stream.items.update import UpdatePlan

__all__ = ["kept_sql", "levels_sql", "next_sql", "pairs_sql"]


def _on(a: str, b: str) -> str:
    return f"{a}.k = {b}.k AND {a}.g = {b}.g"


def pairs_sql(ev: str, st: str, plan: UpdatePlan) -> str:
    """Every (item, group) pair of the append: first period, events, previous count."""
    if plan.n_periods == 1:  # one row per pair already
        return (f"SELECT e.k, e.g, e.p AS fp, e.n AS tot, s.c AS c0 FROM {ev} e "
                f"LEFT JOIN {st} s ON {_on('e', 's')}")
    return (f"SELECT e.k, e.g, min(e.p) AS fp, sum(e.n) AS tot, max(s.c) AS c0 FROM {ev} e "
            f"LEFT JOIN {st} s ON {_on('e', 's')} GROUP BY e.k, e.g")


def kept_sql(ev: str, st: str, plan: UpdatePlan, names: str, rank: str) -> str:
    """The pairs kept this append: every pair without a bound; with a bound ``m`` the pairs
    already in the state and, per item, its first ``m − have`` new pairs by first period, keyed
    rank and name. ``names`` is a relation ``nm`` with the group codes and names ``(g, gname)``
    and ``rank`` the SQL of the keyed rank of ``p.k`` and ``nm.gname``."""
    pairs = pairs_sql(ev, st, plan)
    if plan.bound is None:
        return pairs
    have = (f"SELECT k, count(*) AS have FROM {st} WHERE k IN (SELECT k FROM {ev}) "
            "GROUP BY k")
    return (f"WITH pairs AS ({pairs}) SELECT k, g, fp, tot, c0 FROM pairs WHERE c0 IS NOT NULL "
            f"UNION ALL SELECT k, g, fp, tot, c0 FROM (SELECT p.k, p.g, p.fp, p.tot, p.c0, "
            f"coalesce(h.have, 0) AS have, row_number() OVER (PARTITION BY p.k ORDER BY p.fp, "
            f"{rank}, nm.gname) AS r FROM pairs p JOIN {names} ON p.g = nm.g LEFT JOIN ({have}) "
            f"h ON p.k = h.k WHERE p.c0 IS NULL) AS bounded WHERE r <= {int(plan.bound)} - have")


def levels_sql(ev: str, kept: str, plan: UpdatePlan) -> str:
    """``(g, p, j, x)``: the pairs whose count crosses level ``k_values[j]`` in period ``p``
    (a window sum per pair when the append closes several periods)."""
    levels = ", ".join(f"({j}, {k})" for j, k in enumerate(plan.k_values))
    if plan.n_periods == 1:  # a pair's count goes from c0 to c0 + tot in the one period
        run = (f"SELECT g, fp AS p, tot AS n, coalesce(c0, 0) + tot AS run FROM {kept} "
               f"WHERE coalesce(c0, 0) < {plan.cap}")
    else:
        run = (f"SELECT e.g, e.p, e.n, coalesce(kp.c0, 0) + sum(e.n) OVER (PARTITION BY e.k, "
               f"e.g ORDER BY e.p ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run "
               f"FROM {ev} e JOIN {kept} kp ON {_on('e', 'kp')} WHERE coalesce(kp.c0, 0) < "
               f"{plan.cap}")
    return (f"SELECT r.g, r.p, lv.j, count(*) AS x FROM ({run}) r JOIN (VALUES {levels}) AS "
            f"lv(j, kk) ON r.run - r.n < lv.kk AND lv.kk <= r.run GROUP BY r.g, r.p, lv.j")


def next_sql(st: str, added: str, cap: int, count_type: str) -> str:
    """The next generation: the state with the added events ``(k, g, tot)`` (the kept pairs),
    counts capped at ``cap``."""
    return (f"SELECT coalesce(s.k, t.k) AS k, coalesce(s.g, t.g) AS g, CAST(least(coalesce("
            f"CAST(s.c AS BIGINT), 0) + coalesce(t.tot, 0), {cap}) AS {count_type}) AS c FROM "
            f"{st} s FULL OUTER JOIN {added} t ON {_on('s', 't')}")
