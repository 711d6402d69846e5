"""CORS (``--cors-origin``): every response of every route carries the policy, the upload fast
path, bodies over the limit and errors included; preflights are answered; other origins get
nothing (the browser end to end across origins is tests/clients/test_browser_e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from conftest import ADMIN, admin, bearer, create_study, enrol, make_client
from dpfreq.server import ServerConfig, create_app

APP = "http://app.test:8766"
OTHER = "http://evil.test"


@pytest.fixture
def cors(sqlite_url: str) -> Iterator[TestClient]:
    with make_client(sqlite_url, cors_origins=(APP,), max_body_bytes=4096) as c:
        yield c


def _requests(c: TestClient) -> list[tuple[str, str, dict, object, int]]:
    """(method, path, headers, json body, expected status) over every kind of route and
    answer: the upload fast path (stored, refused, malformed, too large), FastAPI's routes
    (answers, HTTP errors, validation errors, unknown routes), the body limit in front of
    them, the dashboard, static files, operations."""
    params = create_study(c, min_devices=1)
    device, token = enrol(c, params, 0)
    rep = {"device": device, "order": 0, "interval": 1, "bit": 1, "param_id": params.param_id}
    analyst = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    reports = "/v1/studies/s1/reports"
    big = {"reports": [rep] * 200}  # over max_body_bytes
    return [
        ("POST", reports, bearer(token), {"reports": [rep]}, 200),
        ("POST", reports, bearer(token), {"reports": [rep]}, 200),  # an identical retry
        ("POST", reports, bearer(token), {"reports": [{**rep, "bit": 0}]}, 409),
        ("POST", reports, {}, {"reports": [rep]}, 401),
        ("POST", reports, bearer(token), {"reports": [{**rep, "bit": 2}]}, 422),
        ("POST", reports, bearer(token), big, 413),
        ("POST", "/v1/studies/nope/reports", bearer(token), {"reports": [rep]}, 404),
        ("GET", reports, bearer(token), None, 200),
        ("POST", "/v1/studies/s1/devices", c.enrol_secrets and bearer(c.enrol_secrets["s1"]),
         {"param_id": params.param_id, "order": 0}, 201),
        ("POST", "/v1/studies/s1/devices", {}, {"param_id": params.param_id, "order": 0}, 401),
        ("GET", "/v1/studies/s1", {}, None, 200),
        ("GET", "/v1/studies/nope", {}, None, 404),
        ("GET", "/v1/studies/s1/summary", bearer(analyst), None, 200),
        ("GET", "/v1/studies/s1/summary", bearer("wrong"), None, 401),
        ("GET", "/v1/studies/s1/estimates?confidence=2", bearer(analyst), None, 422),
        ("POST", "/v1/studies", admin(), big, 413),
        ("GET", "/no/such/route", {}, None, 404),
        ("GET", "/studies/s1/dashboard", {}, None, 200),
        ("GET", "/static/dashboard.js", {}, None, 200),
        ("GET", "/readyz", {}, None, 200),
        ("GET", "/metrics", {}, None, 200),
    ]


def test_every_response_of_every_route_carries_the_cors_policy(cors):
    for method, path, headers, body, status in _requests(cors):
        r = cors.request(method, path, headers={**headers, "Origin": APP}, json=body)
        assert r.status_code == status, (method, path, r.text)
        assert r.headers.get("access-control-allow-origin") == APP, (method, path, status)
        assert "Retry-After" in r.headers["access-control-expose-headers"]
        assert "Origin" in r.headers.get_list("vary")


def test_an_internal_error_carries_the_cors_policy(sqlite_url, monkeypatch):
    app = create_app(ServerConfig(db=sqlite_url, admin_token=ADMIN, cors_origins=(APP,)))
    with TestClient(app, raise_server_exceptions=False) as c:
        monkeypatch.setattr(c.app.state.service, "list_studies",
                            lambda: (_ for _ in ()).throw(RuntimeError("boom")))
        r = c.get("/v1/studies", headers={**admin(), "Origin": APP})
    assert r.status_code == 500
    assert r.json() == {"error": "internal error"}
    assert r.headers.get("access-control-allow-origin") == APP


def test_a_rate_limited_upload_exposes_its_retry_after(sqlite_url):
    with make_client(sqlite_url, cors_origins=(APP,), rate=0.001, burst=1) as c:
        params = create_study(c)
        device, token = enrol(c, params, 0)
        rep = {"device": device, "order": 0, "interval": 1, "bit": 1,
               "param_id": params.param_id}
        headers = {**bearer(token), "Origin": APP}
        assert c.post("/v1/studies/s1/reports", json={"reports": [rep]},
                      headers=headers).status_code == 200
        r = c.post("/v1/studies/s1/reports", json={"reports": [rep]}, headers=headers)
    assert r.status_code == 429
    assert r.headers["access-control-allow-origin"] == APP
    assert int(r.headers["retry-after"]) >= 1
    assert "Retry-After" in r.headers["access-control-expose-headers"]


def test_preflights_are_answered_for_the_allowed_origin_only(cors):
    create_study(cors)
    for path in ("/v1/studies/s1/reports", "/v1/studies/s1/devices", "/v1/tokens/0123"):
        r = cors.options(path, headers={"Origin": APP, "Access-Control-Request-Method": "POST",
                                        "Access-Control-Request-Headers":
                                            "authorization,content-type"})
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == APP
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "Authorization" in r.headers["access-control-allow-headers"]
        r = cors.options(path, headers={"Origin": OTHER, "Access-Control-Request-Method": "POST"})
        assert r.status_code == 403
        assert "access-control-allow-origin" not in r.headers


def test_other_origins_and_a_service_without_cors_get_no_cors_headers(sqlite_url):
    with make_client(sqlite_url, cors_origins=(APP,)) as c:
        create_study(c)
        r = c.get("/v1/studies/s1", headers={"Origin": OTHER})
        assert r.status_code == 200
        assert "access-control-allow-origin" not in r.headers
    with make_client(sqlite_url) as plain:
        r = plain.get("/v1/studies/s1", headers={"Origin": APP})
        assert r.status_code == 200
        assert "access-control-allow-origin" not in r.headers
        assert "vary" not in r.headers
