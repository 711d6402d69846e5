"""What every per-item store computes from one append, and the rule it follows.

The private per-item state of a stream is, for every kept (item, group) pair, the item's
running number of events in the group, capped at ``K = max(k_values)`` (one pair per item
without groups). An append of the events of periods ``after < p <= through`` updates it and
yields the exact **increments**: for every group ``g``, level ``k`` and period ``p``, the number
of pairs whose ``k``-th event falls in ``p`` — the new points of the ``(g, k)`` cumulative
count. A pair whose count was ``c`` before the period and ``c + n`` after it increments level
``k`` exactly when ``c < k <= c + n``, once per pair: at ``unit="item"`` one item changes one
point per level (sensitivity 1 per level).

**Groups at ``unit="item"``** (bound ``m``): an item keeps the first ``m`` groups it is seen in,
for ever; groups first seen in the same period are taken by the keyed rank
``MD5(hex(key) ‖ 0x1f ‖ item ‖ 0x1f ‖ group)`` (the rank of the offline grouped releases;
uniform and unpredictable under a secret key), then by name. The events of an item in a group
it did not keep are dropped. The choice depends on the item's own events only, so adding or
removing one item changes at most ``m`` groups. (Offline, an item keeps the ``m`` groups of
smallest rank among all its groups; a stream cannot wait for the future, so the two agree
whenever no item touches more than ``m`` groups.) At ``unit="event"`` every (item, group) pair
is kept: one event lies in one group.

**What the cap dropped** (a stream with ``capping_epsilon``: :mod:`dpfreq.stream.capping`):
the state also remembers, with count 0, the pairs an item was seen in but did not keep, up to
``M = 4m`` pairs per item in all (kept ones included; the first ``M`` by the same order as the
kept ones, so the kept pairs are among them). The append then yields per period the number of
pairs first remembered in it (the increment of ``T(t) = Σ_i min(g_i(t), M)``, ``g_i(t)`` the
item's distinct groups to date) and of those not kept (the increment of ``D(t) = Σ_i
min((g_i(t) − m)⁺, M − m)``): over the whole stream one item adds at most ``M`` to the first
and ``M − m`` to the second, whatever the periods its groups arrive in. Events of a remembered
pair that was not kept are dropped like any capped-out event.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

__all__ = ["SEP", "UpdatePlan", "UpdateResult", "count_dtype", "pair_rank", "pair_ranks"]

IntArray = NDArray[np.int64]

SEP = "\x1f"


@dataclass(frozen=True)
class UpdatePlan:
    """The public parameters of one append's update (the key is the stream's secret)."""

    k_values: tuple[int, ...]
    n_groups: int
    group_names: tuple[str, ...] | None
    bound: int | None
    bound_key_hex: str
    after: int
    through: int
    seen_bound: int | None = None

    @property
    def cap(self) -> int:
        """``K``: counts are kept up to the largest k."""
        return max(self.k_values)

    @property
    def n_periods(self) -> int:
        return self.through - self.after

    @property
    def measures_capping(self) -> bool:
        """Whether the capped-out pairs are remembered (up to ``seen_bound`` per item)."""
        return self.bound is not None and self.seen_bound is not None


@dataclass(frozen=True)
class UpdateResult:
    """The exact increments ``(G, len(k_values), periods)`` of one append, the new per-item
    file (name in the state directory and its digest) and private facts (never published);
    ``capping`` the exact increments ``(2, periods)`` of ``T`` and ``D`` when the plan
    measures them (module docstring), else None."""

    increments: IntArray
    items_file: str
    items_digest: str
    key_kind: str
    n_pairs: int
    n_bounded_out: int
    capping: IntArray | None = None


def count_dtype(cap: int) -> np.dtype[np.unsignedinteger]:
    """The smallest unsigned integer type holding counts up to ``cap``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if cap <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def pair_rank(key_hex: str, item: str, group: str) -> str:
    """The keyed rank of an (item, group) pair: 16 hex digits of the MD5 of the key, item and
    group (as the SQL ``substr(md5(…), 1, 16)``)."""
    return hashlib.md5(f"{key_hex}{SEP}{item}{SEP}{group}".encode()).hexdigest()[:16]


def pair_ranks(key_hex: str, items: NDArray[Any], groups: NDArray[np.int64],
               names: tuple[str, ...]) -> NDArray[np.uint64]:
    """:func:`pair_rank` of many pairs at once (item ``items[j]`` — an integer, read as its
    decimal text, or text — in group ``names[groups[j]]``) as unsigned 64-bit integers (the 16
    hex digits' value: ordered as the digits are), computed by DuckDB's ``md5`` in one
    vectorised pass over the SQL the DuckDB store ranks with, so the order is its order."""
    con = duckdb.connect()
    try:
        con.register("pairs", {"i": items, "g": np.asarray(groups, dtype=np.int64) + 1})
        res = con.execute("SELECT CAST('0x' || substr(md5($key || chr(31) || CAST(i AS VARCHAR) "
                          "|| chr(31) || list_extract($names, g)), 1, 16) AS UBIGINT) AS r FROM "
                          "pairs", {"key": key_hex, "names": list(names)}).fetchnumpy()
    finally:
        con.close()
    return np.asarray(res["r"], dtype=np.uint64)
