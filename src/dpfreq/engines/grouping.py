"""Contribution bounding over groups: the keyed rank every engine computes, and its checks.

The rule, identical on every engine: after keeping only the rows of the listed groups (and,
for summaries, the events inside ``1..horizon``), each item keeps the (at most) ``m`` of its
groups with the smallest rank

    ``rank(item, group) = (a_item · h_group + b_item) mod p``,   ``p = 2^31 − 1``,

ties broken by the group's text, where, from the release's 32-byte secret key (hex ``K``) and
the texts of item and group (integers in decimal),

* ``a_item = 1 + (x mod (p − 1))`` and ``b_item = y mod p`` with ``x``, ``y`` the first two
  32-bit words (8 hex digits each) of ``MD5(K ‖ 0x1f ‖ "i" ‖ 0x1f ‖ item)``;
* ``h_group = z mod p`` with ``z`` the first 32-bit word of ``MD5(K ‖ 0x1f ‖ "g" ‖ 0x1f ‖ group)``.

**Uniform.** Modelling MD5 under a secret key as a random function, the ``h_group`` of an item's
(distinct) groups are independent and uniform on ``0..p−1`` up to a relative error of
``2^-31``, and for any fixed ``(a, b)`` with ``a ≠ 0`` the map ``h ↦ (a·h + b) mod p`` is a
bijection: the item's ranks are i.i.d. uniform, so its ``m`` smallest are a uniformly random
``m``-subset of its groups (up to ties, of probability below ``k²/2^31`` for ``k`` groups).
The per-item affine map makes the choices of different items pairwise independent for fixed
group values (the affine family mod a prime is pairwise independent), so no group is kept or
dropped for many items at once. **Reproducible**: a seeded release derives the key from its
seed. **Unpredictable otherwise**: without the key the ranks are MD5 outputs under an unknown
key. **Private**: each item's kept set depends only on the key and that item's own rows, so
adding or removing one item changes the bounded data of at most ``m`` groups, each by that
item's rows alone — for every key, hence for the key drawn at random.

Why this form: MD5 is computed once per *item* (and once per group), and per (item, group)
pair only an integer product and a remainder (below 2^62: no overflow in any engine), which
DuckDB and Spark SQL evaluate natively and identically — a string hash per pair costed the
bounding five times what the engine's own ``hash()`` rank costs. Only items with more than
``m`` groups are ranked at all.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.engines.base import TimeBuckets
from dpfreq.engines.requests import CountRequest, Grouping, SummaryRequest
from dpfreq.errors import ParameterError

__all__ = ["PRIME", "SEP", "check_count_request", "check_grouping", "check_summary_request",
           "group_value", "item_coefficients", "kept_pairs"]

SEP = "\x1f"
#: the modulus of the rank (a Mersenne prime: products of two residues stay below 2^62)
PRIME = (1 << 31) - 1


def _md5_words(text: str) -> tuple[int, int]:
    h = hashlib.md5(text.encode()).hexdigest()
    return int(h[:8], 16), int(h[8:16], 16)


def item_coefficients(key_hex: str, item: str) -> tuple[int, int]:
    """``(a_item, b_item)`` of the module's rank (reference for the SQL)."""
    x, y = _md5_words(f"{key_hex}{SEP}i{SEP}{item}")
    return 1 + x % (PRIME - 1), y % PRIME


def group_value(key_hex: str, group: str) -> int:
    """``h_group`` of the module's rank (reference for the SQL)."""
    return _md5_words(f"{key_hex}{SEP}g{SEP}{group}")[0] % PRIME


