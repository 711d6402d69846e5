"""The grouped bounding and the summaries as one SQL statement, for DuckDB and Spark SQL alike.

One builder writes the statement for both SQL engines (a :class:`Dialect` holds their few
differences), so they compute the same thing by construction; the numpy reference is
:mod:`dpfreq.engines.memory`. The statement reads the projected events (item key ``k``, group
text ``g``, time ``t``, non-integral flag ``f``, period ``p``), and returns in one result

* ``kind = 2`` rows: per (group, period) of the rows *before* the bounding, the counts of rows,
  non-null items, times and groups and of non-integral times — the column checks, the events
  outside ``1..T`` and slot 0 (the events per period) are read from them;
* ``kind = 0`` rows: the summed ``(group index, slot, key, weight)`` entries; group ``-1``
  holds the (item, group) pairs and the kept pairs of a bounded request.

Steps: events of listed groups inside ``1..T`` → distinct pairs with their first period →
the keyed rank of :mod:`dpfreq.engines.grouping` (``row_number`` per item; DuckDB ranks only
the items with more than ``m`` pairs, Spark every pair in one window, so that it reads the
pairs once) → the kept pairs' rows → per spec a ``GROUP BY`` (the k-th period for
``cumulative``) or a window pass (``lag``/``lead`` for ``all`` and ``rolling``) → one final
``GROUP BY (gi, slot, key)``. Only the entries and the counts leave the engine; on Spark no
Python runs on the executors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq.engines import _common as common
from dpfreq.engines.grouping import PRIME, SEP, group_value
from dpfreq.engines.requests import CountRequest, GroupedPrevalences, Summaries, SummaryRequest

__all__ = ["DUCKDB", "SPARK", "Dialect", "Statement", "count_sql", "finish_counts",
           "finish_summaries", "summaries_sql"]

@dataclass(frozen=True)
class Dialect:
    """What differs between DuckDB SQL and Spark SQL in these statements."""

    name: str
    text: str
    semi: str
    anti: str

    def div(self, a: str, b: int) -> str:
        """Integer division of non-negative ``a`` by ``b``."""
        return f"(({a}) // {b})" if self.name == "duckdb" else f"(({a}) div {b})"

    def word(self, hex_expr: str, start: int) -> str:
        """The 32-bit word of 8 hex digits of ``hex_expr`` from (1-based) ``start``, a BIGINT."""
        digits = f"substr({hex_expr}, {start}, 8)"
        if self.name == "duckdb":
            return f"CAST('0x' || {digits} AS BIGINT)"
        return f"CAST(conv({digits}, 16, 10) AS BIGINT)"

    def as_text(self, expr: str) -> str:
        """``expr`` cast to text."""
        return f"CAST({expr} AS {self.text})"

    def literal(self, text: str) -> str:
        """A string literal: quotes doubled; Spark also reads backslash escapes, so its
        backslashes are doubled too."""
        if self.name == "spark":
            text = text.replace("\\", "\\\\")
        return "'" + text.replace("'", "''") + "'"


DUCKDB = Dialect("duckdb", "VARCHAR", "SEMI JOIN", "ANTI JOIN")


_NAME = re.compile(r"^(\w+) AS \(")
_LITERAL = re.compile(r"'(?:[^'\\]|\\.|'')*'")


@dataclass(frozen=True)
class Statement:
    """A statement as named steps (``name AS (SELECT ...)``, each reading earlier ones) and a
    final SELECT; ``reused`` names the steps read several times (an engine that does not
    share common subplans materialises those)."""

    steps: tuple[str, ...]
    final: str
    reused: tuple[str, ...] = ()

    def with_clause(self) -> str:
        """The whole statement as one ``WITH`` query (DuckDB), the first reused step (the one
        that reads the source) ``MATERIALIZED``: the source is read once."""
        steps = [s.replace(" AS (", " AS MATERIALIZED (", 1)
                 if self.reused and s.startswith(self.reused[0] + " AS (") else s
                 for s in self.steps]
        return f"WITH {', '.join(steps)} {self.final}"

    def named(self, prefix: str) -> tuple[list[tuple[str, str, str]], str]:
        """``([(name, renamed, SELECT)], final)`` with every step renamed ``prefix + name``
        (outside string literals), for engines that register the steps as views."""
        names = [m.group(1) for m in map(_NAME.match, self.steps) if m is not None]
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")

        def rename(sql: str) -> str:
            out, last = [], 0
            for lit in _LITERAL.finditer(sql):
                out.append(pattern.sub(lambda x: prefix + x.group(1), sql[last:lit.start()]))
                out.append(lit.group(0))
                last = lit.end()
            out.append(pattern.sub(lambda x: prefix + x.group(1), sql[last:]))
            return "".join(out)

        steps = []
        for step in self.steps:
            m = _NAME.match(step)
            assert m is not None
            body = step[m.end():].strip()
            assert body.endswith(")")
            steps.append((m.group(1), prefix + m.group(1), rename(body[:-1])))
        return steps, rename(self.final)
SPARK = Dialect("spark", "STRING", "LEFT SEMI JOIN", "LEFT ANTI JOIN")


def _md5(d: Dialect, key_hex: str, tag: str, expr: str) -> str:
    return f"md5({d.literal(key_hex + SEP + tag + SEP)} || {d.as_text(expr)})"


def _listed(d: Dialect, names: tuple[str, ...], key_hex: str) -> str:
    """CTE ``listed(g, gi, hg, gr)`` of the listed groups: text, index, ``h_g`` (computed
    here, as the reference; 0 without a key) and the rank of the text in sorted order."""
    order = {x: r for r, x in enumerate(sorted(names))}  # code points: the order of UTF-8
    rows = ", ".join(f"({d.literal(x)}, {i}, {group_value(key_hex, x) if key_hex else 0}, "
                     f"{order[x]})" for i, x in enumerate(names))
    return f"listed AS (SELECT * FROM (VALUES {rows}) AS l(g, gi, hg, gr))"


def _bounded(d: Dialect, m: int, key_hex: str, by: str) -> list[str]:
    """CTEs ``overk``, ``overc``, ``ranked`` and ``kept``: the kept ``(k, by)`` pairs of
    ``pairs`` (module docstring). ``by = "gi"``: the listed groups' index (their text and
    ``h_g`` from ``listed``); ``by = "g"``: the group text (``h_g`` computed here)."""
    h = _md5(d, key_hex, "i", "k")
    a = f"(1 + ({d.word(h, 1)} % {PRIME - 1}))"
    b = f"({d.word(h, 9)} % {PRIME})"
    if by == "gi":
        hg, text = "l.hg", "l.g"
        join = "JOIN listed l ON pairs.gi = l.gi"
    else:
        hg, text, join = f"({d.word(_md5(d, key_hex, 'g', 'pairs.g'), 1)} % {PRIME})", \
            "pairs.g", ""
    rank = f"((o.ia * {hg} + o.ib) % {PRIME})"
    return [f"overk AS (SELECT k FROM pairs GROUP BY k HAVING count(*) > {m})",
            f"overc AS (SELECT k, {a} AS ia, {b} AS ib FROM overk)",
            f"ranked AS (SELECT pairs.k, pairs.{by}, row_number() OVER (PARTITION BY pairs.k "
            f"ORDER BY {rank}, {text}) AS r FROM pairs JOIN overc o ON pairs.k = o.k {join})",
            f"kept AS (SELECT k, {by} FROM pairs {d.anti} overk USING (k) UNION ALL "
            f"SELECT k, {by} FROM ranked WHERE r <= {m})"]


def _bounding(d: Dialect, m: int | None, key_hex: str,
              k1: list[int]) -> tuple[list[str], list[str], list[int]]:
    """(CTEs ``kp`` and ``be`` with what they read, SELECTs of the entries of group -1 — slot
    0 the pairs, slot 1 the kept pairs —, the slots of cumulative ``k = 1`` summaries still
    to write): nothing bounded (``m`` None: the pairs are not counted), Spark's one window
    (:func:`_ranked_all`, which writes the first ``k = 1`` slot itself) or DuckDB's rank of
    the items over ``m`` (:func:`_bounded`)."""
    if m is None:
        return ["kp AS (SELECT * FROM pairs)", "be AS (SELECT * FROM ev)"], [], k1
    if d.name == "spark":
        return ([*_ranked_all(d, m, key_hex, k1[:1]),
                 f"be AS (SELECT * FROM ev {d.semi} kp USING (k, gi))"],
                ["SELECT gi, slot, key, w FROM rk"], [])
    return ([*_bounded(d, m, key_hex, "gi"),
             f"kp AS (SELECT * FROM pairs {d.semi} kept USING (k, gi))",
             f"be AS (SELECT * FROM ev {d.semi} kept USING (k, gi))"],
            [f"SELECT -1 AS gi, {i} AS slot, 0 AS key, count(*) AS w FROM {table}"
             for i, table in ((0, "pairs"), (1, "kept"))], k1)


def _ranked_all(d: Dialect, m: int, key_hex: str, k1: list[int]) -> list[str]:
    """CTEs ``ranked``, ``kp`` and ``rk``: the keyed rank of every pair in one window per item
    (with the item's number of pairs ``np``), the kept pairs, and, read from ``ranked`` in
    one pass, the entries of group -1 (slot 0: pairs, slot 1: kept pairs) and those of the
    cumulative ``k = 1`` summary in slot ``k1[0]`` if asked. The same rank and kept pairs as
    :func:`_bounded`, which ranks only the items over ``m``; this form reads the pairs once,
    for engines that compute a step once per reader (Spark)."""
    h = _md5(d, key_hex, "i", "pairs.k")
    a = f"(1 + ({d.word(h, 1)} % {PRIME - 1}))"
    b = f"({d.word(h, 9)} % {PRIME})"
    w = "OVER (PARTITION BY pairs.k"
    rows = "(0), (1)" + "".join(f", ({2 + j})" for j in range(len(k1)))
    slot = "i" if not k1 else f"CASE WHEN i < 2 THEN i ELSE {k1[0]} END"
    return [f"ranked AS (SELECT pairs.k, pairs.gi, pairs.fp, row_number() {w} ORDER BY "
            f"(({a} * l.hg + {b}) % {PRIME}), l.gr) AS r, count(*) {w}) AS np FROM pairs "
            f"JOIN listed l ON pairs.gi = l.gi)",
            f"kp AS (SELECT k, gi, fp FROM ranked WHERE r <= {m})",
            f"rk AS (SELECT CASE WHEN i < 2 THEN -1 ELSE gi END AS gi, {slot} AS slot, "
            f"CASE WHEN i < 2 THEN 0 ELSE fp END AS key, CASE i WHEN 0 THEN np WHEN 1 THEN "
            f"least(np, {m}) ELSE 1 END AS w FROM ranked CROSS JOIN (VALUES {rows}) AS ix(i) "
            f"WHERE (i < 2 AND r = 1) OR (i >= 2 AND r <= {m}))"]


def _cumulative(slot: int, k: int) -> tuple[list[str], str]:
    """(CTE, SELECT of entries) of the k-th period of each pair: ``k = 1`` reads the pairs'
    first period (``kp``), larger ``k`` a running sum over the pairs' periods."""
    if k == 1:
        return [], f"SELECT gi, {slot} AS slot, fp AS key, count(*) AS w FROM kp GROUP BY gi, fp"
    cte = (f"cm{slot} AS (SELECT gi, p, c, sum(c) OVER (PARTITION BY k, gi ORDER BY p ROWS "
           f"BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum FROM t3)")
    return [cte], (f"SELECT gi, {slot} AS slot, p AS key, count(*) AS w FROM cm{slot} "
                 f"WHERE cum >= {k} AND cum - c < {k} GROUP BY gi, p")


def _all(slot: int, k: int, horizon: int) -> tuple[list[str], str]:
    """(CTE, SELECT) of the ±1 points of every event s >= k (over the bounded events ``be``)."""
    w = "OVER (PARTITION BY k, gi ORDER BY p)"
    x2 = "p" if k == 1 else f"lag(p, {k - 1}, 0) {w}"
    cte = (f"aw{slot} AS (SELECT gi, p, row_number() {w} AS s, lag(p, {k}, 0) {w} AS x1, "
           f"{x2} AS x2 FROM be)")
    span = horizon + 2
    sel = (f"SELECT gi, {slot} AS slot, x1 * {span} + p AS key, 1 AS w FROM aw{slot} "
           f"WHERE s >= {k} UNION ALL SELECT gi, {slot}, x2 * {span} + p, -1 FROM aw{slot} "
           f"WHERE s >= {k}")
    return [cte], sel


def _rolling(d: Dialect, slot: int, k: int, width: int, horizon: int) -> tuple[list[str], str]:
    """(CTEs, SELECT) of the block points (see :class:`~dpfreq.engines.base.SummarySpec`)."""
    nb, high, span = horizon // width + 1, 2 * width + 1, width + 2
    w = "OVER (PARTITION BY k, gi, b ORDER BY loc)"
    lk1 = "loc" if k == 1 else f"lead(loc, {k - 1}, {high}) {w}"
    b1 = d.div("p - 1", width)
    ctes = [f"fb{slot} AS (SELECT k, gi, p, {b1} AS b FROM be)",
            f"fx{slot} AS (SELECT k, gi, b, p - (b - 1) * {width} AS loc FROM fb{slot} "
            f"UNION ALL SELECT k, gi, b + 1 AS b, p - b * {width} AS loc FROM fb{slot} "
            f"WHERE b + 1 < {nb})",
            f"fw{slot} AS (SELECT gi, b, loc, row_number() {w} AS r, lead(loc, 1, {high}) {w} "
            f"AS l1, lead(loc, {k}, {high}) {w} AS lk, {lk1} AS lk1 FROM fx{slot})",
            f"fr{slot} AS (SELECT gi, b, loc AS tj, l1 AS tj1, lk AS tjk FROM fw{slot} "
            f"UNION ALL SELECT gi, b, 0 AS tj, loc AS tj1, lk1 AS tjk FROM fw{slot} "
            f"WHERE r = 1)"]
    keep = f"tj < tj1 AND tj + {width} < tjk"
    sel = (f"SELECT gi, {slot} AS slot, b * {span} + tj AS key, 1 AS w FROM fr{slot} "
           f"WHERE {keep} UNION ALL SELECT gi, {slot}, ({nb} + b) * {span} + "
           f"least(tj1, tjk - {width}), 1 FROM fr{slot} WHERE {keep} UNION ALL "
           f"SELECT gi, {slot}, {2 * nb * span} + b, 1 FROM fw{slot} WHERE r = 1")
    return ctes, sel


def summaries_sql(d: Dialect, events: str, period: str, request: SummaryRequest,
                  names: tuple[str, ...] | None, m: int | None, key_hex: str) -> Statement:
    """The one statement of :meth:`Summarizing.summaries` (module docstring).

    ``events``: a SELECT of ``k, t, f`` and, for a grouped request, ``g`` (group text) from
    the source; ``period``: the SQL period of column ``t``; ``names``: the listed groups
    (None only for an ungrouped request). The large steps group by integers only (item key,
    group index, period): the group text is joined once, to find each row's group.
    """
    horizon = request.horizon
    grouped = request.grouping is not None
    ctes = [f"raw AS (SELECT e.*, {period} AS p FROM ({events}) e)"]
    if grouped:
        assert names is not None
        ctes += [_listed(d, names, key_hex),
                 "lab AS (SELECT raw.k, raw.g, raw.t, raw.f, raw.p, listed.gi FROM raw "
                 "LEFT JOIN listed ON raw.g = listed.g)"]
        g_count = "count(g)"
    else:
        ctes.append("lab AS (SELECT k, t, f, p, 0 AS gi FROM raw)")
        g_count = "count(*)"
    # the checks and the events per period: one GROUP BY over the rows before the bounding
    q = f"CASE WHEN p < 1 OR p > {horizon} THEN -1 ELSE p END"
    ctes += [f"agg AS (SELECT coalesce(gi, -1) AS gi, coalesce({q}, -2) AS q, count(*) AS c0, "
             f"count(k) AS c1, count(t) AS c2, {g_count} AS c3, "
             f"count(CASE WHEN f THEN 1 END) AS c4 FROM lab GROUP BY 1, 2)",
             f"ev AS (SELECT k, gi, p FROM lab WHERE gi IS NOT NULL AND k IS NOT NULL "
             f"AND p >= 1 AND p <= {horizon})",
             "pairs AS (SELECT k, gi, min(p) AS fp FROM ev GROUP BY k, gi)"]
    k1 = [slot for slot, spec in enumerate(request.specs, start=1)
          if spec.family == "cumulative" and spec.k == 1]
    bounding, counted, k1 = _bounding(d, m, key_hex, k1)
    ctes += bounding
    if any(s.family == "cumulative" and s.k > 1 for s in request.specs):
        ctes.append("t3 AS (SELECT k, gi, p, count(*) AS c FROM be GROUP BY k, gi, p)")
    sels = list(counted)
    for slot, spec in enumerate(request.specs, start=1):
        if spec.family == "cumulative":
            if spec.k == 1 and slot not in k1:
                continue
            cte, sel = _cumulative(slot, spec.k)
        elif spec.family == "all":
            cte, sel = _all(slot, spec.k, horizon)
        else:
            cte, sel = _rolling(d, slot, spec.k, spec.width, horizon)
        ctes += cte
        sels.append(sel)
    parts = [] if request.checked else [
        "SELECT 2 AS kind, gi, i AS slot, q AS key, CASE i WHEN 0 THEN c0 WHEN 1 THEN c1 WHEN 2 "
        "THEN c2 WHEN 3 THEN c3 ELSE c4 END AS w FROM agg CROSS JOIN "
        "(VALUES (0), (1), (2), (3), (4)) AS ix(i)"]
    if sels:
        body = " UNION ALL ".join(f"({s})" for s in sels)
        parts.insert(0, f"SELECT 0 AS kind, gi, slot, key, CAST(sum(w) AS BIGINT) AS w "
                        f"FROM ({body}) u GROUP BY gi, slot, key HAVING sum(w) <> 0")
    # Spark inlines every step into one plan (a step read twice is computed twice, a scan
    # at most); DuckDB materialises the first reused step, so it reads the source once
    reused = () if d.name == "spark" else ("lab", "pairs", "kept", "be")
    return Statement(tuple(ctes), " UNION ALL ".join(parts), reused)


def count_sql(d: Dialect, events: str, names: tuple[str, ...] | None, m: int | None,
              key_hex: str, max_count: int | None, per_item: str = "rows") -> Statement:
    """The statement of the grouped count-of-counts: ``kind = 1`` rows are the checks (0: null
    items, 1: null groups, 2: pairs, 3: kept pairs); ``kind = 0`` rows are ``(g, gi, v, p)``:
    ``p`` items of group ``gi`` (or, with ``names=None``, of the group of text ``g``) have
    count ``v`` (clamped at ``max_count``).

    ``events``: a SELECT of ``k`` (item key) and ``g`` (group text) from the source;
    ``names=None``: every group of the data (its text is then the group's identity);
    ``per_item="groups"``: ``v`` is the item's number of kept groups instead of its rows;
    ``per_item="distinct_groups"`` (``m`` None): its number of distinct groups.
    """
    if names is None:
        by, ctes = "g", [f"raw AS ({events})",
                         "lab AS (SELECT k, g, 0 AS gi FROM raw WHERE g IS NOT NULL)"]
    else:
        by, ctes = "gi", [f"raw AS ({events})", _listed(d, names, key_hex),
                          "lab AS (SELECT raw.k, listed.gi, '' AS g FROM raw JOIN listed "
                          "ON raw.g = listed.g)"]
    ctes.append("pairs AS (SELECT k, g, gi, count(*) AS c FROM lab WHERE k IS NOT NULL "
                "GROUP BY k, g, gi)")
    if m is not None:
        ctes += [*_bounded(d, m, key_hex, by),
                 f"kc AS (SELECT * FROM pairs {d.semi} kept USING (k, {by}))"]
        rows, n_pairs, n_kept = "kc", "(SELECT count(*) FROM pairs)", "(SELECT count(*) FROM kept)"
        if per_item == "groups":
            ctes.append("kg AS (SELECT k, g, gi, count(*) OVER (PARTITION BY k) AS c FROM kc)")
            rows = "kg"
    elif per_item == "distinct_groups":  # each pair counts its item's distinct groups
        ctes.append("kg AS (SELECT k, g, gi, count(*) OVER (PARTITION BY k) AS c FROM pairs)")
        rows, n_pairs, n_kept = "kg", "0", "0"
    else:
        rows, n_pairs, n_kept = "pairs", "0", "0"
    value = "c" if max_count is None else f"least(c, {int(max_count)})"
    ctes.append(f"st AS (SELECT count(*) - count(k) AS s0, count(*) - count(g) AS s1, "
                f"CAST({n_pairs} AS BIGINT) AS s2, CAST({n_kept} AS BIGINT) AS s3 FROM raw)")
    return Statement(tuple(ctes), f"SELECT 0 AS kind, g, gi, {value} AS v, count(*) AS p "
                     f"FROM {rows} GROUP BY g, gi, {value} UNION ALL "
                     f"SELECT 1, '', i, 0, CASE i WHEN 0 THEN s0 WHEN 1 THEN s1 WHEN 2 THEN s2 "
                     f"ELSE s3 END FROM st CROSS JOIN (VALUES (0), (1), (2), (3)) AS ix(i)",
                     ("raw", "pairs", "kept"))  # the first reads the source


def finish_summaries(res: Mapping[str, Any], request: SummaryRequest,
                     names: tuple[str, ...] | None) -> Summaries:
    """The :class:`Summaries` of a fetched :func:`summaries_sql` result (columns ``kind, gi,
    slot, key, w`` as numpy arrays), after the column checks every engine makes in this order:
    null items, null or non-integral times, null groups, then events outside the horizon.

    ``kind = 2`` rows are the per-(group, period) counts of the rows before the bounding
    (``gi = -1``: rows of no listed group; ``key = -1``: outside ``1..T``, ``-2``: no
    period), ``slot`` the column (rows, items, times, groups, non-integral times); they give
    the checks and slot 0, the events per period. ``kind = 0`` rows of group -1: the pairs
    and the kept pairs (slots 0 and 1) of a bounded request."""
    kind, gi, slot, key, w = (np.asarray(res[c], dtype=np.int64)
                              for c in ("kind", "gi", "slot", "key", "w"))
    agg = kind == 2
    col = [agg & (slot == i) for i in range(5)]
    n, ni, nt, ng, nf = (int(w[c].sum()) for c in col)
    listed = gi >= 0
    nl = int(w[col[0] & listed].sum())
    n_bad = int(w[col[0] & listed & (key == -1)].sum())
    pairs = (kind == 0) & (gi == -1)
    counted = dict(zip(slot[pairs].tolist(), w[pairs].tolist(), strict=True))
    n_pairs, n_kept = int(counted.get(0, 0)), int(counted.get(1, 0))
    common.check_event_counts(request.item, request.time, n, ni, nt + nf, nf)
    if request.grouping is not None and ng < n:
        raise common.null_error(request.grouping.column)
    empty = np.zeros(0, dtype=np.int64)
    if n_bad and not request.drop_out_of_range:
        return Summaries(names, empty, empty.copy(), empty.copy(), empty.copy(), 0, n_bad)
    per_period = col[1] & listed & (key >= 1) & (w > 0)  # slot 0: the events per period
    body = (kind == 0) & (gi >= 0)
    g = np.concatenate((gi[per_period], gi[body]))
    s = np.concatenate((np.zeros(int(per_period.sum()), dtype=np.int64), slot[body]))
    k = np.concatenate((key[per_period], key[body]))
    ws = np.concatenate((w[per_period], w[body]))
    order = np.lexsort((k, s, g))
    return Summaries(names, g[order], s[order], k[order], ws[order], nl - n_bad, n_bad,
                     n_pairs, n_kept)


def finish_counts(res: Mapping[str, Any], request: CountRequest,
                  names: tuple[str, ...] | None) -> GroupedPrevalences:
    """The :class:`GroupedPrevalences` of a fetched :func:`count_sql` result (columns ``kind,
    g, gi, v, p``), after the null checks (items first, then groups)."""
    kind = np.asarray(res["kind"], dtype=np.int64)
    gi = np.asarray(res["gi"], dtype=np.int64)
    p = np.asarray(res["p"], dtype=np.int64)
    stat = dict(zip(gi[kind == 1].tolist(), p[kind == 1].tolist(), strict=True))
    if stat.get(0, 0) > 0:
        raise common.null_error(request.item)
    if stat.get(1, 0) > 0:
        raise common.null_error(request.grouping.column)
    body = kind == 0
    v, p, gi = np.asarray(res["v"], dtype=np.int64)[body], p[body], gi[body]
    extra = (int(stat.get(2, 0)), int(stat.get(3, 0)))
    if names is None:  # the data's groups: named by their text, re-indexed in sorted order
        text = np.asarray(res["g"], dtype=object)[body].astype(str)
        present, inv = np.unique(text, return_inverse=True)
        gi = inv.reshape(-1).astype(np.int64)
        names = tuple(str(x) for x in present)
    order = np.lexsort((v, gi))
    return GroupedPrevalences(names, gi[order], v[order], p[order], *extra)
