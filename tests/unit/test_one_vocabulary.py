"""One name for one idea: the mechanism is chosen by ``method`` everywhere (Python and CLI), every
system has a planner, and every plan answers ``epsilon_for(target, **which)``."""

from __future__ import annotations

import importlib
import inspect
import json
from typing import Any

import click
import numpy as np
import pytest

import dpfreq
from dpfreq.cli.main import cli
from dpfreq.errors import ParameterError

SYSTEMS = ("profile", "anonymized", "windows", "longitudinal")
OTHER_NAMES = {"strategy", "randomizer", "mechanism", "mode"}  # the names `method` replaced


def _callables() -> list[Any]:
    """Every public release, simulation and plan function, and the longitudinal parameter and
    randomizer constructors, which also choose the mechanism."""
    out = []
    for system in SYSTEMS:
        module = importlib.import_module(f"dpfreq.{system}")
        for name in module.__all__:
            if name.startswith(("release_", "simulate_", "plan_")):
                out.append(pytest.param(getattr(module, name), id=f"{system}.{name}"))
    from dpfreq.longitudinal.randomizers import make_randomizer

    out.append(pytest.param(dpfreq.make_params, id="longitudinal.make_params"))
    out.append(pytest.param(make_randomizer, id="longitudinal.make_randomizer"))
    return out


@pytest.mark.parametrize("func", _callables())
def test_the_mechanism_keyword_is_method(func: Any) -> None:
    params = inspect.signature(func).parameters
    assert "method" in params, f"{func.__qualname__} chooses its mechanism by method="
    assert not OTHER_NAMES & set(params), sorted(OTHER_NAMES & set(params))


def test_the_longitudinal_parameters_and_bundle_name_the_method_method() -> None:
    from dataclasses import fields

    from dpfreq.artifacts import seal_json
    from dpfreq.errors import DataError
    from dpfreq.longitudinal import ProtocolParams, device_bundle
    from dpfreq.longitudinal.params import PROTOCOL_VERSION

    p = dpfreq.make_params(horizon=8, max_changes=2, epsilon=1.0, method="auto")
    names = {f.name for f in fields(ProtocolParams)}
    assert "method" in names
    assert not OTHER_NAMES & names, sorted(OTHER_NAMES & names)
    bundle = device_bundle(p)
    assert bundle["method"] == p.method == "threshold"
    assert not OTHER_NAMES & set(bundle), sorted(OTHER_NAMES & set(bundle))
    payload = json.loads(p.to_json())["payload"]
    payload["randomizer"] = payload.pop("method")  # the old name is not read
    old = seal_json(payload, kind="dpfreq.longitudinal.params", version=PROTOCOL_VERSION,
                    sign=False)
    with pytest.raises(DataError, match="do not hold valid protocol parameters"):
        ProtocolParams.from_json(old)


def test_every_system_has_a_planner_at_the_top_level() -> None:
    for name in ("plan_profile", "plan_anonymized", "plan_window_counts", "plan_longitudinal"):
        assert name in dpfreq.__all__
        assert callable(getattr(dpfreq, name))
    assert "plan_longitudinal" in importlib.import_module("dpfreq.longitudinal").__all__


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[Any]:
    out = [(path, group)]
    if isinstance(group, click.Group):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if sub is not None:
                out.extend(_commands(sub, (*path, name)))
    return out


#: the CLI commands that choose a mechanism, by path
CHOOSERS = {("profile",), ("anonymize",), ("plan", "profile"), ("plan", "anonymize"),
            ("plan", "longitudinal"), ("longitudinal", "simulate"), ("longitudinal", "params")}


def test_every_cli_command_chooses_its_mechanism_by_method() -> None:
    seen = {}
    for path, command in _commands(cli):
        names = {opt for p in command.params for opt in getattr(p, "opts", ())}
        seen[path] = names
        bad = {f"--{n}" for n in OTHER_NAMES} & names
        assert not bad, f"dpfreq {' '.join(path)} takes {sorted(bad)}; use --method"
    for path in CHOOSERS:
        assert "--method" in seen[path], f"dpfreq {' '.join(path)} lacks --method"


def _plans() -> dict[str, Any]:
    return {
        "profile": dpfreq.plan_profile(domain_size=1000, max_count=20, epsilon=1.0,
                                       unit="item", method="auto"),
        "anonymized": dpfreq.plan_anonymized(n_range=(1000, 10_000), epsilon=1.0),
        "windows": dpfreq.plan_window_counts(horizon=16, epsilon=1.0, unit="item",
                                             k_values=[1], windows=["cumulative"]),
        "longitudinal": dpfreq.plan_longitudinal(horizon=16, max_changes=2, epsilon=1.0,
                                                 method="auto", devices=10_000),
    }


