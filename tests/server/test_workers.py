"""``dpfreq serve --workers N``: several processes on one port, the rate limits divided among
them (whichever process a request reaches, one device never gets more than the limit), and
settings from a ``--config`` TOML file (command line > DPFREQ_* variables > file)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from conftest import ADMIN, START, Served
from dpfreq.cli.serve import command


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(entry.name))
    return out


def test_workers_share_the_rate_limit(sqlite_url, tmp_path):
    rate, burst, workers = 2.0, 6, 2
    srv = Served(sqlite_url, tmp_path / "serve.log",
                 args=("--workers", str(workers), "--rate", str(rate), "--burst", str(burst)))
    srv.start()
    try:
        assert srv.proc is not None
        auth = {"Authorization": f"Bearer {ADMIN}"}
        r = httpx.post(srv.url + "/v1/studies", headers=auth, json={
            "study": "w", "horizon": 8, "max_changes": 1, "epsilon": 1.0, "method": "auto",
            "start": START, "period": "1d", "min_devices": 1, "enrolment": "open"})
        assert r.status_code == 201, r.text
        params_id = r.json()["param_id"]
        r = httpx.post(srv.url + "/v1/studies/w/devices", json={"param_id": params_id,
                                                                "order": 0})
        assert r.status_code == 201, r.text
        device, token = r.json()["device"], r.json()["token"]
        body = {"reports": [{"device": device, "order": 0, "interval": 1, "bit": 1,
                             "param_id": params_id}]}
        ok = refused = 0
        # a new connection per request, so that the kernel hands them to both processes
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as http:
            t0 = time.monotonic()
            for _ in range(60):
                r = http.post(srv.url + "/v1/studies/w/reports", json=body,
                              headers={"Authorization": f"Bearer {token}"})
                assert r.status_code in (200, 429), r.text
                ok += r.status_code == 200
                refused += r.status_code == 429
            elapsed = time.monotonic() - t0
        # every process allows burst/N at once and rate/N per second: in total at most
        # burst + rate·t, whichever process each request reached
        assert ok <= burst + rate * elapsed
        assert ok >= burst // workers
        assert refused > 0
        assert len(_children(srv.proc.pid)) >= workers
        # /metrics sums the workers' counters, whichever worker a scrape reaches
        route = 'route="/v1/studies/{study}/reports"'
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as http:
            for _ in range(6):
                text = http.get(srv.url + "/metrics").text
                assert f'dpfreq_http_requests_total{{{route},status="200"}} {ok}.0' in text
                assert f'dpfreq_http_requests_total{{{route},status="429"}} {refused}.0' in text
                assert f"dpfreq_reports_stored_total {min(ok, 1)}.0" in text
                assert "process_cpu_seconds_total" not in text
    finally:
        srv.stop()


def test_workers_need_a_burst_per_process(sqlite_url):
    res = CliRunner().invoke(command, ["--db", sqlite_url, "--workers", "3", "--burst", "2"])
    assert res.exit_code == 2
    assert "--burst must be at least --workers (3)" in res.output


class _Captured(Exception):
    pass


@pytest.fixture
def captured(monkeypatch):
    """Stop ``dpfreq serve`` once it has built its settings; they are returned in a dict."""
    import dpfreq.server

    got: dict = {}

    def capture(**kwargs):
        got.update(kwargs)
        raise _Captured

    monkeypatch.setattr(dpfreq.server, "ServerConfig", capture)
    for name in [k for k in os.environ if k.startswith("DPFREQ_")]:
        monkeypatch.delenv(name)
    return got


def test_config_file_settings_and_precedence(tmp_path, captured, monkeypatch):
    cfg = tmp_path / "serve.toml"
    cfg.write_text('db = "from-file.db"\nrate = 5.0\nburst = 7\nenrol_rate = 0.5\n'
                   'cors_origins = ["https://a.example"]\nread_cache_seconds = 2.0\n')
    monkeypatch.setenv("DPFREQ_RATE", "9")
    res = CliRunner().invoke(command, ["--config", str(cfg), "--burst", "11"])
    assert isinstance(res.exception, _Captured), res.output
    assert captured["db"] == "from-file.db"  # file
    assert captured["rate"] == 9.0  # the environment beats the file
    assert captured["burst"] == 11  # the command line beats both
    assert captured["enrol_rate"] == 0.5
    assert captured["cors_origins"] == ("https://a.example",)
    assert captured["read_cache_seconds"] == 2.0


def test_config_file_errors_are_one_line(tmp_path, captured):
    cfg = tmp_path / "serve.toml"
    cfg.write_text('dbb = "x"\n')
    res = CliRunner().invoke(command, ["--config", str(cfg)])
    assert res.exit_code == 2
    assert "unknown setting 'dbb'" in res.output
    cfg.write_text("db = \n")
    res = CliRunner().invoke(command, ["--config", str(cfg)])
    assert res.exit_code == 2
    assert "is not valid TOML" in res.output
    cfg.write_text('db = "postgresql://u:secret@localhost/d"\n')
    cfg.chmod(0o644)
    res = CliRunner().invoke(command, ["--config", str(cfg)])
    assert res.exit_code == 2
    assert "chmod 600" in res.output
    assert "secret" not in res.output


def test_a_password_on_the_command_line_is_refused(captured):
    res = CliRunner().invoke(command, ["--db", "postgresql://u:secret@localhost/d"])
    assert res.exit_code == 2
    assert "must not carry the database password" in res.output
    assert "secret" not in res.output
    res = CliRunner().invoke(command, ["migrate", "--db", "postgresql://u:secret@localhost/d"])
    assert res.exit_code == 2


def test_a_revocation_reaches_another_process_within_seconds(sqlite_url):
    from conftest import admin, bearer, create_study, make_client

    with make_client(sqlite_url) as a, make_client(sqlite_url, admin_token=None) as b:
        create_study(a)
        token = a.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()
        assert b.get("/v1/studies/s1/summary", headers=bearer(token["token"])).status_code == 200
        time.sleep(1.5)  # b now trusts its cached token on its revocation-log reads
        assert b.get("/v1/studies/s1/summary", headers=bearer(token["token"])).status_code == 200
        assert a.delete(f"/v1/tokens/{token['id']}", headers=admin()).status_code == 200
        deadline = time.monotonic() + 5
        while b.get("/v1/studies/s1/summary",
                    headers=bearer(token["token"])).status_code == 200:
            assert time.monotonic() < deadline, "the revocation did not reach the other app"
            time.sleep(0.1)
        assert b.get("/v1/studies/s1/summary", headers=bearer(token["token"])).status_code == 401
