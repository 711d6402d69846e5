"""Client state machine and server validation (futurerand.md §3.1, §7, §8)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal.client import LongitudinalClient, ProtocolParams, make_params
from dpfreq.longitudinal.server import LongitudinalAggregator

X = (0, 1, 1, 0, 0, 0, 1, 1)


@pytest.mark.parametrize("mode", ["rr", "futurerand", "threshold", "calibrated", "erlingsson"])
def test_reports_at_every_multiple(mode: str) -> None:
    p = make_params(8, 3, 1.0, mode)
    for seed in range(12):
        c = LongitudinalClient(p, rng=seed)
        ts = [t for t, x in enumerate(X, start=1) if c.step(x) is not None]
        assert ts == list(range(1 << c.h, 9, 1 << c.h))


def test_nonzero_reports_use_v_in_order() -> None:
    """§6.1: with h = 1 the inputs are (1, −1, 0, 1) and the outputs (v1, −v2, coin, v3)."""
    p = make_params(8, 3, 1.0, "futurerand")
    c = _client_with_order(p, 1)
    v = list(c.v)
    y = [2 * r["bit"] - 1 for r in (c.step(x) for x in X) if r is not None]
    assert (y[0], y[1], y[3]) == (v[0], -v[1], v[2])
    assert c.used == 3


def _client_with_order(p: ProtocolParams, h: int) -> LongitudinalClient:
    for seed in range(200):
        c = LongitudinalClient(p, rng=seed)
        if c.h == h:
            return c
    raise AssertionError("no seed gives this order")


def test_changes_beyond_k_are_frozen() -> None:
    """Pitfall 4: after the k-th change the reported value is frozen; v is never redrawn."""
    p = make_params(16, 2, 1.0, "futurerand")
    c = _client_with_order(p, 0)
    v = c.v
    xs = [0, 1] * 8  # 15 changes
    ys = [2 * c.step(x)["bit"] - 1 for x in xs]
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
        p = make_params(16, k, 1.0, mode)
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
    """§4.4: only the r-th change (r ~ U[1..k]) reaches the RR; at most one non-zero report."""
    p = make_params(8, 3, 1.0, "erlingsson")
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
    p = make_params(12, 3, 1.0, "auto")
    c = LongitudinalClient(p, rng=5)
    for x in X[:5]:
        c.step(x)
    text = c.to_json()
    c2 = LongitudinalClient.from_json(text, rng=7)
    assert c2.params == p
    assert c2.params.param_id == p.param_id
    assert c2.to_json() == text
    assert c2.v == c.v  # restored, never redrawn
    for x in X[5:]:
        r1, r2 = c.step(x), c2.step(x)
        assert (r1 is None) == (r2 is None)
        if r1 is not None and r2 is not None:
            assert {k: r1[k] for k in ("h", "j")} == {k: r2[k] for k in ("h", "j")}
    rest = c2.finish()  # padded to 16
    assert c2.t == 16
    assert all(r["j"] <= 16 >> c2.h for r in rest)
    assert ProtocolParams.from_json(p.to_json()) == p
    with pytest.raises(DataError):
        LongitudinalClient.from_json('{"params": {}}')


def test_params_versioned_and_checked() -> None:
    p = make_params(10, 3, 1.0, "threshold")
    assert p.padded_periods == 16
    raw = json.loads(p.to_json())
    raw["version"] = 99
    raw.pop("param_id")
    with pytest.raises(DataError, match="version"):
        ProtocolParams.from_json(json.dumps(raw))
    bad = dataclasses.replace(p, c_gap=p.c_gap * 1.01)  # server and devices must agree
    with pytest.raises(ParameterError, match="c_gap"):
        LongitudinalClient(bad, rng=1)
    with pytest.raises(ParameterError, match="certificate"):
        dataclasses.replace(p, certificate=2.0)
    with pytest.raises(ParameterError, match="padded_periods"):
        dataclasses.replace(p, padded_periods=12)


def test_client_bad_input() -> None:
    p = make_params(4, 1, 1.0, "rr")
    c = LongitudinalClient(p, rng=1)
    with pytest.raises(DataError):
        c.step(2)
    with pytest.raises(ParameterError):
        LongitudinalClient("nope")  # type: ignore[arg-type]
    with pytest.raises(DataError):
        ProtocolParams.from_json(p.to_json().replace(p.param_id, "0" * 16))


def _agg() -> tuple[ProtocolParams, LongitudinalAggregator]:
    p = make_params(8, 3, 1.0, "threshold")
    agg = LongitudinalAggregator(p)
    agg.enrol([1, 2, 3], [0, 1, 3], p.param_id)
    return p, agg


def test_server_bad_input() -> None:
    p, agg = _agg()
    with pytest.raises(DataError, match="unknown parameter id"):
        agg.ingest([1], [0], [1], [1], "deadbeef")
    with pytest.raises(DataError, match="order h"):
        agg.ingest([1], [4], [1], [1], p.param_id)
    with pytest.raises(DataError, match="interval j"):
        agg.ingest([2], [1], [5], [1], p.param_id)
    with pytest.raises(DataError, match="interval j"):
        agg.ingest([1], [0], [0], [1], p.param_id)
    with pytest.raises(DataError, match="bit"):
        agg.ingest([1], [0], [1], [2], p.param_id)
    with pytest.raises(DataError, match="before its enrolment"):
        agg.ingest([9], [0], [1], [1], p.param_id)
    with pytest.raises(DataError, match="enrolled with"):
        agg.ingest([1], [1], [1], [1], p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([1, 1], [0, 0], [1, 1], [1, 0], p.param_id)
    agg.ingest([1], [0], [1], [1], p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([1], [0], [1], [0], p.param_id)
    with pytest.raises(DataError, match="enrolled twice"):
        agg.enrol([1], [0])
    assert agg.counts.sum() == 1  # rejected batches counted nothing


def test_server_matches_estimator() -> None:
    """Sums from ingest reproduce Algorithm 2: f̂_t = (log d+1)/c_gap · Σ_{C(t)} sums."""
    p, agg = _agg()
    agg.ingest([1] * 8, [0] * 8, list(range(1, 9)), [1, 0, 1, 1, 0, 0, 1, 1], p.param_id)
    agg.ingest([2] * 4 + [3], [1] * 4 + [3], [1, 2, 3, 4, 1], [1, 1, 0, 1, 0], p.param_id)
    est = agg.estimate(beta=0.05)
    scale = 4 / p.c_gap
    y0 = np.array([1, -1, 1, 1, -1, -1, 1, 1])
    y1 = np.array([1, 1, -1, 1])
    assert est.value[0] == pytest.approx(scale * y0[0])
    assert est.value[2] == pytest.approx(scale * (y1[0] + y0[2]))
    assert est.value[7] == pytest.approx(scale * -1)
    assert est.mechanism_params["missing_reports"] == 0
    pi = agg.estimate(beta=0.05, dropouts="per-interval")
    assert pi.value == pytest.approx(est.value)


def test_server_protocol_version_and_types() -> None:
    p = make_params(8, 3, 1.0, "threshold")
    agg = LongitudinalAggregator(p)
    with pytest.raises(DataError, match="protocol version"):
        agg.enrol([1], [0], p.param_id, protocol_version=99)
    with pytest.raises(DataError, match="unknown parameter id"):
        agg.enrol([1], [0], "nope")
    with pytest.raises(DataError, match="order h"):
        agg.enrol([1], [9])
    agg.enrol([5, 1], [0, 2], p.param_id, protocol_version=p.version)
    assert agg.enrolled.tolist() == [1, 0, 1, 0]
    with pytest.raises(DataError, match="integers"):
        agg.ingest([1.5], [0], [1], [1])
    with pytest.raises(DataError, match="interval j must be an integer"):
        agg.ingest([5], [0], [1.0], [1])
    # a later batch may interleave users and intervals freely; duplicates across batches caught
    agg.ingest([1, 5, 5], [2, 0, 0], [2, 8, 1], [1, 0, 1], p.param_id)
    agg.ingest([5], [0], [2], [1], p.param_id)
    with pytest.raises(DataError, match="duplicate"):
        agg.ingest([5, 1], [0, 2], [3, 2], [1, 1], p.param_id)
    assert agg.counts.sum() == 4


def _reports_file(tmp_path, text: str) -> str:
    path = tmp_path / "reports.csv"
    path.write_text(text)
    return str(path)


def test_file_aggregation_validation(tmp_path) -> None:
    from dpfreq.longitudinal import aggregate_reports_file

    p = make_params(8, 2, 1.0, "rr")
    empty = aggregate_reports_file(_reports_file(tmp_path, "user,h,j,bit\n"), p, beta=0.1)
    assert empty.n_users == 0
    assert np.array_equal(empty.value, np.zeros(8))
    cases = {
        "user,h,j,bit\n1,0,1,x\n": "integers",
        "user,h,j,bit\n1,0,1,\n": "null",
        "user,h,j,bit\n1,5,1,1\n": "order h",
        "user,h,j,bit\n1,1,5,1\n": "interval j",
        "user,h,j,bit\n1,0,1,2\n": "bit not in",
        "user,h,j,bit\n1,0,1,1\n1,1,1,1\n": "more than one order",
        "user,h,j\n1,0,1\n": "missing 'bit'",
        f"user,h,j,bit,param_id\n1,0,1,1,{'f' * 16}\n": "unknown parameter id",
    }
    for text, match in cases.items():
        with pytest.raises(DataError, match=match):
            aggregate_reports_file(_reports_file(tmp_path, text), p)
    with pytest.raises(DataError, match="does not exist"):
        aggregate_reports_file(tmp_path / "nope.csv", p)


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
    p = make_params(8, 2, 1.0, "rr")
    path = _reports_file(tmp_path, "user,h,j,bit,param_id\n" + f"1,3,1,1,{p.param_id}\n")
    rel = aggregate_reports_file(path, p, engine=arg, beta=0.1)
    assert calls == [(arg, path)]
    assert calls[0][0] is arg
    assert rel.n_users == 1
    assert rel.value[7] == pytest.approx(4 / p.c_gap)


def test_per_order_sparsity_params_client_server() -> None:
    """Pitfall 5: order h uses min(k, d/2^h) non-zeros; gaps per order shared and checked."""
    from dpfreq.longitudinal import distance_law

    p = make_params(16, 6, 1.0, "threshold", per_order_sparsity=True)
    assert [p.changes_at_order(h) for h in range(5)] == [6, 6, 4, 2, 1]
    assert p.c_gaps == tuple(distance_law("threshold", kh, 1.0).c_gap for kh in (6, 6, 4, 2, 1))
    assert p.c_gaps[4] > p.c_gaps[0]
    assert p.certificate <= 1.0
    assert ProtocolParams.from_json(p.to_json()) == p
    assert p.param_id != make_params(16, 6, 1.0, "threshold").param_id
    for h in range(5):
        c = _client_with_order(p, h)
        assert c.randomizer.changes == p.changes_at_order(h)
        assert c.randomizer.c_gap == p.c_gaps[h]
    agg = LongitudinalAggregator(p)
    agg.enrol([1], [4], p.param_id)
    agg.ingest([1], [4], [1], [1], p.param_id)
    est = agg.estimate(beta=0.05)
    assert est.value[15] == pytest.approx(5 / p.c_gaps[4])
    assert est.sd[15] == pytest.approx(np.sqrt(5 / p.c_gaps[4] ** 2))
    assert est.mechanism_params["c_gap_per_order"] == list(p.c_gaps)
    with pytest.raises(ParameterError, match="distance-based"):
        make_params(16, 6, 1.0, "erlingsson", per_order_sparsity=True)
    with pytest.raises(ParameterError, match="order_c_gaps"):
        dataclasses.replace(p, order_c_gaps=p.c_gaps[:2])
