"""The collection service end to end in-process: studies, enrolment, idempotent batches,
refusals, estimates equal to the in-process aggregator, exports, roles and limits."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from conftest import (
    START,
    admin,
    bearer,
    create_study,
    enrol,
    enrol_headers,
    make_client,
    run_devices,
    stored,
)
from dpfreq.longitudinal import LongitudinalAggregator, ProtocolParams, device_bundle
from dpfreq.server import storage


def _aggregator_estimate(params, devices, confidence):
    agg = LongitudinalAggregator(params)
    agg.enrol(np.array([d for d, _, _ in devices]), np.array([h for _, h, _ in devices]))
    for _, _, reps in devices:
        agg.ingest_reports(reps)
    return agg.estimate(confidence=confidence)


def test_estimates_equal_the_aggregator(client, rng):
    params = create_study(client, min_devices=5)
    devices = run_devices(client, params, rng, 4)
    an = client.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    r = client.get("/v1/studies/s1/estimates", headers=bearer(an))
    assert r.status_code == 403
    assert "at least 5 devices have reported" in r.json()["error"]
    devices += run_devices(client, params, rng, 3)
    r = client.get("/v1/studies/s1/estimates?confidence=0.9", headers=bearer(an))
    assert r.status_code == 200, r.text
    body = r.json()
    ref = _aggregator_estimate(params, devices, 0.9)
    cols = body["columns"]
    for name in ("estimate", "lower", "upper", "band_lower", "band_upper", "sd"):
        np.testing.assert_allclose(cols[name], np.asarray(ref.table()[name], dtype=float),
                                   rtol=0, atol=1e-9)
    np.testing.assert_allclose(cols["unclamped"], ref.unclamped, rtol=0, atol=1e-9)
    assert body["devices"] == 7
    assert body["unit"] == "device"
    assert body["epsilon"] == params.epsilon
    assert cols["date"][:2] == ["2020-01-01", "2020-01-02"]


@pytest.mark.parametrize("method", ["auto", "erlingsson"])
def test_study_answers_with_the_device_bundle(sqlite_client, method):
    """A device of another language reads the exact laws it samples from the study itself."""
    params = create_study(sqlite_client, method=method)
    body = sqlite_client.get("/v1/studies/s1").json()
    assert body["bundle"] == device_bundle(params)
    assert body["bundle"]["param_id"] == params.param_id
    assert (body["bundle"]["gamma"] is None) == (method != "erlingsson")


def test_identical_retry_succeeds_and_conflict_is_409(client):
    params = create_study(client)
    device, token = enrol(client, params, 1)
    reps = [{"device": device, "order": 1, "interval": j, "bit": j % 2,
             "param_id": params.param_id} for j in (1, 2, 3)]
    first = client.post("/v1/studies/s1/reports", json={"reports": reps}, headers=bearer(token))
    again = client.post("/v1/studies/s1/reports", json={"reports": reps}, headers=bearer(token))
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() == {"stored": 3}
    assert stored(client) == (3, 3)
    # a batch with a new slot and one conflicting slot: 409, the new one is not stored either
    bad = [{**reps[0], "bit": 1 - reps[0]["bit"]}, {**reps[0], "interval": 4}]
    r = client.post("/v1/studies/s1/reports", json={"reports": bad}, headers=bearer(token))
    assert r.status_code == 409
    assert list(r.json()) == ["error"]
    assert "\n" not in r.json()["error"]
    assert stored(client) == (3, 3)
    # a partial overlap with identical bits stores only the new slot
    more = [*reps, {**reps[0], "interval": 4}]
    r = client.post("/v1/studies/s1/reports", json={"reports": more}, headers=bearer(token))
    assert r.status_code == 200
    assert stored(client) == (4, 4)


@pytest.mark.parametrize(("change", "status", "reason"), [
    ({"param_id": "0" * 16}, 400, "param_id"),
    ({"order": 2}, 400, "order"),
    ({"interval": 33}, 400, "interval"),
    ({"device": 12345}, 403, "wrong_device"),
    ({"bit": 2}, 422, "malformed"),
    ({"bit": True}, 422, "malformed"),
    ({"interval": "1"}, 422, "malformed"),
    ({"interval": 0}, 422, "malformed"),
    ({"extra": 1}, 422, "malformed"),
])
def test_bad_reports_are_refused_and_nothing_is_stored(sqlite_client, change, status, reason):
    c = sqlite_client
    params = create_study(c)
    device, token = enrol(c, params, 1)
    good = {"device": device, "order": 1, "interval": 1, "bit": 1, "param_id": params.param_id}
    r = c.post("/v1/studies/s1/reports", json={"reports": [good, {**good, "interval": 2,
                                                                      **change}]},
               headers=bearer(token))
    assert r.status_code == status, r.text
    assert list(r.json()) == ["error"]
    assert "\n" not in r.json()["error"]
    assert stored(c) == (0, 0)
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    summary = c.get("/v1/studies/s1/summary", headers=bearer(an)).json()
    assert summary["rejections"][reason] >= 1


def test_future_period_is_refused(sqlite_client):
    c = sqlite_client
    from datetime import UTC, datetime, timedelta

    start = (datetime.now(UTC) - timedelta(days=2, hours=1)).isoformat(timespec="seconds")
    params = create_study(c, start=start)
    device, token = enrol(c, params, 0)
    rep = {"device": device, "order": 0, "interval": 3, "bit": 1, "param_id": params.param_id}
    assert c.post("/v1/studies/s1/reports", json={"reports": [rep]},
                  headers=bearer(token)).status_code == 200  # period 3 is running
    r = c.post("/v1/studies/s1/reports", json={"reports": [{**rep, "interval": 4}]},
               headers=bearer(token))
    assert r.status_code == 400
    assert "not started" in r.json()["error"]
    assert stored(c) == (1, 1)
    # horizon 3 is padded to 4: the padding reports are due once the last period has started
    p3 = create_study(c, study="short", start=start, horizon=3)
    device, token = enrol(c, p3, 2, study="short")
    rep = {"device": device, "order": 2, "interval": 1, "bit": 0, "param_id": p3.param_id}
    assert c.post("/v1/studies/short/reports", json={"reports": [rep]},
                  headers=bearer(token)).status_code == 200


def test_roles_and_hashed_tokens(client):
    params = create_study(client)
    client.post("/v1/studies", json={"study": "other", "horizon": 8, "max_changes": 1,
                                     "epsilon": 1.0, "method": "rr", "start": START,
                                     "period": "1d", "min_devices": 1}, headers=admin())
    device, token = enrol(client, params, 0)
    an = client.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    assert client.get("/v1/studies/s1/estimates").status_code == 401
    assert client.get("/v1/studies/s1/estimates", headers=bearer("nope")).status_code == 401
    assert client.get("/v1/studies/s1/estimates", headers=bearer(token)).status_code == 403
    assert client.get("/v1/studies/other/summary", headers=bearer(an)).status_code == 403
    assert client.post("/v1/studies", json={}, headers=bearer(an)).status_code in (403, 422)
    rep = {"device": device, "order": 0, "interval": 1, "bit": 1, "param_id": params.param_id}
    assert client.post("/v1/studies/other/reports", json={"reports": [rep]},
                       headers=bearer(token)).status_code == 403
    assert client.post("/v1/studies/s1/reports", json={"reports": [rep]},
                       headers=bearer(an)).status_code == 403
    with client.app.state.service.engine.connect() as conn:
        hashes = [r[0] for r in conn.execute(sa.select(storage.tokens.c.hash))]
    assert len(hashes) == 3  # admin, device, analyst
    assert all(len(h) == 64 and h not in (token, an) for h in hashes)


def test_exports_agree(sqlite_client, rng):
    import pyarrow.parquet as pq

    c = sqlite_client
    params = create_study(c, min_devices=2)
    run_devices(c, params, rng, 3)
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    js = c.get("/v1/studies/s1/estimates?format=json", headers=bearer(an)).json()["columns"]
    csv_text = c.get("/v1/studies/s1/estimates?format=csv", headers=bearer(an)).text
    pq_table = pq.read_table(io.BytesIO(
        c.get("/v1/studies/s1/estimates?format=parquet", headers=bearer(an)).content))
    rows = csv_text.strip().split("\n")
    assert rows[0] == "period,date,estimate,lower,upper,band_lower,band_upper,sd,unclamped"
    assert len(rows) == 65
    assert [float(r.split(",")[2]) for r in rows[1:]] == js["estimate"]
    assert pq_table.column("estimate").to_pylist() == js["estimate"]
    assert c.get("/v1/studies/s1/estimates?format=xml", headers=bearer(an)).status_code == 422


def test_protocol_version_1_is_refused_at_enrolment_and_upload(sqlite_client):
    """A device of protocol version 1 is told with 400 that the version supported is 2: at
    enrolment by its ``protocol_version``, at upload by its ``param_id`` (a hash of the
    parameters, their version included)."""
    import dataclasses
    import hashlib
    import json

    c = sqlite_client
    params = create_study(c)
    assert params.version == 2
    url, headers = "/v1/studies/s1/devices", enrol_headers(c, "s1")
    r = c.post(url, json={"param_id": params.param_id, "order": 0, "protocol_version": 1},
               headers=headers)
    assert r.status_code == 400
    assert r.json()["error"] == ("protocol_version must be 2, the supported protocol version "
                                 "(the device's client is outdated: update it); got 1.")
    r = c.post(url, json={"param_id": params.param_id, "order": 0, "protocol_version": 2},
               headers=headers)
    assert r.status_code == 201, r.text
    device, token = r.json()["device"], r.json()["token"]
    old = {**dataclasses.asdict(params), "version": 1}
    old_id = hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]
    assert old_id != params.param_id
    rep = {"device": device, "order": 0, "interval": 1, "bit": 1, "param_id": old_id}
    r = c.post("/v1/studies/s1/reports", json={"reports": [rep]}, headers=bearer(token))
    assert r.status_code == 400
    assert "param_id does not match" in r.json()["error"]
    spec = c.get("/openapi.json").json()
    field = spec["components"]["schemas"]["EnrolRequest"]["properties"]["protocol_version"]
    assert field["description"].startswith("The protocol version the device runs: 2 ")


def test_upload_answers_carry_request_ids_limits_and_metrics(sqlite_url):
    with make_client(sqlite_url, max_body_bytes=4096) as c:
        params = create_study(c)
        device, token = enrol(c, params, 0)
        rep = {"device": device, "order": 0, "interval": 1, "bit": 1,
               "param_id": params.param_id}
        r = c.post("/v1/studies/s1/reports", json={"reports": [rep]},
                   headers={**bearer(token), "X-Request-Id": "up-1"})
        assert (r.status_code, r.json(), r.headers["x-request-id"]) == (200, {"stored": 1}, "up-1")
        body = json.dumps({"reports": [rep] * 200}).encode()

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while streaming
            yield from (body[i:i + 1000] for i in range(0, len(body), 1000))

        r = c.post("/v1/studies/s1/reports", content=chunks(),
                   headers={**bearer(token), "Content-Type": "application/json"})
        assert r.status_code == 413
        assert "larger than 4096" in r.json()["error"]
        assert len(r.headers["x-request-id"]) == 16
        r = c.post("/v1/studies/s1/reports", content=body, headers={"Content-Type": "x"})
        assert r.status_code == 413  # from Content-Length, before the token
        text = c.get("/metrics").text
        route = 'route="/v1/studies/{study}/reports"'
        assert f'dpfreq_http_requests_total{{{route},status="200"}} 1.0' in text
        assert f'dpfreq_http_requests_total{{{route},status="413"}} 2.0' in text


def test_limits_cors_health_metrics_openapi(sqlite_url):
    with make_client(sqlite_url, rate=1.0, burst=2, max_body_bytes=4096) as c:
        params = create_study(c)
        device, token = enrol(c, params, 0)
        rep = {"device": device, "order": 0, "interval": 1, "bit": 1,
               "param_id": params.param_id}
        codes = [c.post("/v1/studies/s1/reports", json={"reports": [rep]},
                        headers=bearer(token)).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        big = {"reports": [rep] * 200}
        r = c.post("/v1/studies/s1/reports", json=big, headers=bearer(token))
        assert r.status_code == 413
        assert "larger than 4096" in r.json()["error"]
        r = c.get("/readyz", headers={"Origin": "https://evil.example"})
        assert r.json() == {"status": "ok"}
        assert "access-control-allow-origin" not in r.headers
        text = c.get("/metrics").text
        assert "dpfreq_reports_stored_total 1.0" in text
        assert 'dpfreq_reports_rejected_total{reason="rate_limited"} 1.0' in text
        spec = c.get("/openapi.json").json()
        assert "/v1/studies/{study}/reports" in spec["paths"]
        study = spec["components"]["schemas"]["StudyCreate"]
        assert "method" in study["required"]
        assert "randomizer" not in study["properties"]
        assert c.get("/v1/studies/s1").json()["method"] == params.method
    with make_client(sqlite_url, cors_origins=("https://ok.example",)) as c:
        r = c.get("/readyz", headers={"Origin": "https://ok.example"})
        assert r.headers["access-control-allow-origin"] == "https://ok.example"


def test_study_creation_is_validated(sqlite_client):
    c = sqlite_client
    create_study(c)
    r = c.post("/v1/studies", json={"study": "s1", "horizon": 8, "max_changes": 1,
                                    "epsilon": 1.0, "method": "rr", "start": START,
                                    "period": "1d", "min_devices": 1}, headers=admin())
    assert r.status_code == 409
    r = c.post("/v1/studies", json={"study": "s2", "horizon": 8, "max_changes": 1,
                                    "epsilon": -1.0, "method": "rr", "start": START,
                                    "period": "1d", "min_devices": 1}, headers=admin())
    assert r.status_code == 422  # the bounds of epsilon are in the schema
    assert "epsilon" in r.json()["error"]
    r = c.post("/v1/studies", json={"study": "s2", "horizon": 8, "max_changes": 1,
                                    "epsilon": 1.0, "method": "rr", "start": "2020-02-31",
                                    "period": "1d", "min_devices": 1}, headers=admin())
    assert r.status_code == 400  # a rule the schema cannot state
    assert "start" in r.json()["error"]
    assert c.get("/v1/studies/nope").status_code == 404
    info = c.get("/v1/studies/s1").json()
    assert ProtocolParams.from_json(info["params"]).param_id == info["param_id"]
    for bad in ({"period": "1 fortnight"}, {"start": "yesterday"}, {"horizon": 0},
                {"method": "magic"}, {"randomizer": "rr"}):
        body = {"study": "s3", "horizon": 8, "max_changes": 1, "epsilon": 1.0,
                "method": "rr", "start": START, "period": "1d", "min_devices": 1, **bad}
        r = c.post("/v1/studies", json=body, headers=admin())
        assert r.status_code in (400, 422), r.text
        assert list(r.json()) == ["error"]
    assert c.get("/v1/studies/s3").status_code == 404


def _study_body(**over):
    body = {"study": "s9", "horizon": 8, "max_changes": 1, "epsilon": 1.0, "method": "rr",
            "start": START, "period": "1d", "min_devices": 1}
    return {**body, **over}


@pytest.mark.parametrize(("over", "status", "message"), [
    ({"max_changes": 9}, 400, "max_changes of the study must be at most its horizon (8): one "
                              "change per period at most; got 9."),
    ({"epsilon": "1.0"}, 422, "invalid request: epsilon: Input should be a valid number"),
    ({"horizon": "8"}, 422, "invalid request: horizon: Input should be a valid integer"),
    ({"min_devices": 1.5}, 422, "invalid request: min_devices: Input should be a valid integer"),
    ({"per_order_sparsity": "true"}, 422, "invalid request: per_order_sparsity: Input should "
                                          "be a valid boolean"),
    ({"start": "2020-02-31"}, 400, "start of the study must be an ISO date (midnight UTC) or "
                                   "timestamp (UTC unless it has an offset); got '2020-02-31'."),
    ({"start": "soon"}, 400, "start of the study must be an ISO date"),
    ({"closes_at": "never"}, 400, "closes_at of the study must be an ISO date"),
])
def test_study_creation_is_strict_like_a_report(sqlite_client, over, status, message):
    """No coercion, a change budget within the horizon, and every refusal naming the study's
    field (never the library's function)."""
    r = sqlite_client.post("/v1/studies", json=_study_body(**over), headers=admin())
    assert r.status_code == status, r.text
    assert r.json()["error"].startswith(message)
    assert "make_params" not in r.text
    assert sqlite_client.get("/v1/studies/s9").status_code == 404


def test_integral_numbers_are_integers_and_k_may_equal_the_horizon(sqlite_client):
    r = sqlite_client.post("/v1/studies", json=_study_body(horizon=8.0, max_changes=8,
                                                           epsilon=1), headers=admin())
    assert r.status_code == 201, r.text
    assert (r.json()["horizon"], r.json()["max_changes"]) == (8, 8)


def test_a_token_on_an_unknown_study_says_no_such_study(sqlite_client):
    c = sqlite_client
    params = create_study(c)
    device, token = enrol(c, params, 0)
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    rep = {"device": device, "order": 0, "interval": 1, "bit": 1, "param_id": params.param_id}
    for method, path, who in (("POST", "/v1/studies/nope/reports", token),
                              ("GET", "/v1/studies/nope/reports", token),
                              ("GET", "/v1/studies/nope/summary", an)):
        r = c.request(method, path, json={"reports": [rep]} if method == "POST" else None,
                      headers=bearer(who))
        assert (r.status_code, r.json()) == (404, {"error": "no such study."}), path
    create_study(c, "s2")
    r = c.post("/v1/studies/s2/reports", json={"reports": [rep]}, headers=bearer(token))
    assert (r.status_code, r.json()["error"]) == (403, "this token belongs to another study.")


def test_a_device_reads_its_stored_slots(sqlite_client):
    c = sqlite_client
    params = create_study(c)
    device, token = enrol(c, params, 0)
    other, _ = enrol(c, params, 0)
    reps = [{"device": device, "order": 0, "interval": j, "bit": j % 2,
             "param_id": params.param_id} for j in (3, 1, 2)]
    assert c.get("/v1/studies/s1/reports", headers=bearer(token)).json() == {
        "device": device, "slots": []}
    for batch in (reps[:1], reps[1:]):
        assert c.post("/v1/studies/s1/reports", json={"reports": batch},
                      headers=bearer(token)).status_code == 200
    r = c.get("/v1/studies/s1/reports", headers=bearer(token))
    assert r.json() == {"device": device, "slots": [[1, 1], [2, 0], [3, 1]]}
    assert other != device
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    assert c.get("/v1/studies/s1/reports", headers=bearer(an)).status_code == 403
    assert c.get("/v1/studies/s1/reports").status_code == 401
