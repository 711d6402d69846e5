"""The reach stream in combination (STYLE 20b): engine × grouping × how periods are appended ×
counter, and the daily pipeline's edges — stale and racing appends, an empty period, a bad
artefact key, events before the start, the CLI's ``--json -``, ``--plot`` and ``--group``.

Every published number is recomputed from the saved noisy measurements (STYLE 20a), and the
saved measurements from the key and the exact increments: appending period by period, several
periods at once or with empty periods in between measures the same rows.
"""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfreq.stream.lock as lock_module
import dpfreq.stream.stream as stream_module
from cli_runner import run_cli
from dpfreq.budget import Accountant
from dpfreq.errors import DataError, ParameterError
from dpfreq.ledger import Ledger
from dpfreq.stream import ReachStream
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.publish import curve, halfwidths

KEY = "ab" * 32
GROUPS = ("a", "b", "c")
#: (grouping, keyword arguments of create): none, every group kept, one kept, event level
GROUPINGS = {
    "ungrouped": {"unit": "item"},
    "m=3": {"unit": "item", "group": "g", "groups": list(GROUPS), "max_groups_per_item": 3},
    "m=1": {"unit": "item", "group": "g", "groups": list(GROUPS), "max_groups_per_item": 1},
    "event": {"unit": "event", "group": "g", "groups": list(GROUPS)},
}
#: how periods 1..6 are appended: one by one, two batches, all at once
CHUNKS = {"daily": (1, 2, 3, 4, 5, 6), "batches": (2, 6), "once": (6,)}


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _log(seed: int = 0, n: int = 300) -> dict[str, np.ndarray]:
    """A small log over periods 1..6 with period 4 empty (a gap inside a batch)."""
    rng = np.random.default_rng(seed)
    t = rng.choice([1, 2, 3, 5, 6], n)
    return {"u": rng.integers(0, 60, n), "t": t, "g": rng.choice(GROUPS, n)}


def _create(path, grouping: str = "ungrouped", **over):
    kw = {"item": "u", "time": "t", "horizon": 8, "k_values": [1, 3], "epsilon": 1.0,
          "delta": 0.0, "method": "auto", "late": "error", "engine": "memory", "rng": 7,
          **GROUPINGS[grouping]}
    kw.update(over)
    return ReachStream.create(path, **kw)


def _slice(log: dict[str, np.ndarray], lo: int, hi: int, grouped: bool) -> dict[str, np.ndarray]:
    keep = (log["t"] > lo) & (log["t"] <= hi)
    return {c: v[keep] for c, v in log.items() if grouped or c != "g"}


def _feed(s: ReachStream, log, chunks) -> list:
    rels, lo = [], 0
    for hi in chunks:
        rels += s.append(_slice(log, lo, hi, s.params.groups is not None), through=hi)
        lo = hi
    return rels


def _brute_increments(log, grouping: str) -> np.ndarray:
    """``(G, K, 6)`` exact increments by enumeration (every group kept: m >= its groups)."""
    ks = (1, 3)
    groups = (None,) if grouping == "ungrouped" else GROUPS
    out = np.zeros((len(groups), len(ks), 6), dtype=np.int64)
    for i, g in enumerate(groups):
        sel = np.ones(log["u"].size, bool) if g is None else log["g"] == g
        for j, k in enumerate(ks):
            reach = [int((np.unique(log["u"][sel & (log["t"] <= p)],
                                    return_counts=True)[1] >= k).sum()) for p in range(1, 7)]
            out[i, j] = np.diff([0, *reach])
    return out


