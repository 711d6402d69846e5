"""The per-item state in memory: numpy arrays, saved as an integrity-checked artefact.

Arrays (sorted by pair code): the distinct item keys (int64, or UTF-8 text as bytes and
offsets), and per kept (item, group) pair its code ``item index · G + group`` (int64) and its
capped count (the smallest unsigned type holding ``K``). Per item without groups: 8 bytes of
key, 8 of code and 1 of count (17 bytes, plus the text of text keys). The update
(:func:`numpy_update`) is the reference the DuckDB store is tested against.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.stream.items.files import file_digest
from dpfreq.stream.items.reader import EventTable, read_events
from dpfreq.stream.items.update import UpdatePlan, UpdateResult, count_dtype, pair_ranks

__all__ = ["MemoryItems", "numpy_update"]

IntArray = NDArray[np.int64]
_KIND = "reach-stream-items"
_VERSION = 1


def _encode(keys: NDArray[Any]) -> dict[str, NDArray[Any]]:
    """Integer keys as int64; text keys as their UTF-8 bytes end to end (``text``) and the
    byte offset where each starts (``offsets``, one more than the keys). The keys are joined
    with NUL separators in one call and cut at them; a key holding a NUL itself is cut at the
    keys' lengths instead."""
    if keys.dtype.kind in "iu":
        return {"keys": keys.astype(np.int64)}
    words = keys.tolist()
    if not words:
        return {"text": np.zeros(0, dtype=np.uint8), "offsets": np.zeros(1, dtype=np.int64)}
    data = np.frombuffer("\0".join(words).encode(), dtype=np.uint8)
    cuts = np.flatnonzero(data == 0)
    if cuts.size != len(words) - 1:  # some key holds a NUL: the separators from the lengths
        ends = np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(words)))
        cuts = _char_starts(data)[ends[:-1] + np.arange(len(words) - 1)]
    offsets = np.concatenate(([0], cuts - np.arange(cuts.size), [data.size - cuts.size]))
    return {"text": np.delete(data, cuts), "offsets": offsets.astype(np.int64)}


def _decode(arrays: dict[str, NDArray[Any]]) -> NDArray[Any]:
    """The keys :func:`_encode` wrote: text keys as an object array of ``str``, decoded in one
    call with a NUL inserted at each offset and split there (cut at the offsets when a key
    holds a NUL)."""
    if "keys" in arrays:
        return arrays["keys"].astype(np.int64)
    raw, off = arrays["text"], arrays["offsets"].astype(np.int64)
    out = np.empty(off.size - 1, dtype=object)
    if not out.size:
        return out
    if not np.any(raw == 0):
        out[:] = np.insert(raw, off[1:-1], 0).tobytes().decode().split("\0")
        return out
    text = raw.tobytes().decode()
    chars = _char_starts(raw).searchsorted(off).tolist()
    out[:] = list(map(text.__getitem__, map(slice, chars[:-1], chars[1:])))
    return out


def _char_starts(data: NDArray[np.uint8]) -> IntArray:
    """The byte position of each character of UTF-8 ``data`` (its bytes that are not
    continuation bytes ``10xxxxxx``)."""
    return np.flatnonzero((data & 0xC0) != 0x80)


def _positions(keys: NDArray[Any], item: IntArray, group: IntArray, first: IntArray,
               room: IntArray, plan: UpdatePlan) -> IntArray:
    """Each new pair's position among its item's new pairs by (first period, keyed rank, group
    name) (:mod:`.update`); ``-1`` where the item has no more new pairs than ``room`` (the
    room to keep: every one is kept, no rank is computed). The ranks of the tight pairs come
    in one vectorised pass (:func:`~.update.pair_ranks`: the DuckDB store's SQL)."""
    names = plan.group_names or ()
    n_new = np.bincount(item, minlength=keys.size)[item] if item.size else item
    out = np.full(item.size, -1, dtype=np.int64)
    tight = np.flatnonzero(n_new > room)
    if not tight.size:
        return out
    text = np.asarray(names, dtype=str)
    by_name = np.empty(text.size, dtype=np.int64)
    by_name[np.argsort(text, kind="stable")] = np.arange(text.size)  # ties: by group name
    g = group[tight]
    ranks = pair_ranks(plan.bound_key_hex, keys[item[tight]], g, tuple(names))
    order = np.lexsort((by_name[g], ranks, first[tight], item[tight]))
    ps = item[tight][order]
    sub = np.empty(tight.size, dtype=np.int64)
    sub[order] = np.arange(ps.size) - np.searchsorted(ps, ps, side="left")
    out[tight] = sub
    return out


