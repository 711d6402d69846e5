"""`plan_reach_stream` and `dpfreq plan stream`: the errors a stream would publish, before it is
created. The forecast's half-widths and bands equal those the created stream publishes (plus
the factorization's floating-point allowance, which depends on the measurement), its RMSE is
the plan's prediction, the re-release baseline is the exact discrete Laplace quantile at ε/T
(with δ > 0 the discrete Gaussian at ρ/T when that is narrower),
``epsilon_for`` is the smallest ε on the 3-significant-digit grid that meets a target, and the
command line prints it (text, and clean JSON on stdout with ``--json -``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cli_runner import run_cli
from dpfreq import plan_reach_stream
from dpfreq._epsilon_search import step3
from dpfreq._noise_laws import discrete_laplace_tail_bound
from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.errors import ParameterError
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.stream import ReachStream
from dpfreq.stream.auto import plan_stream

PUBLIC = {"k_values": [1, 2], "unit": "item", "epsilon": 1.0}


def _published(tmp_path, horizon, last, **kw):
    """The per-answer and band half-widths a created stream publishes through ``last``."""
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=horizon, late="error",
                           engine="memory", rng=4, **PUBLIC, **kw)
    rng = np.random.default_rng(0)
    cols = {"u": rng.integers(0, 200, 3000), "t": rng.integers(1, last + 1, 3000)}
    rel = s.append(cols, through=last)[-1]
    value = np.asarray(rel.value[1], dtype=np.float64)
    return (np.asarray(rel.error.upper[1]) - value,
            np.asarray(rel.error.band_upper[1]) - value)


@pytest.mark.parametrize(("method", "delta"), [("simple", 0.0), ("tree", 0.0), ("smooth", 0.0),
                                               ("factorization", 1e-6), ("auto", 1e-6)])
def test_the_forecast_is_what_the_stream_publishes(tmp_path, method, delta) -> None:
    f = plan_reach_stream(horizon=12, method=method, delta=delta, **PUBLIC)
    half, band = _published(tmp_path, 12, 12, method=method, delta=delta)
    assert f.periods.tolist() == list(range(1, 13))
    if f.method == "factorization":  # plus the allowance of the measured floats, ~1e-12
        assert np.all(half >= f.half_width)
        assert np.all(half - f.half_width < 1e-6)
        assert np.all(band >= f.band_half_width)
        assert np.all(band - f.band_half_width < 1e-6)
    else:
        np.testing.assert_array_equal(half, f.half_width)
        np.testing.assert_array_equal(band, f.band_half_width)
    plan = plan_stream(horizon=12, unit="item", epsilon=1.0, delta=delta, n_k=2,
                       method=method, max_groups_per_item=None)
    assert f.method == plan.method
    predicted = plan.record["predicted_rmse"]  # labels "method" or "method/noise"
    assert f.rmse == pytest.approx(min(v for k, v in predicted.items()
                                       if k.split("/")[0] == plan.method), rel=1e-9)


def test_an_unbounded_forecast_matches_the_stream_at_its_periods(tmp_path) -> None:
    f = plan_reach_stream(horizon=None, method="auto", delta=0.0, **PUBLIC)
    half, band = _published(tmp_path, None, 30, method="auto", delta=0.0)
    at = [i for i, t in enumerate(f.periods) if t <= 30]
    assert f.periods[at].tolist() == [1, 7, 30]
    np.testing.assert_array_equal(half[f.periods[at] - 1], f.half_width[at])
    np.testing.assert_array_equal(band[f.periods[at] - 1], f.band_half_width[at])
    assert f.rerelease_half_width is None
    assert "no horizon" in f.lines()[-1]


def test_the_rerelease_baseline_is_the_exact_quantile_at_epsilon_over_t() -> None:
    f = plan_reach_stream(horizon=30, method="auto", delta=0.0, k_values=[1], unit="item",
                          epsilon=1.0)
    gamma = discrete_laplace_gamma(1.0 / 30, sensitivity=1)
    assert f.rerelease_half_width == discrete_laplace_tail_bound(0.05, gamma)
    assert f.rerelease_sd > 7 * f.rmse  # 30 re-releases at ε/30 against one stream


def test_with_delta_the_rerelease_baseline_composes_in_zcdp() -> None:
    """At δ > 0 a user re-releasing every period composes the T releases in zCDP (ρ/T each):
    a discrete Gaussian of variance about T/(2ρ), whatever accounting the stream uses (here a
    pure-ε tree)."""
    f = plan_reach_stream(horizon=365, method="auto", delta=1e-6, k_values=[1], unit="item",
                          epsilon=1.0)
    pure = plan_reach_stream(horizon=365, method="auto", delta=0.0, k_values=[1], unit="item",
                             epsilon=1.0)
    assert f.method == "tree"
    exact = math.sqrt(365 / (2 * zcdp_rho(1.0, 1e-6)))  # σ² is rounded up, ρ down: >=
    assert exact <= f.rerelease_sd <= 1.01 * exact
    assert f.rerelease_sd < pure.rerelease_sd / 5


def test_with_delta_the_why_names_the_other_accountings_best() -> None:
    one = plan_reach_stream(horizon=365, method="auto", delta=1e-6, k_values=[1], unit="item",
                            epsilon=1.0)  # pure ε wins: a tree
    two = plan_reach_stream(horizon=365, method="auto", delta=1e-6, **PUBLIC)  # zCDP wins
    pure = plan_reach_stream(horizon=365, method="auto", delta=0.0, **PUBLIC)
    assert (one.method, two.method, pure.method) == ("tree", "factorization", "tree")
    assert "; under zCDP the best is factorization/gaussian, predicted RMSE" in one.why
    assert two.why.endswith(f"; under pure epsilon-DP the best is tree, predicted RMSE "
                            f"{pure.rmse:.4g}")
    assert "under" not in pure.why  # δ = 0: one accounting, nothing else to name


def test_groups_set_the_budget_and_the_band() -> None:
    one = plan_reach_stream(horizon=20, method="simple", delta=0.0, **PUBLIC)
    two = plan_reach_stream(horizon=20, method="simple", delta=0.0, group="c",
                            groups=["a", "b", "c"], max_groups_per_item=2, **PUBLIC)
    np.testing.assert_allclose(two.sd, 2 * one.sd, rtol=0.06)  # ε/2 per group
    assert np.all(two.band_half_width > two.half_width)
    assert two.n_groups == 3
    assert "3 groups (an item counts in at most 2)" in two.lines()[0]


@pytest.mark.parametrize(("kw", "match"), [
    ({"epsilon": -1.0}, "epsilon of plan_reach_stream must be"),
    ({"horizon": 0}, "horizon of plan_reach_stream must be"),
    ({"unit": "user"}, "unit of plan_reach_stream must be"),
    ({"max_groups_per_item": 2}, "groups of plan_reach_stream must be a public list"),
])
def test_bad_parameters_are_one_line(kw, match) -> None:
    args = {"horizon": 30, "method": "auto", "delta": 0.0, **PUBLIC, **kw}
    with pytest.raises(ParameterError, match=match) as exc:
        plan_reach_stream(**args)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("horizon", "measure"), [(30, "half_width"), (365, "rmse"),
                                                  (None, "band_half_width")])
def test_epsilon_for_is_the_smallest_on_the_grid(horizon, measure) -> None:
    f = plan_reach_stream(horizon=horizon, method="auto", delta=0.0, **PUBLIC)
    eps = f.epsilon_for(12.0, measure=measure)

    def at(e: float) -> float:
        return plan_reach_stream(horizon=horizon, method="auto", delta=0.0,
                                 **{**PUBLIC, "epsilon": e}).measure(measure)

    assert at(eps) <= 12.0 < at(float(f"{eps - step3(eps * (1 - 1e-9)):.3g}"))


def test_epsilon_for_refusals_and_the_largest_epsilon() -> None:
    unbounded = plan_reach_stream(horizon=None, method="auto", delta=0.0, **PUBLIC)
    with pytest.raises(ParameterError, match=r"measure of StreamForecast\.epsilon_for"):
        unbounded.epsilon_for(10.0, measure="rmse")
    with pytest.raises(ParameterError, match=r"target of StreamForecast\.epsilon_for"):
        unbounded.epsilon_for(-1.0)
    top = plan_reach_stream(horizon=30, method="auto", delta=0.0, **{**PUBLIC,
                                                                     "epsilon": 1000.0})
    assert top.rmse < 1e-6  # the noise's variance underflows: planned, not refused
    assert "re-releasing" in top.lines()[-1]


def test_cli_plan_stream_text_and_json(tmp_path, capsys) -> None:
    line = ["plan", "stream", "--horizon", "30", "--k", "1,2", "--unit", "item", "--epsilon",
            "1", "--delta", "0", "--method", "auto"]
    code, out, err = run_cli([*line, "--rows", "3"], capsys)
    assert code == 0, err
    f = plan_reach_stream(horizon=30, method="auto", delta=0.0, **PUBLIC)
    assert out.splitlines() == f.lines(3)
    code, out, err = run_cli([*line, "--json", "-"], capsys)
    assert code == 0
    doc = json.loads(out)  # stdout is the JSON alone; the text went to stderr
    assert doc["half_width"] == f.half_width.tolist()
    assert doc["method"] == f.method
    assert "# plan: reach stream over T=30 periods" in err
    code, _, err = run_cli([*line[:3], "0", *line[4:]], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    groups = tmp_path / "groups.txt"
    groups.write_text("a\nb\nc\n", encoding="utf-8")
    code, out, _ = run_cli([*line, "--group", "campaign", "--groups", groups,
                            "--max-groups-per-item", "2", "--json", "-"], capsys)
    assert code == 0
    grouped = plan_reach_stream(horizon=30, method="auto", delta=0.0, group="campaign",
                                groups=["a", "b", "c"], max_groups_per_item=2, **PUBLIC)
    assert json.loads(out)["band_half_width"] == grouped.band_half_width.tolist()
    assert json.loads(out)["n_groups"] == 3
    code, out, _ = run_cli([*line, "--target-half-width", "10", "--json", "-"], capsys)
    assert code == 0
    assert json.loads(out)["epsilon_for_target_half_width"] == {
        "target": 10.0, "epsilon": f.epsilon_for(10.0)}
