"""The saved state of a stream: a crash between the state write and the return, a crash before
it, a double append, late events, a re-sent period with other events, a signed state, an edited
per-item file, the budget charged once (and nothing random before it), an unbounded stream past
2^k whose published answers never change."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpfreq.stream.mechanisms.epochs as epochs_module
import dpfreq.stream.stream as stream_module
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.stream import ReachStream
from dpfreq.stream.lock import LOCK_FILE
from dpfreq.stream.mechanisms import Budget, EpochCounter
from dpfreq.stream.mechanisms.saved import rebuild_counter
from dpfreq.stream.params import StreamParams
from dpfreq.stream.state import load_state, save_state

KEY = "ab" * 32


def _day(t: int, n: int = 30) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(t)
    return {"u": rng.integers(0, 40, n), "t": np.full(n, t)}


def _create(path, **over):
    kw = {"item": "u", "time": "t", "horizon": 10, "k_values": [1, 2], "unit": "item",
          "epsilon": 1.0, "delta": 0.0, "method": "auto", "late": "error", "engine": "memory",
          "rng": 5}
    kw.update(over)
    return ReachStream.create(path, **kw)


def _values(rel) -> list:
    return [rel.value[k].tolist() for k in rel.k_values]


def test_crash_after_the_state_write_returns_the_stored_answers(tmp_path, monkeypatch) -> None:
    ref = _create(tmp_path / "ref")
    want = [_values(ref.append(_day(t), through=t)[-1]) for t in (1, 2)]
    s = _create(tmp_path / "s")
    s.append(_day(1), through=1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after saving, before returning

    with monkeypatch.context() as m:
        m.setattr(stream_module, "build_releases", crash)
        with pytest.raises(KeyboardInterrupt):
            s.append(_day(2), through=2)
    back = ReachStream.open(tmp_path / "s")
    assert back.last_period == 2  # the append was committed
    noisy = back.state.noisy.copy()
    again = back.append(_day(2), through=2)  # re-sent: the stored answers, no new noise
    assert _values(again[-1]) == want[1]
    np.testing.assert_array_equal(ReachStream.open(tmp_path / "s").state.noisy, noisy)


def test_crash_before_the_state_write_leaves_the_previous_state(tmp_path, monkeypatch) -> None:
    ref = _create(tmp_path / "ref", engine="duckdb")
    want = [_values(ref.append(_day(t), through=t)[-1]) for t in (1, 2)]
    s = _create(tmp_path / "s", engine="duckdb")
    s.append(_day(1), through=1)
    files = sorted(p.name for p in (tmp_path / "s").iterdir() if p.name != LOCK_FILE)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(stream_module, "save_state", crash)
        with pytest.raises(OSError, match="disk full"):
            s.append(_day(2), through=2)
    back = ReachStream.open(tmp_path / "s")
    assert back.last_period == 1
    assert _values(back.append(_day(2), through=2)[-1]) == want[1]
    assert len(files) == 2  # manifest and one per-item file (the orphan was replaced)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [LOCK_FILE, "items-2.parquet",
                                                                 "stream.dpfreq"]


def test_double_append_and_resend_with_other_events(tmp_path) -> None:
    s = _create(tmp_path / "s")
    first = s.append(_day(1), through=1)
    s.append(_day(2), through=3)
    gen = s.state.generation
    assert _values(s.append(_day(1), through=1)[0]) == _values(first[0])
    assert [r.period for r in s.append(_day(2), through=3)] == [2, 3]
    assert s.state.generation == gen  # nothing written
    other = {"u": np.array([99]), "t": np.array([1])}
    with pytest.raises(DataError, match="other events"):
        s.append(other, through=1)
    d = _create(tmp_path / "d", late="drop")
    d.append(_day(1), through=1)
    assert _values(d.append(other, through=1)[0]) == _values(d.release(1))  # never merged


def test_late_and_future_events(tmp_path) -> None:
    s = _create(tmp_path / "s")
    s.append(_day(1), through=1)
    late = {"u": np.array([1, 2]), "t": np.array([1, 2])}
    with pytest.raises(DataError, match="closed period"):
        s.append(late, through=2)
    assert s.last_period == 1
    with pytest.raises(DataError, match="after through"):
        s.append({"u": np.array([1]), "t": np.array([5])}, through=2)
    d = _create(tmp_path / "d", late="drop")
    d.append(_day(1), through=1)
    d.append(late, through=2)
    assert d.state.n_late_dropped == 1
    np.testing.assert_array_equal(d.state.exact[0, :, 1], [1, 0])  # only item 2 of period 2
    with pytest.raises(ParameterError, match="through"):
        d.append(_day(11), through=11)  # past the horizon


def test_signed_state_and_edited_files_are_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    s = _create(tmp_path / "s")
    s.append(_day(1), through=1)
    ReachStream.open(tmp_path / "s")
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    with pytest.raises(DataError, match="signed"):
        ReachStream.open(tmp_path / "s")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    items = tmp_path / "s" / s.state.items_file
    data = bytearray(items.read_bytes())
    data[-40] ^= 1
    items.write_bytes(bytes(data))
    with pytest.raises(DataError):
        ReachStream.open(tmp_path / "s")


def test_budget_charged_once_and_nothing_random_before(tmp_path) -> None:
    acct = Accountant(PrivacyBudget(1.5))
    gen = np.random.default_rng(3)
    before = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        _create(tmp_path / "big", epsilon=2.0, accountant=acct, rng=gen)
    assert gen.bit_generator.state == before  # refused: no draw
    assert not (tmp_path / "big").exists()
    s = _create(tmp_path / "s", accountant=acct, rng=gen)
    for t in range(1, 4):
        s.append(_day(t), through=t)
    s.release(2)
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)
    assert len(acct.ledger) == 1
    with pytest.raises(ParameterError, match="new or empty"):
        _create(tmp_path / "s")


def test_unbounded_stream_past_powers_of_two_never_changes_a_published_answer(tmp_path) -> None:
    s = _create(tmp_path / "s", horizon=None, k_values=[1], unit="event")
    assert s.plan.method == "epochs"
    published: dict[int, float] = {}
    for lo, hi in ((0, 15), (15, 17), (17, 64), (64, 65), (65, 81), (81, 130)):
        rng = np.random.default_rng(hi)
        t = rng.integers(lo + 1, hi + 1, 200)
        rels = s.append({"u": rng.integers(0, 50, 200), "t": t}, through=hi)
        for r in rels:
            published[r.period] = float(r.latest(1))
        curve = rels[-1].value[1]
        assert all(curve[p - 1] == v for p, v in published.items())
    counter = s.plan.counter
    assert counter.rows_through(130) == s.state.noisy.shape[2]
    last = ReachStream.open(tmp_path / "s").release()
    assert last.period == 130
    assert float(last.value[1][16]) == published[17]


def test_a_saved_stream_is_rebuilt_from_its_spec_never_planned_again(tmp_path,
                                                                    monkeypatch) -> None:
    """Opening, appending to and showing a saved stream rebuild its counter from the spec saved
    with it (planning compares every layout: seconds for a horizon-free stream's later
    epochs), never plan; the published bits are those of the stream that planned."""
    fresh = _create(tmp_path / "s", horizon=None, k_values=[1])
    first = fresh.append(_day(1), through=1)[0].to_json()
    assert fresh.state.counter["layout"] == "epochs"
    assert len(fresh.state.counter["epochs"]) >= 3  # those the plan's record and RMSE needed

    def no_plan(*args, **kwargs):
        raise AssertionError("planned again")

    monkeypatch.setattr(StreamParams, "plan", no_plan)
    monkeypatch.setattr(epochs_module, "best_counters", no_plan)
    again = ReachStream.open(tmp_path / "s")
    assert again.release(1).to_json() == first
    [second] = again.append(_day(2), through=2)
    assert ReachStream.open(tmp_path / "s").release().to_json() == second.to_json()


def test_an_epoch_is_chosen_once_and_saved_with_the_spec() -> None:
    """An epoch counter rebuilt with its first epoch known chooses the later ones when first
    needed — the ones a fresh plan chooses — and its spec then lists them in order."""
    budget = Budget(Fraction(1, 2))
    full = EpochCounter("event", budget)
    full.epoch(2)
    part = rebuild_counter({**full.spec(), "epochs": full.spec()["epochs"][:1]}, "event", budget)
    assert part.rows_through(100) == full.rows_through(100)  # 100 lies in epoch 2
    assert part.spec() == full.spec()
    assert [e["layout"] for e in part.spec()["epochs"]] == ["simple", "tree", "tree"]


@pytest.mark.parametrize("epoch0", [{"layout": "tree", "horizon": 16, "branching": 2,
                                     "top": False, "noise": "laplace"},
                                    {"layout": "spiral", "horizon": 16, "noise": "laplace"}])
def test_a_stream_whose_saved_counter_is_another_is_refused(tmp_path, epoch0) -> None:
    """Rows measured by one counter are never read as another's: a saved spec whose counter is
    not the one its record states (or names no layout of this version) is refused on open."""
    _create(tmp_path / "s", horizon=None).append(_day(1), through=1)
    state = load_state(tmp_path / "s")
    spec = {**state.counter, "epochs": [epoch0, *state.counter["epochs"][1:]]}
    save_state(tmp_path / "s", state.advanced(counter=spec))
    with pytest.raises(DataError, match="planned differently"):
        ReachStream.open(tmp_path / "s")


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_a_partial_resend_returns_the_stored_periods_and_appends_the_new(tmp_path,
                                                                        engine) -> None:
    """Yesterday's cron re-runs with a file covering days 3..6 when 1..4 were appended in one
    batch: the stored answers of 3 and 4 (no new noise), 5 and 6 appended, one state write;
    the rows are those of appending day by day. A changed closed period is refused naming it
    (late='error') or its events dropped and counted (late='drop'), never merged."""
    log = {"u": np.concatenate([_day(t)["u"] for t in range(1, 7)]),
           "t": np.concatenate([_day(t)["t"] for t in range(1, 7)])}

    def days(lo: int, hi: int) -> dict[str, np.ndarray]:
        keep = (log["t"] >= lo) & (log["t"] <= hi)
        return {c: v[keep] for c, v in log.items()}

    ref = _create(tmp_path / "ref", engine=engine)
    for t in range(1, 7):
        ref.append(days(t, t), through=t)
    s = _create(tmp_path / "s", engine=engine)
    first = s.append(days(1, 4), through=4)
    gen = s.state.generation
    rels = s.append(days(3, 6), through=6)
    assert [r.period for r in rels] == [3, 4, 5, 6]
    assert [r.to_json() for r in rels[:2]] == [r.to_json() for r in first[2:]]
    assert (s.state.generation, s.state.n_late_dropped) == (gen + 1, 0)
    np.testing.assert_array_equal(s.state.exact, ref.state.exact)
    np.testing.assert_array_equal(s.state.noisy, ref.state.noisy)
    assert [r.period for r in s.append(days(4, 5), through=5)] == [4, 5]  # inside a batch
    with pytest.raises(DataError, match="events of closed periods only"):
        s.append(days(5, 6), through=7)  # yesterday's file named today: never closes today
    changed = {"u": np.r_[days(5, 6)["u"], 3], "t": np.r_[days(5, 6)["t"], 7]}
    changed["u"][0] += 1
    noisy = s.state.noisy.copy()
    for through in (6, 7):
        source = {c: v[changed["t"] <= through] for c, v in changed.items()}
        with pytest.raises(DataError, match=r"appended for period 5 when re-sent") as info:
            s.append(source, through=through)
        assert "\n" not in str(info.value)
    assert s.last_period == 6
    np.testing.assert_array_equal(ReachStream.open(tmp_path / "s").state.noisy, noisy)
    d = _create(tmp_path / "d", engine=engine, late="drop")
    d.append(days(1, 6), through=6)
    rels = d.append(changed, through=7)
    assert [r.period for r in rels] == [5, 6, 7]
    assert d.state.n_late_dropped == int((log["t"] == 5).sum())  # 6 was re-sent as it was
    np.testing.assert_array_equal(d.state.exact[..., :6], ref.state.exact)