def _capping(first: IntArray, kept: NDArray[np.bool_], seen: NDArray[np.bool_],
             plan: UpdatePlan) -> IntArray:
    """``(2, periods)``: per period the new pairs remembered and those not kept (the
    increments of ``T`` and ``D``, :mod:`.update`)."""
    out = np.zeros((2, plan.n_periods), dtype=np.int64)
    np.add.at(out[0], first[seen] - plan.after - 1, 1)
    np.add.at(out[1], first[seen & ~kept] - plan.after - 1, 1)
    return out


def _increments(ev_pair: IntArray, ev_p: IntArray, ev_n: IntArray, c0: IntArray,
                group: IntArray, plan: UpdatePlan) -> IntArray:
    """Points per (group, level, period): pairs whose running count crosses a level."""
    out = np.zeros((plan.n_groups, len(plan.k_values), plan.n_periods), dtype=np.int64)
    if not ev_pair.size:
        return out
    start = np.r_[True, ev_pair[1:] != ev_pair[:-1]]
    cum = np.cumsum(ev_n)
    base = np.maximum.accumulate(np.where(start, cum - ev_n, 0))
    run = c0 + cum - base  # the pair's count after each of its periods
    for j, k in enumerate(plan.k_values):
        hit = (run - ev_n < k) & (k <= run)
        np.add.at(out[:, j, :], (group[hit], ev_p[hit] - plan.after - 1), 1)
    return out