@pytest.mark.parametrize("grouping", sorted(GROUPINGS))
def test_engines_and_chunkings_measure_the_same_rows(tmp_path, grouping) -> None:
    """memory == duckdb, and daily == batches == one append, for the exact increments and the
    noisy rows; with every group kept they are the brute-force increments."""
    log = _log()
    seen = {}
    for engine in ("memory", "duckdb"):
        for name, chunks in CHUNKS.items():
            s = _create(tmp_path / f"{engine}-{name}", grouping, engine=engine)
            rels = _feed(s, log, chunks)
            assert [r.period for r in rels] == [1, 2, 3, 4, 5, 6]
            seen[engine, name] = (s.state.exact, s.state.noisy, rels[-1].to_json())
    first = next(iter(seen.values()))
    for exact, noisy, doc in seen.values():
        np.testing.assert_array_equal(exact, first[0])
        np.testing.assert_array_equal(noisy, first[1])
        assert doc == first[2]
    if grouping != "m=1":
        np.testing.assert_array_equal(first[0], _brute_increments(log, grouping))


@pytest.mark.parametrize(("method", "delta", "horizon"), [
    ("simple", 0.0, 8), ("tree", 0.0, 8), ("smooth", 0.0, 8), ("factorization", 1e-6, 8),
    ("epochs", 0.0, None), ("auto", 1e-6, None)])
@pytest.mark.parametrize("grouping", ["ungrouped", "m=1"])
def test_every_published_number_is_post_processing_of_the_saved_rows(
        tmp_path, method, delta, horizon, grouping) -> None:
    """Each period's curves are the counter's answers of the saved noisy rows; the rows are the
    key's noise on the exact increments measured in one go; the intervals hold the answers and
    the band holds the intervals; a reopened stream publishes the same bits."""
    s = _create(tmp_path / "s", grouping, method=method, delta=delta, horizon=horizon)
    rels = _feed(s, _log(1), CHUNKS["batches"])
    st, ks = s.state, s.params.k_values
    again = measure_periods(s.plan.counter, st.key, ks, st.exact,
                            np.zeros((len(ks), s.params.n_groups, 0), dtype=np.int64), 0,
                            st.last, s.params.groups is not None)
    np.testing.assert_array_equal(again, st.noisy)
    n_struct = s.params.n_groups * len(ks)  # the saved half-widths are the public ones
    np.testing.assert_array_equal(st.widths, [halfwidths(s.plan.counter, st.last, 0.05),
                                              halfwidths(s.plan.counter, st.last, 0.05,
                                                         band=n_struct)])
    for rel in rels:
        for j, k in enumerate(ks):
            values, _ = curve(s.plan.counter, st.noisy[j], rel.period)
            for i, g in enumerate(s.params.groups or (None,)):
                def pick(d, g=g, k=k):
                    return np.asarray(d[k] if g is None else d[g][k])

                np.testing.assert_array_equal(pick(rel.value), values[i])
                lo, hi = pick(rel.error.lower), pick(rel.error.upper)
                assert np.all((lo <= values[i]) & (values[i] <= hi))
                assert np.all((pick(rel.error.band_lower) <= lo)
                              & (hi <= pick(rel.error.band_upper)))
        assert (rel.epsilon, rel.delta, rel.unit) == (1.0, delta, "item")
        assert rel.mechanism == "reach-stream"
        assert rel.error.confidence == 0.95
        if grouping != "ungrouped":
            assert "capped data, not the data" in rel.error.description
    assert ReachStream.open(tmp_path / "s").release().to_json() == rels[-1].to_json()
    other = ReachStream.open(tmp_path / "s").release(confidence=0.5).error  # computed anew
    g, k = (s.params.groups or (None,))[0], ks[0]
    pick = (lambda d: d[k]) if g is None else (lambda d: d[g][k])
    np.testing.assert_array_equal(pick(other.upper), pick(rels[-1].value) + (
        halfwidths(s.plan.counter, st.last, 0.5)
        + curve(s.plan.counter, st.noisy[0], st.last)[1][0]))


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("late", ["error", "drop"])
def test_a_stale_handle_never_measures_a_period_twice(tmp_path, engine, late) -> None:
    """Two objects opened before either appended: the second append of the same period is a
    re-send of the saved state (refused with other events at late='error', the stored answers
    at late='drop'), never the same keyed noise on other events (whose difference would be the
    exact difference of the counts)."""
    _create(tmp_path / "s", engine=engine, late=late, method="simple")
    first, second = ReachStream.open(tmp_path / "s"), ReachStream.open(tmp_path / "s")
    ten, thirteen = {"u": np.arange(10), "t": np.ones(10, int)}, \
        {"u": np.arange(13), "t": np.ones(13, int)}
    stored = first.append(ten, through=1)[0].to_json()
    if late == "error":
        with pytest.raises(DataError, match="when re-sent"):
            second.append(thirteen, through=1)
    else:
        assert second.append(thirteen, through=1)[0].to_json() == stored
    assert second.append(ten, through=1)[0].to_json() == stored
    assert [r.period for r in second.append({"u": [1], "t": [2]}, through=2)] == [2]
    assert ReachStream.open(tmp_path / "s").last_period == 2


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_racing_appends_are_one_writer_at_a_time(tmp_path, engine) -> None:
    """Four threads append period 1 with different events: one is measured, the others are
    refused re-sends (late='error'), and the saved stream holds the measured one."""
    _create(tmp_path / "s", engine=engine, method="simple")
    results: dict[int, object] = {}

    def run(i: int) -> None:
        s = ReachStream.open(tmp_path / "s")
        try:
            results[i] = s.append({"u": np.arange(10 + i), "t": np.ones(10 + i, int)},
                                  through=1)[0].to_json()
        except DataError:
            results[i] = "refused"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    measured = [v for v in results.values() if v != "refused"]
    assert len(results) == 4
    assert len(measured) == 1
    assert ReachStream.open(tmp_path / "s").release().to_json() == measured[0]