def test_epsilon_for_has_one_signature() -> None:
    for system, plan in _plans().items():
        params = list(inspect.signature(plan.epsilon_for).parameters.values())
        assert params[0].name == "target", system
        assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, system
        assert all(p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
                   for p in params[1:]), system
        with pytest.raises(ParameterError, match="target of"):
            plan.epsilon_for(-1.0)


def test_epsilon_for_meets_its_target_on_every_plan() -> None:
    plans = _plans()
    prof = plans["profile"]
    eps = prof.epsilon_for(prof.measure("l1_bound") / 2)
    assert eps > prof.epsilon
    assert dpfreq.plan_profile(domain_size=1000, max_count=20, epsilon=eps, unit="item",
                               method="auto").measure("l1_bound") <= prof.measure("l1_bound") / 2
    anon = plans["anonymized"]
    target = anon.predicted_l1[1] / 2
    eps = anon.epsilon_for(target, measure="l1_bound")
    assert dpfreq.plan_anonymized(n_range=(1000, 10_000), epsilon=eps).predicted_l1[1] <= target
    win = plans["windows"]
    target = win.max_halfwidth["cumulative"][1] / 2
    eps = win.epsilon_for(target, family="cumulative", k=1)
    assert dpfreq.plan_window_counts(horizon=16, epsilon=eps, unit="item", k_values=[1],
                                     windows=["cumulative"]
                                     ).max_halfwidth["cumulative"][1] <= target


def test_longitudinal_epsilon_for_is_the_smallest_on_three_digits() -> None:
    plan = _plans()["longitudinal"]
    for measure in ("half_width", "band_half_width"):
        target = plan.measure(measure) / 2
        eps = plan.epsilon_for(target, measure=measure)

        def at(e: float, m: str = measure) -> float:
            return dpfreq.plan_longitudinal(horizon=16, max_changes=2, epsilon=e,
                                            method="auto", devices=10_000).measure(m)

        assert at(eps) <= target < at(eps * 0.99)
    with pytest.raises(ParameterError, match="measure of"):
        plan.epsilon_for(1.0, measure="l1_bound")
    with pytest.raises(ParameterError, match="reachable"):
        plan.epsilon_for(1.0)  # below the floor of the bound at 10,000 devices


@pytest.mark.parametrize(("method", "per_order", "confidence"), [
    ("auto", False, 0.95), ("rr", True, 0.9), ("erlingsson", False, 0.8),
    ("futurerand", False, 0.99)])
def test_plan_longitudinal_predicts_the_estimates_error_statement(
        method: str, per_order: bool, confidence: float) -> None:
    kw: dict[str, Any] = {"horizon": 21, "max_changes": 3, "epsilon": 1.5, "method": method,
                          "confidence": confidence, "per_order_sparsity": per_order}
    plan = dpfreq.plan_longitudinal(devices=3000, **kw)
    rel = dpfreq.simulate_longitudinal(devices=3000, rng=5, **kw)
    np.testing.assert_array_equal(plan.halfwidth, rel.error.value)
    np.testing.assert_array_equal(plan.sd, rel.sd)
    band = rel.unclamped + plan.band_halfwidth
    np.testing.assert_array_equal(np.clip(band, 0, 3000), rel.error.band_upper)
    assert plan.method == rel.mechanism_params["method"]
    assert plan.c_gap == rel.mechanism_params["c_gap"]
    assert (plan.unit, plan.epsilon) == (rel.unit, rel.epsilon)
    assert plan.to_dict()["halfwidth"] == plan.halfwidth.tolist()
    assert plan.lines()[0].startswith("longitudinal: 3000 devices")


def test_plan_longitudinal_refuses_bad_parameters() -> None:
    base: dict[str, Any] = {"horizon": 8, "max_changes": 2, "epsilon": 1.0, "method": "auto",
                            "devices": 100}
    for over, word in (({"devices": 0}, "devices of plan_longitudinal"),
                       ({"confidence": 1.5}, "confidence of plan_longitudinal"),
                       ({"method": "fast"}, "method of plan_longitudinal"),
                       ({"epsilon": -1.0}, "epsilon of plan_longitudinal")):
        with pytest.raises(ParameterError, match=word):
            dpfreq.plan_longitudinal(**{**base, **over})


def test_plan_longitudinal_on_the_command_line() -> None:
    from click.testing import CliRunner

    args = ["plan", "longitudinal", "--horizon", "16", "--max-changes", "2", "--epsilon", "1",
            "--method", "auto", "--devices", "10000"]
    plan = _plans()["longitudinal"]
    target = plan.max_halfwidth / 2
    res = CliRunner().invoke(cli, [*args, "--target-half-width", str(target), "--json", "-"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["halfwidth"] == plan.halfwidth.tolist()
    assert doc["epsilon_for_target"]["epsilon"] == plan.epsilon_for(target)
    res = CliRunner().invoke(cli, [*args, "--target-half-width", "1"])
    assert res.exit_code == 0
    assert "not reachable" in res.output
