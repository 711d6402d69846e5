"""Hypothesis fuzz of report batches and headers: every answer is a 4xx with a one-line JSON
error (never a 5xx) and nothing is stored."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import bearer, create_study, enrol, make_client, stored

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False), st.text(max_size=20))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
FIELDS = ("device", "order", "interval", "bit", "param_id")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with make_client(str(tmp_path_factory.mktemp("fuzz") / "fuzz.db")) as c:
        params = create_study(c)
        device, token = enrol(c, params, 1)
        yield c, params, device, token


def _report(device, params):
    good = {"device": device, "order": 1, "interval": 1, "bit": 1, "param_id": params.param_id}
    broken = st.fixed_dictionaries({}, optional=dict.fromkeys((*FIELDS, "x"), JSON_VALUES))
    mutated = st.builds(lambda k, v: {**good, k: v}, st.sampled_from(FIELDS), JSON_VALUES)
    wrong_slot = st.builds(lambda j, h: {**good, "interval": j, "order": h},
                           st.integers(-5, 100), st.integers(-2, 8))
    return st.one_of(broken, mutated, wrong_slot, JSON_VALUES)


def _is_valid(rep, device, params):
    return (isinstance(rep, dict) and set(rep) == set(FIELDS)
            and all(type(rep[k]) is int for k in FIELDS[:4]) and rep["device"] == device
            and rep["order"] == 1 and 1 <= rep["interval"] <= params.padded_horizon // 2
            and rep["bit"] in (0, 1) and rep["param_id"] == params.param_id)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_batches_and_headers_are_refused_with_nothing_stored(app, data):
    c, params, device, token = app
    kind = data.draw(st.sampled_from(["batch", "body", "header"]))
    headers = bearer(token)
    if kind == "batch":
        reps = data.draw(st.lists(_report(device, params), min_size=0, max_size=6))
        if reps and all(_is_valid(r, device, params) for r in reps):
            reps.append({"device": device, "order": 1, "interval": 0, "bit": 1,
                         "param_id": params.param_id})  # keep the batch invalid
        body = json.dumps({"reports": reps}).encode()
    elif kind == "body":
        body = data.draw(st.one_of(st.binary(max_size=64), JSON_VALUES.map(
            lambda v: json.dumps(v).encode())))
    else:
        good = {"device": device, "order": 1, "interval": 1, "bit": 1,
                "param_id": params.param_id}
        body = json.dumps({"reports": [good]}).encode()
        auth = data.draw(st.one_of(
            st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=80),
            st.just("Bearer "), st.just(f"Basic {token}"), st.just(f"Bearer {token}x")))
        headers = {"Authorization": auth}
    headers["Content-Type"] = data.draw(st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded"]))
    r = c.post("/v1/studies/s1/reports", content=body, headers=headers)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()
    assert list(err) == ["error"]
    assert "\n" not in err["error"]
    assert stored(c) == (0, 0)
