"""Client state machine, sealed state, and the server's validation and estimator."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from dpfreq.artifacts import seal_json
from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal.client import LongitudinalClient
from dpfreq.longitudinal.params import PROTOCOL_VERSION, ProtocolParams, make_params
from dpfreq.longitudinal.server import LongitudinalAggregator

X = (0, 1, 1, 0, 0, 0, 1, 1)


@pytest.mark.parametrize("mode", ["rr", "futurerand", "threshold", "calibrated", "erlingsson"])
def test_reports_at_every_multiple(mode: str) -> None:
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method=mode)
    for seed in range(12):
        c = LongitudinalClient(p, rng=seed)
        ts = [t for t, x in enumerate(X, start=1) if c.step(x)]
        assert ts == list(range(1 << c.order, 9, 1 << c.order))


def test_nonzero_reports_use_v_in_order() -> None:
    """With h = 1 the inputs are (1, −1, 0, 1) and the outputs (v1, −v2, coin, v3)."""
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="futurerand")
    c = _client_with_order(p, 1)
    v = list(c.v)
    y = [2 * r["bit"] - 1 for x in X for r in c.step(x)]
    assert (y[0], y[1], y[3]) == (v[0], -v[1], v[2])
    assert c.used == 3


def _client_with_order(p: ProtocolParams, h: int) -> LongitudinalClient:
    for seed in range(200):
        c = LongitudinalClient(p, rng=seed)
        if c.order == h:
            return c
    raise AssertionError("no seed gives this order")


def test_changes_beyond_k_are_frozen() -> None:
    """Pitfall 4: after the k-th change the reported value is frozen; v is never redrawn."""
    p = make_params(horizon=16, max_changes=2, epsilon=1.0, method="futurerand")
    c = _client_with_order(p, 0)
    v = c.v
    xs = [0, 1] * 8  # 15 changes
    ys = [2 * c.step(x)[0]["bit"] - 1 for x in xs]
    assert c.changes_used == 2
    assert c.frozen == 13
    assert c.used == 2  # only two non-zero partial sums reached the randomizer
    assert c.last_x == 0  # value after the 2nd change (X[0] = 0, two flips)
    assert ys[1] == v[0]
    assert ys[2] == -v[1]
    assert c.v == v


@pytest.mark.parametrize("mode", ["futurerand", "rr", "erlingsson"])
def test_client_freezing_matches_simulation(mode: str) -> None:
    """The client's reported sequence equals freeze_after_k_changes (the simulator's rule)."""
    from dpfreq.longitudinal.simulate import freeze_after_k_changes

    gen = np.random.default_rng(4)
    x = gen.integers(0, 2, size=(30, 16)).astype(np.int8)
    for k in (1, 2, 5):
        p = make_params(horizon=16, max_changes=k, epsilon=1.0, method=mode)
        frozen = freeze_after_k_changes(x, k)
        for u in range(x.shape[0]):
            c = LongitudinalClient(p, rng=u)
            seen = []
            for xt in x[u]:
                c.step(int(xt))
                seen.append(c.last_x)
            assert seen == frozen[u].tolist()
            assert c.changes_used + c.frozen == int(np.sum(np.diff(x[u], prepend=0) != 0))


def test_erlingsson_client_keeps_rth_change() -> None:
    """Only the r-th change (r ~ U[1..k]) reaches the RR; at most one non-zero report."""
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="erlingsson")
    rs = set()
    for seed in range(60):
        c = LongitudinalClient(p, rng=seed)
        rs.add(c.r)
        for x in X:
            c.step(x)
        assert c.used == 1  # X has 3 changes, so the r-th exists for every r in 1..3
        assert c.kept is not None
        assert c.kept[0] == [2, 4, 7][c.r - 1]
    assert rs == {1, 2, 3}


def test_json_round_trip() -> None:
    p = make_params(horizon=12, max_changes=3, epsilon=1.0, method="auto")
    c = LongitudinalClient(p, rng=5)
    for x in X[:5]:
        c.step(x)
    text = c.to_json()
    c2 = LongitudinalClient.from_json(text)
    assert c2.params == p
    assert c2.params.param_id == p.param_id
    assert c2.to_json() == text
    assert c2.v == c.v  # the same keyed vector
    for x in X[5:]:
        assert c.step(x) == c2.step(x)  # the same keyed coins
    last = [c2.step(1) for _ in range(12 - 8)][-1]  # period 12 = horizon: padded to 16
    assert c2.t == 16
    assert c2.finish() == []
    assert [r["interval"] for r in last] == list(range(
        -(-12 // (1 << c2.order)), (16 >> c2.order) + 1))
    with pytest.raises(DataError, match="after the last period"):
        c2.step(0)
    assert ProtocolParams.from_json(p.to_json()) == p
    with pytest.raises(DataError):
        LongitudinalClient.from_json('{"params": {}}')
    edited = json.loads(text)
    edited["payload"]["state"]["t"] = 6
    with pytest.raises(DataError, match="checksum"):
        LongitudinalClient.from_json(json.dumps(edited))


OUTDATED = (r"^protocol version of {} must be 2, the supported protocol version \(the "
            r"protocol is outdated: fetch the study's parameters again\); got 1\.$")


def _as_version(text: str, version: int) -> str:
    """Sealed text re-sealed (valid checksum) as ``version``, its payload's too where it has
    one."""
    outer = json.loads(text)
    payload = outer["payload"]
    for inner in (payload, payload.get("params")):
        if isinstance(inner, dict) and "version" in inner:
            inner["version"] = version
    return seal_json(payload, kind=outer["kind"], version=version,
                     sign=outer["kind"] != "dpfreq.longitudinal.params")


def test_protocol_version_is_2() -> None:
    assert PROTOCOL_VERSION == 2
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    assert p.version == 2
    assert json.loads(p.to_json())["version"] == 2


def test_version_1_parameters_and_state_are_refused_naming_the_version() -> None:
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    with pytest.raises(DataError, match=OUTDATED.format("the parameters")):
        ProtocolParams.from_json(_as_version(p.to_json(), 1))
    state = LongitudinalClient(p, rng=1).to_json()
    with pytest.raises(DataError, match=OUTDATED.format("the client state")):
        LongitudinalClient.from_json(_as_version(state, 1))
    with pytest.raises(DataError, match=r"^version of ProtocolParams must be 2, .*; got 1\.$"):
        dataclasses.replace(p, version=1)
    with pytest.raises(DataError, match=r"\(this dpfreq is older than the text: upgrade it\)"):
        ProtocolParams.from_json(_as_version(p.to_json(), 3))


def test_params_versioned_and_checked() -> None:
    p = make_params(horizon=10, max_changes=3, epsilon=1.0, method="threshold")
    assert p.padded_horizon == 16
    raw = json.loads(p.to_json())
    raw["version"] = 99
    with pytest.raises(DataError, match="version"):
        ProtocolParams.from_json(json.dumps(raw))
    raw = json.loads(p.to_json())
    raw["payload"]["epsilon"] = 1000.0
    with pytest.raises(DataError, match="checksum"):
        ProtocolParams.from_json(json.dumps(raw))
    bad = dataclasses.replace(p, c_gap=p.c_gap * 1.01)  # server and devices must agree
    with pytest.raises(ParameterError, match="c_gap"):
        LongitudinalClient(bad, rng=1)
    with pytest.raises(ParameterError, match="certificate"):
        dataclasses.replace(p, certificate=2.0)
    with pytest.raises(ParameterError, match="padded_horizon"):
        dataclasses.replace(p, padded_horizon=12)


def test_client_bad_input() -> None:
    p = make_params(horizon=4, max_changes=1, epsilon=1.0, method="rr")
    c = LongitudinalClient(p, rng=1)
    with pytest.raises(DataError):
        c.step(2)
    with pytest.raises(ParameterError):
        LongitudinalClient("nope")  # type: ignore[arg-type]
    with pytest.raises(DataError):
        ProtocolParams.from_json(p.to_json().replace(p.param_id, "0" * 16))
    with pytest.raises(DataError):
        ProtocolParams.from_json("not json")


def _agg() -> tuple[ProtocolParams, LongitudinalAggregator]:
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="threshold")
    agg = LongitudinalAggregator(p)
    agg.enrol([1, 2, 3], [0, 1, 3], param_id=p.param_id)
    return p, agg


def test_server_bad_input() -> None:
    p, agg = _agg()
    with pytest.raises(DataError, match="parameter id"):
        agg.ingest([1], [0], [1], [1], param_id="deadbeef")
    with pytest.raises(DataError, match="order must be"):
        agg.ingest([1], [4], [1], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="interval must be"):
        agg.ingest([2], [1], [5], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="interval must be"):
        agg.ingest([1], [0], [0], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="bit"):
        agg.ingest([1], [0], [1], [2], param_id=p.param_id)
    with pytest.raises(DataError, match="not enrolled"):
        agg.ingest([9], [0], [1], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="another order"):
        agg.ingest([1], [1], [1], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([1, 1], [0, 0], [1, 1], [1, 0], param_id=p.param_id)
    agg.ingest([1], [0], [1], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([1], [0], [1], [0], param_id=p.param_id)
    with pytest.raises(DataError, match="enrolled twice"):
        agg.enrol([1], [0])
    assert agg.counts.sum() == 1  # rejected batches counted nothing


def test_server_matches_estimator() -> None:
    """Sums from ingest reproduce Algorithm 2: f̂_t = (log d+1)/c_gap · Σ_{C(t)} sums."""
    p, agg = _agg()
    agg.ingest([1] * 8, [0] * 8, list(range(1, 9)), [1, 0, 1, 1, 0, 0, 1, 1], param_id=p.param_id)
    agg.ingest([2] * 4 + [3], [1] * 4 + [3], [1, 2, 3, 4, 1], [1, 1, 0, 1, 0], param_id=p.param_id)
    est = agg.estimate(confidence=0.95)
    scale = 4 / p.c_gap
    y0 = np.array([1, -1, 1, 1, -1, -1, 1, 1])
    y1 = np.array([1, 1, -1, 1])
    assert est.unclamped[0] == pytest.approx(scale * y0[0])
    assert est.unclamped[2] == pytest.approx(scale * (y1[0] + y0[2]))
    assert est.unclamped[7] == pytest.approx(scale * -1)
    assert est.value[7] == 0  # clamped to [0, devices]
    assert np.all((est.value >= 0) & (est.value <= 3))
    assert np.array_equal(est.value, np.clip(est.unclamped, 0, 3))
    assert est.unit == "device"
    assert est.error.kind == "interval"
    assert np.all(est.error.lower <= est.value)
    assert np.all(est.value <= est.error.upper)
    assert est.mechanism_params["missing_reports"] == 0
    pi = agg.estimate(confidence=0.95, dropouts="per-interval")
    assert pi.unclamped == pytest.approx(est.unclamped)
    table = est.table()
    assert list(table["period"]) == list(range(1, 9))
    assert "date" not in table


def test_server_protocol_version_and_types() -> None:
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="threshold")
    agg = LongitudinalAggregator(p)
    with pytest.raises(DataError, match=r"^rejected: protocol_version must be 2, .*; got 1\.$"):
        agg.enrol([1], [0], param_id=p.param_id, protocol_version=1)
    with pytest.raises(DataError, match="parameter id"):
        agg.enrol([1], [0], param_id="nope")
    with pytest.raises(DataError, match="order must be"):
        agg.enrol([1], [9])
    agg.enrol([5, 1], [0, 2], param_id=p.param_id, protocol_version=p.version)
    assert agg.enrolled.tolist() == [1, 0, 1, 0]
    with pytest.raises(DataError, match="integers or strings"):
        agg.ingest([1.5], [0], [1], [1])
    with pytest.raises(DataError, match=r"intervals of LongitudinalAggregator\.ingest must be "
                       "integers"):
        agg.ingest([5], [0], [1.0], [1])
    # a later batch may interleave users and intervals freely; duplicates across batches caught
    agg.ingest([1, 5, 5], [2, 0, 0], [2, 8, 1], [1, 0, 1], param_id=p.param_id)
    agg.ingest([5], [0], [2], [1], param_id=p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([5, 1], [0, 2], [3, 2], [1, 1], param_id=p.param_id)
    assert agg.counts.sum() == 4


def _reports_file(tmp_path, text: str) -> str:
    path = tmp_path / "reports.csv"
    path.write_text(text)
    return str(path)


def test_file_aggregation_validation(tmp_path) -> None:
    from dpfreq.longitudinal import aggregate_reports_file

    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    head = "device,order,interval,bit"
    empty = aggregate_reports_file(_reports_file(tmp_path, head + "\n"), p,
                                   enrolled=[0, 0, 0, 0], confidence=0.9)
    assert empty.devices == 0
    assert np.array_equal(empty.value, np.zeros(8))
    cases = {
        f"{head}\n1,0,1,x\n": "must hold integers",
        f"{head}\n1,0,1,\n": "null",
        f"{head}\n1,5,1,1\n": "order must be",
        f"{head}\n1,1,5,1\n": "interval must be",
        f"{head}\n1,0,1,2\n": "bit must be 0 or 1",
        f"{head}\n1,0,1,1\n1,1,1,1\n": "more than one order",
        f"{head}\n1,0,1,1\n1,0,1,0\n": "duplicate",
        "device,order,interval\n1,0,1\n": "'bit' is missing",
        f"{head},param_id\n1,0,1,1,{'f' * 16}\n": "param_id",
    }
    for text, match in cases.items():
        with pytest.raises(DataError, match=match):
            aggregate_reports_file(_reports_file(tmp_path, text), p, enrolled=[9] * 4)
    with pytest.raises(DataError):
        aggregate_reports_file(tmp_path / "nope.csv", p, enrolled=[9] * 4)
    with pytest.raises(DataError, match="more devices"):  # 2 devices of order 0, 1 enrolled
        aggregate_reports_file(_reports_file(tmp_path, f"{head}\n1,0,1,1\n2,0,1,1\n"), p,
                               enrolled=[1, 0, 0, 0])


def test_file_param_id_keeps_leading_zeros(tmp_path, monkeypatch) -> None:
    """A param_id made only of digits (with leading zeros) is read as text from CSV."""
    from dpfreq.longitudinal import aggregate_reports_file

    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    pid = "0012345678901234"
    monkeypatch.setattr(ProtocolParams, "param_id", property(lambda self: pid))
    path = _reports_file(tmp_path, f"device,order,interval,bit,param_id\n007,3,1,1,{pid}\n"
                                   f"7,3,1,0,{pid}\n")
    rel = aggregate_reports_file(path, p, enrolled=[0, 0, 0, 2])
    assert rel.devices == 2  # "007" and "7" are two devices


@pytest.mark.parametrize("engine", ["spark", "instance", None])
def test_file_aggregation_passes_engine_through(tmp_path, monkeypatch, engine) -> None:
    """``engine`` (a name such as "spark", or an Engine instance) reaches get_engine unchanged."""
    import dpfreq.engines as engines
    from dpfreq.longitudinal import aggregate_reports_file

    duck = engines.get_engine("duckdb")
    arg = duck if engine == "instance" else engine
    calls = []

    def fake_get_engine(name, source=None, **options):
        calls.append((name, source))
        return duck

    monkeypatch.setattr(engines, "get_engine", fake_get_engine)
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    path = _reports_file(tmp_path, "device,order,interval,bit,param_id\n"
                                   f"1,3,1,1,{p.param_id}\n")
    rel = aggregate_reports_file(path, p, enrolled=[0, 0, 0, 1], engine=arg, confidence=0.9)
    assert calls == [(arg, path)]
    assert calls[0][0] is arg
    assert rel.devices == 1
    assert rel.unclamped[7] == pytest.approx(4 / p.c_gap)


def test_per_order_sparsity_params_client_server() -> None:
    """Pitfall 5: order h uses min(k, d/2^h) non-zeros; gaps per order shared and checked."""
    from dpfreq.longitudinal.laws import distance_law

    p = make_params(horizon=16, max_changes=6, epsilon=1.0, method="threshold",
                    per_order_sparsity=True)
    assert [p.changes_at_order(h) for h in range(5)] == [6, 6, 4, 2, 1]
    assert p.c_gaps == tuple(distance_law("threshold", kh, 1.0).c_gap for kh in (6, 6, 4, 2, 1))
    assert p.c_gaps[4] > p.c_gaps[0]
    assert p.certificate <= 1.0
    assert ProtocolParams.from_json(p.to_json()) == p
    plain = make_params(horizon=16, max_changes=6, epsilon=1.0, method="threshold")
    assert p.param_id != plain.param_id
    for h in range(5):
        c = _client_with_order(p, h)
        assert c.randomizer.max_changes == p.changes_at_order(h)
        assert c.randomizer.c_gap == p.c_gaps[h]
    agg = LongitudinalAggregator(p)
    agg.enrol([1], [4], param_id=p.param_id)
    agg.ingest([1], [4], [1], [1], param_id=p.param_id)
    est = agg.estimate(confidence=0.95)
    assert est.unclamped[15] == pytest.approx(5 / p.c_gaps[4])
    assert est.sd[15] == pytest.approx(np.sqrt(5 / p.c_gaps[4] ** 2))
    assert est.mechanism_params["c_gap_per_order"] == list(p.c_gaps)
    with pytest.raises(ParameterError, match="distance-based"):
        make_params(horizon=16, max_changes=6, epsilon=1.0, method="erlingsson",
                    per_order_sparsity=True)
    with pytest.raises(ParameterError, match="order_c_gaps"):
        dataclasses.replace(p, order_c_gaps=p.c_gaps[:2])


def test_time_axis_in_params_and_results() -> None:
    """start/period travel in the sealed params; an aware start is kept in UTC; results carry
    the start of every period."""
    p = make_params(horizon=3, max_changes=1, epsilon=1.0, method="rr",
                    start="2026-01-01T06:00:00+02:00", period="6h")
    assert p.start == "2026-01-01T04:00:00"
    assert ProtocolParams.from_json(p.to_json()) == p
    agg = LongitudinalAggregator(p)
    est = agg.estimate()
    assert [str(d) for d in est.table()["date"]] == [
        "2026-01-01T04:00:00", "2026-01-01T10:00:00", "2026-01-01T16:00:00"]
    with pytest.raises(ParameterError, match="start/period of make_params must be both given"):
        make_params(horizon=3, max_changes=1, epsilon=1.0, method="rr", period="1d")
    with pytest.raises(ParameterError, match="period"):
        make_params(horizon=3, max_changes=1, epsilon=1.0, method="rr",
                    start="2026-01-01", period="0d")


def test_periods_without_all_their_reports_have_no_estimate() -> None:
    """A period one of whose intervals (at an order with enrolled devices) has no report yet is
    not estimated: NaN in the release, null in JSON, never a count of 0 that looks like data."""
    p = make_params(horizon=8, max_changes=2, epsilon=2.0, method="rr")
    clients = {u: LongitudinalClient(p, rng=u) for u in range(40)}
    agg = LongitudinalAggregator(p)
    agg.enrol(list(clients), [c.order for c in clients.values()], param_id=p.param_id)
    assert np.all(agg.enrolled > 0)
    agg.ingest_reports({**r, "device": u} for u, c in clients.items()
                       for t in range(5) for r in c.step(int(u % 3 == 0)))
    est = agg.estimate(confidence=0.9)
    # periods 1..5 have ended; 6 = (1,3)+(2,1) and 7 = (0,7)+(1,3)+(2,1) lack (1,3), 8 = (3,1)
    assert est.available.tolist() == [True] * 5 + [False] * 3
    for arr in (est.value, est.unclamped, est.error.lower, est.error.upper,
                est.error.band_lower, est.error.band_upper):
        assert np.all(np.isfinite(arr[:5]))
        assert np.all(np.isnan(arr[5:]))
    assert "3 of 8 periods" in est.error.description
    doc = json.loads(est.to_json())
    assert doc["value"][5:] == [None] * 3
    assert None not in doc["value"][:5]
    assert doc["error"]["upper"][5:] == [None] * 3
    assert doc["unclamped"][5:] == [None] * 3
    for u, c in clients.items():  # the last three periods end: every period is estimated
        agg.ingest_reports({**r, "device": u} for t in range(3) for r in c.step(0))
    assert agg.estimate(confidence=0.9).available.all()
