"""Client state machine and server validation (futurerand.md §3.1, §7, §8)."""

from __future__ import annotations

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
    for seed in range(40):
        c = LongitudinalClient(p, rng=seed)
        if c.h != 1:
            continue
        v = list(c.v)
        y = [2 * r["bit"] - 1 for r in (c.step(x) for x in X) if r is not None]
        assert (y[0], y[1], y[3]) == (v[0], -v[1], v[2])
        assert c.used == 3


def test_changes_beyond_k_are_frozen() -> None:
    p = make_params(16, 2, 1.0, "futurerand")
    c = LongitudinalClient(p, rng=0)
    c.h = 0
    c.v = [1, 1]
    xs = [0, 1] * 8
    ys = [2 * c.step(x)["bit"] - 1 for x in xs]
    assert c.used == 2
    assert c.frozen == sum(1 for a, b in zip([0, *xs], xs, strict=False) if a != b) - 2
    assert ys[1] == 1
    assert ys[2] == -1
    assert c.v == [1, 1]  # never redrawn


def test_json_round_trip() -> None:
    p = make_params(12, 3, 1.0, "auto")
    c = LongitudinalClient(p, rng=5)
    for x in X[:5]:
        c.step(x)
    c2 = LongitudinalClient.from_json(c.to_json(), rng=7)
    assert c2.params == p
    assert c2.params.param_id == p.param_id
    state = {k: v for k, v in c.__dict__.items() if k != "_gen"}
    assert {k: v for k, v in c2.__dict__.items() if k != "_gen"} == state
    assert ProtocolParams.from_json(p.to_json()) == p
    for x in X[5:]:
        c2.step(x)
    rest = c2.finish()  # padded to 16
    assert c2.t == 16
    assert all(r["j"] <= 16 >> c2.h for r in rest)


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