def kept_pairs(key_hex: str, items: NDArray[Any], names: tuple[str, ...],
               pi: NDArray[np.int64], pg: NDArray[np.int64], m: int) -> NDArray[np.bool_]:
    """Which distinct (item, group) pairs the bounding keeps: pair ``j`` is item ``items[pi[j]]``
    (text) in group ``names[pg[j]]``; each item keeps its ``m`` pairs of smallest rank. An item
    with at most ``m`` pairs keeps them all: only the items with more are ranked (one MD5 per
    such item and per group, in Python: this is the reference oracle)."""
    keep = np.ones(pi.size, dtype=np.bool_)
    if not pi.size:
        return keep
    over = np.flatnonzero(np.bincount(pi)[pi] > m)
    if not over.size:
        return keep
    oi, og = pi[over], pg[over]
    ui, inv_i = np.unique(oi, return_inverse=True)
    ab = np.array([item_coefficients(key_hex, str(items[i])) for i in ui.tolist()],
                  dtype=np.int64).reshape(-1, 2)
    ug, inv_g = np.unique(og, return_inverse=True)
    hg = np.array([group_value(key_hex, names[g]) for g in ug.tolist()], dtype=np.int64)
    a, b = ab[inv_i.reshape(-1), 0], ab[inv_i.reshape(-1), 1]
    rank = (a * hg[inv_g.reshape(-1)] + b) % PRIME
    text = np.asarray(names, dtype=str)[og]
    order = np.lexsort((text, rank, oi))
    ps = oi[order]
    first = np.searchsorted(ps, ps, side="left")
    sub = np.empty(oi.size, dtype=np.bool_)
    sub[order] = (np.arange(ps.size) - first) < m
    keep[over] = sub
    return keep


def check_grouping(grouping: Any, item: str,
                   others: tuple[str, ...] = ()) -> tuple[tuple[str, ...] | None, int | None, str]:
    """Validate a :class:`Grouping` (every engine): ``(groups, m, key hex)``; the key is
    ``""`` without a bound."""
    if not isinstance(grouping, Grouping):
        raise ParameterError(message("grouping", "a Grouping", type(grouping).__name__))
    column = grouping.column
    if not isinstance(column, str) or not column:
        raise ParameterError(message("group", "a non-empty column name (str)", column))
    if column == item or column in others:
        raise ParameterError(message("group", "a column other than the item and time "
                                     "columns", column))
    names = grouping.groups
    if names is not None:
        if isinstance(names, str | bytes) or not hasattr(names, "__iter__"):
            raise ParameterError(message("groups", "a list of group names or None",
                                         names))
        names = tuple(dict.fromkeys(str(g) for g in names))
        if not names:
            raise ParameterError(message("groups", "a non-empty list of group names",
                                         names))
    if grouping.max_groups_per_item is None:
        return names, None, ""
    m = check_int(grouping.max_groups_per_item, "max_groups_per_item", minimum=1)
    key = grouping.key
    if not isinstance(key, bytes) or len(key) < 16:
        raise ParameterError(message("key", "at least 16 bytes (the bounding needs a "
                                     "key)", "a shorter or no key"))
    return names, m, key.hex()


def _column(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value:
        raise ParameterError(message(param, "a non-empty column name (str)", value))
    return value


def check_summary_request(request: Any) -> SummaryRequest:
    """Validate a :class:`SummaryRequest` (every engine makes the same checks)."""
    if not isinstance(request, SummaryRequest):
        raise ParameterError(message("request", "a SummaryRequest",
                                     type(request).__name__))
    item = _column(request.item, "item")
    time = _column(request.time, "time")
    if item == time:
        raise ParameterError(message("item/time", "two different column names",
                                     (item, time)))
    if not isinstance(request.buckets, TimeBuckets):
        raise ParameterError(message("buckets", "a TimeBuckets",
                                     type(request.buckets).__name__))
    for spec in request.specs:
        if spec.family not in ("cumulative", "rolling", "all") or spec.k < 1 or (
                spec.family == "rolling" and spec.width < 1):
            raise ParameterError(message("specs", "summary specs of a known family, "
                                         "k >= 1 (and width >= 1 for rolling)", spec))
    if request.grouping is not None:
        check_grouping(request.grouping, item, (time,))
    if not isinstance(request.checked, bool):
        raise ParameterError(message("checked", "True or False", request.checked))
    return request


def check_count_request(request: Any) -> tuple[CountRequest, int | None]:
    """Validate a :class:`CountRequest`; returns it and the clamp ``max_count`` (or None)."""
    if not isinstance(request, CountRequest):
        raise ParameterError(message("request", "a CountRequest",
                                     type(request).__name__))
    _column(request.item, "item")
    check_grouping(request.grouping, request.item)
    if request.per_item not in ("rows", "groups", "distinct_groups") or (
            request.per_item == "groups" and not request.grouping.bounded) or (
            request.per_item == "distinct_groups" and request.grouping.bounded):
        raise ParameterError(message("per_item", "'rows', 'groups' with a bounded "
                                     "grouping or 'distinct_groups' with an unbounded one",
                                     request.per_item))
    n = None if request.max_count is None else check_int(request.max_count, "max_count",
                                                         minimum=1)
    return request, n