def _bound(keys: NDArray[Any], codes: IntArray, counts: NDArray[Any], e_code: IntArray,
           ep: IntArray, found: NDArray[np.bool_], plan: UpdatePlan
           ) -> tuple[IntArray, IntArray, IntArray | None]:
    """``(pairs whose events are dropped, new pairs remembered but not kept, increments of T
    and D or None)`` of the append's pairs (``e_code`` sorted, ``found`` in the state) under
    the bound ``m`` (and ``M`` when the capping is measured; :mod:`.update`)."""
    g_count = plan.n_groups
    pairs, first_row = np.unique(e_code, return_index=True)
    is_new = ~found[first_row]
    stored = counts.astype(np.int64) > 0  # kept pairs (count 0: remembered, not kept)
    have = np.bincount(codes[stored] // g_count, minlength=keys.size)
    item = pairs[is_new] // g_count
    fp = ep[first_row][is_new]
    room = int(plan.bound or 0) - have[item]
    pos = _positions(keys, item, pairs[is_new] % g_count, fp, room, plan)
    ok = pos < room  # -1: every new pair of the item fits (room <= limit)
    cap_inc, remember = None, np.zeros(0, dtype=np.int64)
    if plan.measures_capping:
        n_seen = np.bincount(codes // g_count, minlength=keys.size)
        seen = pos < np.maximum(int(plan.seen_bound or 0) - n_seen[item], room)
        cap_inc = _capping(fp, ok, seen, plan)
        remember = pairs[is_new][seen & ~ok]
    known = pairs[~is_new]  # in the state: kept (count > 0) or remembered, not kept (0)
    not_kept = known[counts[np.searchsorted(codes, known)].astype(np.int64) == 0] \
        if codes.size else np.zeros(0, dtype=np.int64)
    return np.concatenate((pairs[is_new][~ok], not_kept)), remember, cap_inc


def numpy_update(keys: NDArray[Any], codes: IntArray, counts: NDArray[Any],
                 ev: dict[str, NDArray[Any]], plan: UpdatePlan
                 ) -> tuple[NDArray[Any], IntArray, NDArray[Any], IntArray, int, IntArray | None]:
    """The update of :mod:`.update` on numpy arrays: ``(keys, codes, counts, increments,
    events dropped by the group bound, increments of T and D or None)`` of the new state from
    the old one and the events ``ev`` (columns ``k, g, p, n``)."""
    g_count = plan.n_groups
    ek, eg = ev["k"], ev["g"].astype(np.int64)
    ep, en = ev["p"].astype(np.int64), ev["n"].astype(np.int64)
    new_keys = np.union1d(keys, ek) if keys.size else np.unique(ek)
    remap = np.searchsorted(new_keys, keys) if keys.size else np.zeros(0, dtype=np.int64)
    codes = remap[codes // g_count] * g_count + codes % g_count
    e_code = np.searchsorted(new_keys, ek).astype(np.int64) * g_count + eg
    order = np.lexsort((ep, e_code))
    e_code, eg, ep, en = e_code[order], eg[order], ep[order], en[order]
    at = np.searchsorted(codes, e_code)
    found = (at < codes.size) & (codes[np.minimum(at, max(codes.size - 1, 0))] == e_code) \
        if codes.size else np.zeros(e_code.size, dtype=bool)
    c0 = np.where(found, counts[np.minimum(at, max(codes.size - 1, 0))].astype(np.int64)
                  if codes.size else 0, 0)
    dropped = 0
    cap_inc = np.zeros((2, plan.n_periods), dtype=np.int64) if plan.measures_capping else None
    remember = np.zeros(0, dtype=np.int64)  # new pairs remembered but not kept (count 0)
    if plan.bound is not None and e_code.size:
        lost, remember, cap_inc = _bound(new_keys, codes, counts, e_code, ep, found, plan)
        cut = np.isin(e_code, lost)
        dropped = int(en[cut].sum())
        e_code, eg, ep, en, c0, found = (a[~cut] for a in (e_code, eg, ep, en, c0, found))
    live = c0 < plan.cap
    inc = _increments(e_code[live], ep[live], en[live], c0[live], eg[live], plan)
    pairs, first_row = np.unique(e_code, return_index=True)
    totals = np.add.reduceat(en, first_row) if en.size else en
    new_c = np.minimum(c0[first_row] + totals, plan.cap)
    dt = count_dtype(plan.cap)
    old = found[first_row]
    counts = counts.astype(dt).copy()
    counts[np.searchsorted(codes, pairs[old])] = new_c[old]
    add = np.concatenate((pairs[~old], remember))
    add_c = np.concatenate((new_c[~old], np.zeros(remember.size, dtype=np.int64))).astype(dt)
    order = np.argsort(add, kind="stable")
    add, add_c = add[order], add_c[order]
    ins = np.searchsorted(codes, add)
    codes = np.insert(codes, ins, add)
    counts = np.insert(counts, ins, add_c)
    used = np.unique(codes // g_count)  # drop items whose only events were bounded out
    if used.size < new_keys.size:
        codes = np.searchsorted(used, codes // g_count) * g_count + codes % g_count
        new_keys = new_keys[used]
    return new_keys, codes, counts, inc, dropped, cap_inc


class MemoryItems:
    """Per-item state as numpy arrays in one artefact per generation (``items-<gen>.npz``)."""

    engine = "memory"
    suffix = "npz"
    read = staticmethod(read_events)

    def load(self, path: Path | None, key_kind: str | None, cap: int, n_groups: int = 1
             ) -> tuple[NDArray[Any], IntArray, NDArray[Any]]:
        """``(keys, codes, counts)`` of a generation, its keys as ``key_kind`` (integer keys
        read as text become their decimal text: the keys re-sorted, the codes renumbered)."""
        if path is None:
            empty = np.zeros(0, dtype=np.int64 if key_kind != "text" else object)
            return empty, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=count_dtype(cap))
        _, _, arrays = read_artifact(path, kind=_KIND, versions=(_VERSION,))
        keys, codes, counts = _decode(arrays), arrays["codes"], arrays["counts"]
        if key_kind == "text" and keys.dtype.kind in "iu":
            text = keys.astype(np.str_).astype(object)  # the decimal text of each id
            order = np.argsort(text, kind="stable")
            rank = np.empty(order.size, dtype=np.int64)
            rank[order] = np.arange(order.size)
            codes = rank[codes // n_groups] * n_groups + codes % n_groups
            by_code = np.argsort(codes, kind="stable")
            keys, codes, counts = text[order], codes[by_code], counts[by_code]
        return keys, codes, counts

    def update(self, events: EventTable, plan: UpdatePlan, current: Path | None,
               out: Path, check: Callable[[], None]) -> UpdateResult:
        """Read the state, apply the append's events, write the next generation to ``out``."""
        check()  # the stream's refusals of late and future events, before any work
        keys, codes, counts = self.load(current, events.key_kind, plan.cap, plan.n_groups)
        ev = events.run(f"SELECT k, g, p, n FROM {events.name}")
        ev["k"] = np.asarray(ev["k"], dtype=np.int64 if events.key_kind == "integer"
                             else object)
        keys, codes, counts, inc, dropped, cap = numpy_update(keys, codes, counts, ev, plan)
        write_artifact(out, kind=_KIND, version=_VERSION, meta={"pairs": int(codes.size)},
                       arrays={**_encode(keys), "codes": codes, "counts": counts})
        return UpdateResult(inc, out.name, file_digest(out), events.key_kind, int(codes.size),
                            dropped, cap)