def test_two_creations_of_one_directory_charge_once(tmp_path, monkeypatch) -> None:
    """Three creations of one directory that all find it free (a barrier holds each after its
    first check until all have checked): one stream, one charge."""
    acct = Accountant(epsilon=5.0, delta=0.0)
    outcomes: list[str] = []
    barrier, seen = threading.Barrier(3, timeout=30), threading.local()
    fresh = stream_module._fresh_directory

    def checked_together(path):
        out = fresh(path)
        if not getattr(seen, "done", False):
            seen.done = True
            barrier.wait()
        return out

    monkeypatch.setattr(stream_module, "_fresh_directory", checked_together)

    def run() -> None:
        try:
            _create(tmp_path / "s", accountant=acct, rng=None)
            outcomes.append("created")
        except ParameterError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert outcomes.count("created") == 1
    assert all("new or empty directory" in o for o in outcomes if o != "created")
    assert acct.remaining.epsilon == pytest.approx(4.0)


def test_a_malformed_artefact_key_is_refused_before_the_charge(tmp_path, monkeypatch) -> None:
    acct = Accountant(epsilon=3.0, delta=0.0)
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", "not-hex")
    with pytest.raises(ParameterError, match="DPFREQ_ARTIFACT_KEY"):
        _create(tmp_path / "s", accountant=acct)
    assert acct.remaining.epsilon == pytest.approx(3.0)
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    assert _create(tmp_path / "s", accountant=acct).last_period == 0  # the directory is free


def test_max_groups_per_item_auto_is_refused_as_a_stream_refuses_it(tmp_path) -> None:
    with pytest.raises(ParameterError, match="no 'auto'") as info:
        _create(tmp_path / "s", "m=1", max_groups_per_item="auto")
    assert "capping_epsilon" not in str(info.value)


# -- the command line ------------------------------------------------------------------------

INIT = ["--item", "user", "--time", "ts", "--start", "2026-03-01", "--period", "1d",
        "--horizon", "30", "--k", "1,2", "--unit", "item", "--epsilon", "1", "--delta", "0",
        "--method", "auto", "--late", "error", "--seed", "3"]


