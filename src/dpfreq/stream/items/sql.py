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

__all__ = ["added_sql", "bounded_sql", "capping_sql", "kept_of", "kept_sql", "levels_sql",
           "next_sql", "pairs_sql", "remembered_of", "remembered_sql"]


def _on(a: str, b: str) -> str:
    return f"{a}.k = {b}.k AND {a}.g = {b}.g"


def pairs_sql(ev: str, st: str, plan: UpdatePlan) -> str:
    """Every (item, group) pair of the append: first period, events, previous count."""
    if plan.n_periods == 1:  # one row per pair already
        return (f"SELECT e.k, e.g, e.p AS fp, e.n AS tot, s.c AS c0 FROM {ev} e "
                f"LEFT JOIN {st} s ON {_on('e', 's')}")
    return (f"SELECT e.k, e.g, min(e.p) AS fp, sum(e.n) AS tot, max(s.c) AS c0 FROM {ev} e "
            f"LEFT JOIN {st} s ON {_on('e', 's')} GROUP BY e.k, e.g")


def _ranked(ev: str, st: str, plan: UpdatePlan, names: str, rank: str) -> str:
    """The new pairs of relation ``pairs`` ranked per item by first period, keyed rank and
    name (``r``), with the item's ``room`` to keep (``m − have``; a pair of the state with count
    0 was remembered, not kept) and the room to remember (``lim``: up to ``M`` pairs in all)."""
    m = int(plan.bound or 0)
    big = int(plan.seen_bound or m)
    have = (f"SELECT k, count_if(c > 0) AS have, count(*) AS seen FROM {st} WHERE k IN "
            f"(SELECT k FROM {ev}) GROUP BY k")
    return (f"SELECT p.k, p.g, p.fp, p.tot, p.c0, {m} - coalesce(h.have, 0) AS room, "
            f"greatest({big} - coalesce(h.seen, 0), {m} - coalesce(h.have, 0)) AS lim, "
            f"row_number() OVER (PARTITION BY p.k ORDER BY p.fp, {rank}, nm.gname) AS r "
            f"FROM pairs p JOIN {names} ON p.g = nm.g LEFT JOIN ({have}) h ON p.k = h.k "
            f"WHERE p.c0 IS NULL")


def kept_sql(ev: str, st: str, plan: UpdatePlan, names: str, rank: str) -> str:
    """The pairs kept this append: every pair without a bound; with a bound ``m`` the pairs
    already kept in the state and, per item, its first ``m − have`` new pairs by first period,
    keyed rank and name. ``names`` is a relation ``nm`` with the group codes and names ``(g,
    gname)`` and ``rank`` the SQL of the keyed rank of ``p.k`` and ``nm.gname``."""
    pairs = pairs_sql(ev, st, plan)
    if plan.bound is None:
        return pairs
    return (f"WITH pairs AS ({pairs}) SELECT k, g, fp, tot, c0 FROM pairs WHERE c0 > 0 "
            f"UNION ALL SELECT k, g, fp, tot, c0 FROM ({_ranked(ev, st, plan, names, rank)}) "
            f"AS bounded WHERE r <= room")


def remembered_sql(ev: str, st: str, plan: UpdatePlan, names: str, rank: str) -> str:
    """``(k, g, fp, kp)``: the new pairs the state remembers (a stream measuring what its cap
    dropped, :mod:`.update`), ``kp`` whether the pair is kept."""
    return (f"WITH pairs AS ({pairs_sql(ev, st, plan)}) SELECT k, g, fp, r <= room AS kp FROM "
            f"({_ranked(ev, st, plan, names, rank)}) AS bounded WHERE r <= lim")


def bounded_sql(ev: str, st: str, plan: UpdatePlan, names: str, rank: str) -> str:
    """Every pair of the append under a bound, in one relation to materialise once: the pairs
    of the state (``r``, ``room``, ``lim`` NULL) and the new pairs ranked as in
    :func:`kept_sql`; :func:`kept_of` and :func:`remembered_of` read it."""
    return (f"WITH pairs AS ({pairs_sql(ev, st, plan)}) SELECT k, g, fp, tot, c0, "
            "CAST(NULL AS BIGINT) AS room, CAST(NULL AS BIGINT) AS lim, CAST(NULL AS BIGINT) "
            "AS r FROM pairs WHERE c0 IS NOT NULL UNION ALL SELECT * FROM "
            f"({_ranked(ev, st, plan, names, rank)}) AS ranked")


def kept_of(bounded: str) -> str:
    """:func:`kept_sql` from the relation of :func:`bounded_sql`."""
    return (f"SELECT k, g, fp, tot, c0 FROM {bounded} WHERE c0 > 0 UNION ALL SELECT k, g, fp, "
            f"tot, c0 FROM {bounded} WHERE c0 IS NULL AND r <= room")


def remembered_of(bounded: str) -> str:
    """:func:`remembered_sql` from the relation of :func:`bounded_sql`."""
    return (f"SELECT k, g, fp, r <= room AS kp FROM {bounded} WHERE c0 IS NULL AND r <= lim")


def capping_sql(remembered: str) -> str:
    """``(p, t, d)``: per period the new pairs remembered and those not kept (the increments
    of ``T`` and ``D``)."""
    return (f"SELECT fp AS p, count(*) AS t, count_if(NOT kp) AS d FROM {remembered} "
            "GROUP BY fp")


def added_sql(kept: str, remembered: str | None) -> str:
    """The pairs the next generation adds to the state: the kept ones with their events, and
    the remembered ones not kept with count 0."""
    if remembered is None:
        return kept
    return (f"(SELECT k, g, tot FROM {kept} UNION ALL SELECT k, g, 0 AS tot FROM {remembered} "
            "WHERE NOT kp)")


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
