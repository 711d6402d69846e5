"""The per-item state of a stream: the exact increments of every append against a brute-force
oracle (the k-th event of every kept (item, group) pair, groups kept online: the first m an
item is seen in, ties by keyed rank), identical in memory (numpy) and in DuckDB (Parquet), for
integer and text keys, timestamps, and appends of one or many periods."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from dpfreq.grouped.capping import capping_statement
from dpfreq.rng import derive_key
from dpfreq.stream import ReachStream
from dpfreq.stream.items.update import pair_rank, pair_ranks
from dpfreq.stream.releases import STREAM_CHOICE, STREAM_REMEDY


def _oracle(items, periods, groups, names, ks, horizon, m, key_hex):
    """x[g, j, t-1]: pairs whose ks[j]-th event (in kept groups) falls in period t."""
    out = np.zeros((len(names), len(ks), horizon), dtype=np.int64)
    by_item = defaultdict(list)
    for i, p, g in zip(items, periods, groups, strict=True):
        by_item[i].append((int(p), g))
    for i, ev in by_item.items():
        kept: list[str] = []
        for p in sorted({p for p, _ in ev}):
            fresh = sorted({g for q, g in ev if q == p and g not in kept},
                           key=lambda g: (pair_rank(key_hex, str(i), g), g))
            for g in fresh:
                if m is None or len(kept) < m:
                    kept.append(g)
        for g in kept:
            times = sorted(p for p, gg in ev if gg == g)
            for j, k in enumerate(ks):
                if len(times) >= k:
                    out[names.index(g), j, times[k - 1] - 1] += 1
    return out


def _log(seed: int, n: int, horizon: int, text: bool):
    rng = np.random.default_rng(seed)
    items = rng.integers(0, 60, n)
    items = np.array([f"u{v:03d}" for v in items], dtype=object) if text else items
    return items, rng.integers(1, horizon + 1, n), rng.choice(["a", "b", "c"], n)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize(("unit", "m", "text"), [("item", 2, False), ("event", None, True),
                                                 ("item", 1, True)])
def test_increments_match_the_oracle(tmp_path, seed, engine, unit, m, text) -> None:
    horizon, ks, names = 12, (1, 2, 4), ["a", "b", "c"]
    items, periods, groups = _log(seed, 700, horizon, text)
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=horizon, k_values=ks,
                           unit=unit, epsilon=1.0, delta=0.0, method="simple", late="error",
                           group="g", groups=names, max_groups_per_item=m, engine=engine,
                           rng=seed)
    for lo, hi in ((0, 1), (1, 5), (5, 6), (6, 12)):  # appends of one and of several periods
        sel = (periods > lo) & (periods <= hi)
        s.append({"u": items[sel], "t": periods[sel], "g": groups[sel]}, through=hi)
    key_hex = derive_key(s.state.key, "stream", "group-bounding").hex()
    want = _oracle(items, periods, groups, names, ks, horizon, m, key_hex)
    np.testing.assert_array_equal(s.state.exact, want)


def test_memory_and_duckdb_keep_the_same_state(tmp_path, seed) -> None:
    items, periods, groups = _log(seed, 2000, 20, False)
    states = []
    for engine in ("memory", "duckdb"):
        s = ReachStream.create(tmp_path / engine, item="u", time="t", horizon=20,
                               k_values=[1, 3], unit="item", epsilon=1.0, delta=1e-6,
                               method="auto", late="drop", group="g", groups=["a", "b", "c"],
                               max_groups_per_item=2, engine=engine, rng=seed)
        for hi in (3, 4, 11, 20):
            sel = (periods > s.last_period) & (periods <= hi)
            s.append({"u": items[sel], "t": periods[sel], "g": groups[sel]}, through=hi)
        states.append(s.state)
    a, b = states
    np.testing.assert_array_equal(a.exact, b.exact)
    np.testing.assert_array_equal(a.noisy, b.noisy)
    assert (a.n_pairs, a.n_bounded_out) == (b.n_pairs, b.n_bounded_out)


@pytest.mark.parametrize(("unit", "m"), [("item", 2), ("event", None), ("item", None)])
def test_releases_say_what_their_intervals_cover(tmp_path, unit, m) -> None:
    """A grouped stream's error statements (fresh and re-built from the saved state) end with
    what the intervals cover: the capped data at ``unit="item"``, the data itself at
    ``unit="event"``; an ungrouped stream (``m = None`` at item level here) states neither."""
    items, periods, groups = _log(3, 300, 4, False)
    grouped = {} if unit == "item" and m is None else {
        "group": "g", "groups": ["a", "b", "c"], "max_groups_per_item": m}
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=4, k_values=[1],
                           unit=unit, epsilon=1.0, delta=0.0, method="auto", late="drop",
                           engine="memory", rng=1, **grouped)
    cols = {"u": items, "t": periods, "g": groups}
    rels = s.append(cols if grouped else {"u": items, "t": periods}, through=4)
    for rel in [*rels, ReachStream.open(tmp_path / "s").release(2)]:
        if not grouped:
            assert "coverage" not in rel.mechanism_params
            assert "Coverage" not in rel.error.description
            continue
        want = capping_statement(m, STREAM_REMEDY, chosen=STREAM_CHOICE)
        assert rel.mechanism_params["coverage"] == want
        assert rel.error.description.endswith(f" Coverage: {want}.")
        assert ("capped data, not the data" in want) == (m is not None)
        # how a stream keeps groups (its first ones), and that it measures no dropped fraction
        assert ("the first ones it is seen in" in want) == (m is not None)
        assert ("does not estimate how many pairs the cap dropped" in want) == (m is not None)
        assert "uniformly at random" not in want
        assert "capping_epsilon" not in want  # a stream measures no dropped fraction


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_timestamps_are_bucketed_from_start_by_period(tmp_path, engine) -> None:
    s = ReachStream.create(tmp_path / "s", item="u", time="ts", horizon=None,
                           start="2026-03-01", period="1d", k_values=[1, 2], unit="event",
                           epsilon=1.0, delta=0.0, method="auto", late="drop", engine=engine,
                           rng=1)
    ts = np.array(["2026-03-01T00:00", "2026-03-01T23:59:59", "2026-03-02T00:00",
                   "2026-02-28T12:00"], dtype="datetime64[us]")
    rels = s.append({"u": np.array([7, 7, 8, 9]), "ts": ts}, through="2026-03-02")
    np.testing.assert_array_equal(s.state.exact[0], [[1, 1], [1, 0]])
    assert s.state.n_late_dropped == 1  # the event before the start is late: dropped
    assert [str(p) for p in rels[-1].periods] == ["2026-03-01", "2026-03-02"]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_an_append_compares_the_resent_periods_once(tmp_path, engine, monkeypatch) -> None:
    """The store runs the stream's check (which compares the re-sent periods with the state's
    digests) before any work; the append keeps that result rather than comparing again."""
    import dpfreq.stream.stream as stream_module

    calls = []
    compare = stream_module.compare_periods

    def counted(*args, **kwargs):
        calls.append(args[3])  # through
        return compare(*args, **kwargs)

    monkeypatch.setattr(stream_module, "compare_periods", counted)
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=4, k_values=[1],
                           unit="event", epsilon=1.0, delta=0.0, method="simple",
                           late="drop", engine=engine, rng=1)
    s.append({"u": [1, 2], "t": [1, 2]}, through=2)
    rels = s.append({"u": [1, 2, 2, 9], "t": [1, 2, 3, 0]}, through=3)  # re-sends 1-2, 1 late
    assert calls == [2, 3]
    assert s.state.n_late_dropped == 1  # the event before the first period; 1-2 as they were
    assert [len(rel.periods) for rel in rels] == [1, 2, 3]  # the re-sent periods, the new one
    calls.clear()
    s.append({"u": [2], "t": [3]}, through=3)  # a re-sent append: no write, one comparison
    assert calls == [3]


@pytest.mark.parametrize("words", [
    [], [""], ["", ""], ["", "a", "ab"], ["ß", "u001", "x" * 300, "日本"],
    ["\0", "a\0", "a\0b", "ß\0€"],  # keys holding a NUL: cut at the lengths
])
def test_memory_store_text_keys_round_trip_in_their_format(words) -> None:
    """The memory store writes text keys as their UTF-8 bytes end to end and each key's byte
    offset, and reads back the same keys (empty, non-ASCII, long, holding a NUL)."""
    from dpfreq.stream.items.memory import _decode, _encode

    keys = np.array(words, dtype=object) if words else np.zeros(0, dtype=object)
    arrays = _encode(keys)
    data = [w.encode() for w in words]
    assert arrays["text"].dtype == np.uint8
    assert arrays["text"].tobytes() == b"".join(data)
    assert arrays["offsets"].dtype == np.int64
    assert arrays["offsets"].tolist() == [0, *itertools.accumulate(len(b) for b in data)]
    back = _decode(arrays)
    assert back.dtype == object
    assert back.tolist() == words


def test_memory_store_text_keys_take_no_python_call_per_key() -> None:
    """Writing and reading text keys runs in a few whole-array calls (a state holds up to
    10^8 keys): the Python calls made do not grow with the number of keys."""
    import sys

    from dpfreq.stream.items.memory import _decode, _encode

    keys = np.array([f"u{i:05d}-é" for i in range(5000)], dtype=object)
    arrays = _encode(keys)
    for call, arg in ((_encode, keys), (_decode, arrays)):
        calls = []
        sys.setprofile(lambda _f, event, _a: calls.append(event)  # noqa: B023
                       if event in ("call", "c_call") else None)
        try:
            call(arg)
        finally:
            sys.setprofile(None)
        assert len(calls) < 100, call.__name__
    assert _decode(arrays).tolist() == keys.tolist()


def test_counts_are_capped_at_the_largest_k(tmp_path) -> None:
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=5, k_values=[2],
                           unit="item", epsilon=1.0, delta=0.0, method="simple", late="error",
                           engine="memory", rng=2)
    for t in range(1, 6):
        s.append({"u": [1, 1, 1], "t": [t, t, t]}, through=t)
    np.testing.assert_array_equal(s.state.exact[0, 0], [1, 0, 0, 0, 0])
    assert s.state.n_pairs == 1


def test_the_vectorised_keyed_rank_is_the_reference_rank() -> None:
    """The memory store's ranks (DuckDB's md5 over every tight pair at once) are the digits of
    :func:`pair_rank` read as unsigned integers, for integer and text ids (a negative one, a
    non-ASCII one) and non-ASCII group names; ordered as the digits are."""
    key_hex = derive_key(b"k" * 32, "stream", "group-bounding").hex()
    for items in (np.array([0, -5, 2**62, 17]), np.array(["a", "é", "", "17"], dtype=object)):
        names, groups = ("x", "ü", "campaña"), np.array([0, 1, 0, 2])
        want = [pair_rank(key_hex, str(i), names[g]) for i, g in zip(items.tolist(), groups,
                                                                       strict=True)]
        got = pair_ranks(key_hex, items, groups, names)
        assert [f"{int(r):016x}" for r in got] == want
        assert np.argsort(got).tolist() == np.argsort(np.array(want)).tolist()