def _csv(tmp_path, name: str, rows: list[tuple[int, str, str]]) -> str:
    path = tmp_path / name
    path.write_text("user,ts,campaign\n" + "".join(f"{u},{t},{c}\n" for u, t, c in rows))
    return str(path)


def _init(tmp_path, capsys, engine: str, grouped: bool, *extra) -> str:
    state = tmp_path / "reach"
    groups = tmp_path / "groups.txt"
    groups.write_text("spring\nsummer\n")
    more = ["--group", "campaign", "--groups", groups, "--max-groups-per-item", "1"] \
        if grouped else []
    code, _, err = run_cli(["stream", "init", state, *INIT, "--state-engine", engine, *more,
                            *extra], capsys)
    assert code == 0, err
    return str(state)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("grouped", [False, True])
def test_a_header_only_csv_is_an_empty_period(tmp_path, capsys, engine, grouped) -> None:
    """A day without events (the export writes the header only) closes its period with no
    increment, on either engine and grouping; the next day appends as usual."""
    state = _init(tmp_path, capsys, engine, grouped)
    empty = _csv(tmp_path, "empty.csv", [])
    code, out, err = run_cli(["stream", "append", state, empty, "--through", "2026-03-01",
                              "--json", "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["period"] == 1
    day2 = _csv(tmp_path, "d2.csv", [(1, "2026-03-02T10:00:00", "spring"),
                                     (2, "2026-03-02T11:00:00", "summer")])
    assert run_cli(["stream", "append", state, day2, "--through", "2026-03-02"],
                   capsys)[0] == 0
    s = ReachStream.open(state)
    assert s.last_period == 2
    assert s.state.exact[..., 0].sum() == 0
    assert s.state.exact[..., 1].sum() == 2  # two users, one group each: two 1+ points


def test_events_before_the_start_are_named_so(tmp_path, capsys) -> None:
    state = _init(tmp_path, capsys, "memory", False)
    early = _csv(tmp_path, "early.csv", [(1, "2026-02-28T23:00:00", "spring"),
                                         (2, "2026-03-01T01:00:00", "spring")])
    code, out, err = run_cli(["stream", "append", state, early, "--through", "2026-03-01"], capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert "before the stream's first period" in err
    assert "closed period 0" not in err


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("plot", [False, True])
def test_json_to_stdout_is_pure_json_in_every_combination(tmp_path, capsys, engine, grouped,
                                                          plot) -> None:
    """``--json -`` with or without ``--plot`` and ``--group``: stdout is one JSON document
    (the stream's release: value, ε, δ, unit, relation, mechanism, error with confidence,
    coverage when grouped), the ledger was charged once at init, appends and shows never."""
    ledger = tmp_path / "budget.db"
    assert run_cli(["ledger", "init", ledger, "--epsilon", "2"], capsys)[0] == 0
    state = _init(tmp_path, capsys, engine, grouped, "--ledger", ledger)
    day1 = _csv(tmp_path, "d1.csv", [(1, "2026-03-01T10:00:00", "spring"),
                                     (1, "2026-03-01T12:00:00", "summer"),
                                     (2, "2026-03-01T11:00:00", "summer")])
    extra = (["--plot", tmp_path / "p.png"] if plot else []) + \
        (["--group", "summer"] if grouped else [])
    for argv in (["stream", "append", state, day1, "--through", "2026-03-01"],
                 ["stream", "show", state],
                 ["stream", "append", state, day1, "--through", "2026-03-01"]):
        code, out, err = run_cli([*argv, "--json", "-", *extra], capsys)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["period"] == 1
        assert {"value", "epsilon", "delta", "unit", "relation", "mechanism",
                "mechanism_params"} <= set(doc)
        assert doc["error"]["confidence"] == 0.95
        assert ("coverage" in doc["mechanism_params"]) == grouped
        assert (tmp_path / "p.png").exists() == plot
    assert Ledger(ledger).remaining.epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("command", ["append", "show"])
def test_key_set_unset_or_changed_is_refused_in_one_line(tmp_path, capsys, monkeypatch,
                                                         command) -> None:
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    state = _init(tmp_path, capsys, "duckdb", False)
    day1 = _csv(tmp_path, "d1.csv", [(1, "2026-03-01T10:00:00", "spring")])
    assert run_cli(["stream", "append", state, day1, "--through", "2026-03-01"], capsys)[0] == 0
    argv = ["stream", command, state] + ([day1, "--through", "2026-03-01"] if command == "append"
                                         else [])
    for key, words in ((None, "set DPFREQ_ARTIFACT_KEY"), ("cd" * 32, "signature does not "
                                                                       "match")):
        if key is None:
            monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
        else:
            monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", key)
        code, out, err = run_cli(argv, capsys)
        assert (code, out) == (2, "")
        assert len(err.strip().splitlines()) == 1, err
        assert words in err
        assert "Traceback" not in err


def test_a_read_only_copy_shows_but_refuses_appends(tmp_path, capsys, monkeypatch) -> None:
    """A directory where the lock file cannot be created (a read-only copy): ``show`` reads it,
    ``append`` is refused in one line and the stream is unchanged."""
    state = _init(tmp_path, capsys, "duckdb", False)
    day1 = _csv(tmp_path, "d1.csv", [(1, "2026-03-01T10:00:00", "spring")])
    assert run_cli(["stream", "append", state, day1, "--through", "2026-03-01"], capsys)[0] == 0
    (tmp_path / "reach" / ".lock").unlink()
    real_open = lock_module.os.open

    def read_only(path, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(lock_module.os, "open", read_only)
    code, out, err = run_cli(["stream", "show", state, "--json", "-"], capsys)
    assert code == 0, err
    assert json.loads(out)["period"] == 1
    day2 = _csv(tmp_path, "d2.csv", [(1, "2026-03-02T10:00:00", "spring")])
    code, out, err = run_cli(["stream", "append", state, day2, "--through", "2026-03-02"],
                             capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert "cannot create its lock file" in err
    monkeypatch.undo()
    assert ReachStream.open(state).last_period == 1


def test_show_waits_for_an_append_to_finish(tmp_path, monkeypatch) -> None:
    """An append holds the lock from reading the state to removing the superseded per-item file;
    a reader opening the stream meanwhile waits and then sees the new state (never a manifest
    whose per-item file is gone)."""
    s = _create(tmp_path / "s", engine="duckdb")
    s.append({"u": [1, 2], "t": [1, 1]}, through=1)
    entered, opened = threading.Event(), {}
    real_remove = stream_module.remove_items

    def slow_remove(path):
        entered.set()
        reader.join(timeout=0.5)  # the reader is blocked on the lock, not done
        opened["during"] = reader.is_alive()
        real_remove(path)

    def read() -> None:
        entered.wait(timeout=30)
        opened["last"] = ReachStream.open(tmp_path / "s").last_period

    reader = threading.Thread(target=read)
    reader.start()
    monkeypatch.setattr(stream_module, "remove_items", slow_remove)
    s.append({"u": [3], "t": [2]}, through=2)
    reader.join(timeout=30)
    assert opened == {"during": True, "last": 2}


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_an_item_is_its_text_whatever_kind_of_id_column_each_day_brings(tmp_path,
                                                                        engine) -> None:
    """An empty typed first day, then integer ids, text ids (some the digits of earlier
    integers), integers again, a uint64 Parquet column beyond int64 and a DECIMAL(20,0) one:
    every day appends, and the stream measures what a stream fed the same ids as text
    measures. A DECIMAL with a fraction or a float column is one line naming the type (the
    rule of every engine's id columns), never a value."""
    big = 2**64 - 1
    pq.write_table(pa.table({"u": pa.array([big, 5], type=pa.uint64()), "t": [5, 5]}),
                   tmp_path / "d5.parquet")
    pq.write_table(pa.table({"u": pa.array([5, 11], type=pa.decimal128(20, 0)), "t": [6, 6]}),
                   tmp_path / "d6.parquet")
    days = [np.zeros(0, dtype=np.int64), np.array([1, 2, 3]), np.array(["3", "x", "3"]),
            np.array([2, 7])]
    s = _create(tmp_path / "s", engine=engine, epsilon=1000.0)
    ref = _create(tmp_path / "ref", engine=engine, epsilon=1000.0)
    for t, ids in enumerate(days, start=1):
        s.append({"u": ids, "t": np.full(ids.size, t)}, through=t)
        ref.append({"u": ids.astype(str).astype(object), "t": np.full(ids.size, t)}, through=t)
    for t, ids in ((5, [str(big), "5"]), (6, ["5", "11"])):
        s.append(tmp_path / f"d{t}.parquet", through=t)
        ref.append({"u": np.array(ids, dtype=object), "t": np.full(2, t)}, through=t)
    assert s.state.key_kind == "text"
    np.testing.assert_array_equal(s.state.exact, ref.state.exact)
    np.testing.assert_array_equal(s.state.noisy, ref.state.noisy)
    assert s.state.n_pairs == ref.state.n_pairs == 8  # 1 2 3 x 7 big 5 11
    np.testing.assert_array_equal(s.state.exact[0, :, 2], [1, 1])  # "x" new, "3" twice
    for column, name in ((pa.array([Decimal("1.50")], type=pa.decimal128(10, 2)),
                          "DECIMAL(10,2)"),
                         (pa.array([1.0]), "DOUBLE")):
        pq.write_table(pa.table({"u": column, "t": [7]}), tmp_path / "bad.parquet")
        with pytest.raises(DataError) as err:
            s.append(tmp_path / "bad.parquet", through=7)
        assert str(err.value) == (
            "item of ReachStream.append must be a column of integers or text (an integer, "
            "DECIMAL(p,0) included, is the id of its decimal text; a fraction, a float, a time "
            f"or a boolean is no id); got '{name}'.")
    assert s.last_period == 6


def test_release_of_a_long_lived_object_sees_later_appends(tmp_path) -> None:
    """A dashboard keeps one object open while a cron job appends with another: its
    ``release`` answers the new periods, the bits the appender published."""
    viewer = _create(tmp_path / "s", engine="duckdb")
    cron = ReachStream.open(tmp_path / "s")
    published = [r.to_json() for r in _feed(cron, _log(2), CHUNKS["batches"])]
    assert viewer.release().to_json() == published[-1]
    assert viewer.release(3).to_json() == published[2]


def test_an_object_of_a_replaced_stream_adopts_the_new_one(tmp_path) -> None:
    """The directory was emptied and a new stream created there (a new key, other
    parameters): an object of the old stream appends to the new one with the new key and
    parameters, never writes the old key back."""
    old = _create(tmp_path / "s", engine="memory")
    old.append({"u": [1], "t": [1]}, through=1)
    for f in (tmp_path / "s").iterdir():
        f.unlink()
    new = _create(tmp_path / "s", engine="memory", rng=8, horizon=5, k_values=[2])
    [rel] = old.append({"u": [1, 1], "t": [1, 1]}, through=1)
    assert rel.k_values == (2,)
    assert old.state.key == new.state.key
    assert ReachStream.open(tmp_path / "s").state.key == new.state.key


@pytest.mark.parametrize("horizon", ["30", "none"])
@pytest.mark.parametrize("grouped", [False, True])
def test_plan_stream_json_and_target_in_combination(tmp_path, capsys, horizon, grouped) -> None:
    """``dpfreq plan stream`` with and without a horizon and groups: ``--json -`` is pure JSON
    whose first periods' half-widths are the ones a created stream publishes; a bad target is
    named by its option."""
    groups = tmp_path / "groups.txt"
    groups.write_text("spring\nsummer\n")
    more = ["--group", "campaign", "--groups", groups, "--max-groups-per-item", "1"] \
        if grouped else []
    line = ["--horizon", horizon, "--k", "1,2", "--unit", "item", "--epsilon", "1", "--delta",
            "0", "--method", "auto", *more]
    code, out, err = run_cli(["plan", "stream", *line, "--target-half-width", "20", "--json",
                              "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["epsilon_for_target_half_width"]["epsilon"] > 0
    s = ReachStream.create(tmp_path / "s", item="u", time="t",
                           horizon=None if horizon == "none" else 30, k_values=[1, 2],
                           unit="item", epsilon=1.0, delta=0.0, method="auto", late="drop",
                           engine="memory", rng=1,
                           **({"group": "g", "groups": ["spring", "summer"],
                               "max_groups_per_item": 1} if grouped else {}))
    assert s.plan.method == doc["method"]
    rel = s.append({"u": [1], "t": [1], **({"g": ["spring"]} if grouped else {})}, through=1)[0]
    up = rel.error.upper["spring"][1] if grouped else rel.error.upper[1]
    value = rel.value["spring"][1] if grouped else rel.value[1]
    assert doc["periods"][0] == 1
    assert up[0] - value[0] == doc["half_width"][0]
    code, out, err = run_cli(["plan", "stream", *line, "--target-half-width", "0"], capsys)
    assert (code, out) == (2, "")
    assert "--target-half-width of dpfreq plan stream" in err


def test_a_directory_of_other_tables_is_one_line(tmp_path, capsys) -> None:
    """A source directory whose Parquet files disagree (here: it holds the stream's own state)
    fails at DuckDB's scan: one line naming the source, not an internal error."""
    state = _init(tmp_path, capsys, "duckdb", False)
    day1 = _csv(tmp_path, "d1.csv", [(1, "2026-03-01T10:00:00", "spring")])
    assert run_cli(["stream", "append", state, day1, "--through", "2026-03-01"], capsys)[0] == 0
    pq.write_table(pa.table({"user": [1], "ts": ["2026-03-02T10:00:00"]}),
                   tmp_path / "d2.parquet")
    code, out, err = run_cli(["stream", "append", state, tmp_path, "--through", "2026-03-02"],
                             capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert "cannot be read (a directory or glob must hold files of one table" in err
    assert ReachStream.open(state).last_period == 1


def test_a_grouped_plot_draws_every_group_or_says_which_it_left_out(tmp_path, capsys,
                                                                    monkeypatch) -> None:
    """Without ``group`` a grouped stream's plot is small multiples of every group (at most
    ``max_panels``, the title naming what it left out), in the API and on the command line;
    one ``ax`` holds one group, so ``ax`` without ``group`` is refused in one line."""
    from dpfreq.plotting import pyplot

    s = _create(tmp_path / "s", "m=3")
    [rel] = s.append(_slice(_log(), 0, 1, True), through=1)
    fig = rel.plot()
    assert sorted(ax.get_title().split(" ")[0] for ax in fig.axes) == sorted(GROUPS)
    two = rel.plot(max_panels=2)
    assert len(two.axes) == 2
    assert "the 2 of 3 groups" in two._suptitle.get_text()
    _fig, ax = pyplot().subplots()
    with pytest.raises(ParameterError, match=r"^group of StreamRelease\.plot must be .*leave "
                                             r"ax out.*; got None\.$"):
        rel.plot(ax=ax)
    one = rel.plot(group="a")
    assert "group a" in one.get_title()
    one.figure.canvas.draw()  # integer periods are ticked at whole periods only
    assert all(float(t).is_integer() for t in one.get_xticks()), one.get_xticks()
    pyplot().close("all")
    drawn: list[list[str]] = []

    def keep(figure, path):
        drawn.append([a.get_title() for a in figure.axes])
        pyplot().close(figure)

    monkeypatch.setattr("dpfreq.plotting.save_figure", keep)
    state = _init(tmp_path, capsys, "memory", True)
    day1 = _csv(tmp_path, "d1.csv", [(1, "2026-03-01T10:00:00", "spring"),
                                     (2, "2026-03-01T11:00:00", "summer")])
    for argv in (["append", state, day1, "--through", "2026-03-01"], ["show", state]):
        code, _, err = run_cli(["stream", *argv, "--plot", tmp_path / "p.png"], capsys)
        assert code == 0, err
    assert [sorted(t.split(" ")[0] for t in titles) for titles in drawn] == \
        [["spring", "summer"]] * 2


def test_an_answer_smaller_than_its_noise_is_marked_and_a_vacuous_stream_says_so(
        tmp_path, capsys) -> None:
    """Every interval reaching 0 (reach has no public upper bound, so the interval allows every
    count that could be true) makes ``error.vacuous`` True with the sentence saying so, in the
    JSON and the printed table; a stream whose reach stands out of its noise is not."""
    tiny = _create(tmp_path / "tiny", epsilon=0.02, method="simple")
    [rel] = tiny.append({"u": [1, 2], "t": [1, 1]}, through=1)
    assert rel.error.vacuous
    assert "This statement is vacuous" in rel.error.description
    assert all(bool(np.all(m)) for m in rel.below_noise().values())
    large = _create(tmp_path / "large", epsilon=1000.0, method="simple")
    [clear] = large.append({"u": np.arange(40), "t": np.ones(40, int)}, through=1)
    assert not clear.error.vacuous
    assert not clear.below_noise()[1][0]
    assert "vacuous" not in clear.error.description
    grouped = _create(tmp_path / "grouped", "m=3", epsilon=1000.0, method="simple")
    [per] = grouped.append({"u": np.arange(40), "t": np.ones(40, int),
                            "g": np.array(["a"] * 40)}, through=1)
    assert not per.error.vacuous
    code, out, err = run_cli(["stream", "show", tmp_path / "tiny"], capsys)
    assert code == 0, err
    assert "# VACUOUS: smaller than its noise" in out
    code, out, err = run_cli(["stream", "show", tmp_path / "tiny", "--json", "-"], capsys)
    assert json.loads(out)["error"]["vacuous"] is True
    code, out, err = run_cli(["stream", "show", tmp_path / "grouped"], capsys)
    assert "# smaller than their noise (2 of 3 groups" in out
    assert out.count("smaller than") == 1


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_a_cron_rerun_over_appended_days_appends_only_the_new_one(tmp_path, capsys,
                                                                  engine) -> None:
    """``stream append`` of a file of days 2..3 when 1..2 were appended: day 2's stored
    answers, day 3 appended; the same file with day 2 changed is one line naming period 2,
    and the stream is unchanged."""
    state = _init(tmp_path, capsys, engine, False)
    rows = [(1, "2026-03-01T10:00:00", "spring"), (2, "2026-03-02T10:00:00", "spring"),
            (3, "2026-03-02T11:00:00", "spring"), (1, "2026-03-03T09:00:00", "spring")]
    first = _csv(tmp_path, "d1-2.csv", rows[:3])
    code, out, err = run_cli(["stream", "append", state, first, "--through", "2026-03-02",
                              "--json", "-"], capsys)
    assert code == 0, err
    stored = json.loads(out)["value"]["1"]
    changed = _csv(tmp_path, "bad.csv", [(9, "2026-03-02T10:00:00", "spring"), *rows[2:]])
    code, out, err = run_cli(["stream", "append", state, changed, "--through", "2026-03-03"],
                             capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert "appended for period 2 when re-sent" in err
    assert ReachStream.open(state).last_period == 2
    code, out, err = run_cli(["stream", "append", state, _csv(tmp_path, "d2-3.csv", rows[1:]),
                              "--through", "2026-03-03", "--json", "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["period"] == 3
    assert doc["value"]["1"][:2] == stored
    assert ReachStream.open(state).state.exact[0, 0].tolist() == [1, 2, 0]
