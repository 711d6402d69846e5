"""Operations: migrations, JSON logs, the admin token file, the load-generator command and a
graceful shutdown that finishes the batches in flight."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from conftest import ADMIN, START, LiveServer, Served
from dpfreq.cli.serve import read_admin_token
from dpfreq.server import storage
from dpfreq.server.observe import JsonFormatter


def test_migrations_are_idempotent(sqlite_url):
    engine = storage.make_engine(sqlite_url)
    storage.upgrade(engine)
    storage.upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
            ("0008",)]
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
        assert conn.execute(sa.text("PRAGMA synchronous")).scalar_one() == 2  # FULL
    assert set(sa.inspect(engine).get_table_names()) >= {"studies", "uploads", "sums"}
    engine.dispose()


def test_sqlite_tables_lose_their_rowid_and_keep_their_rows(sqlite_url):
    from alembic import command
    from alembic.config import Config

    engine = storage.make_engine(sqlite_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(storage.__file__).with_name("migrations")))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.execute(sa.text('INSERT INTO reports VALUES (\'s\', 7, 3, 1, 1)'))
        conn.execute(sa.text('INSERT INTO sums VALUES (\'s\', 1, 3, -1, 1)'))
        conn.execute(sa.text('INSERT INTO devices VALUES (\'s\', 7, 1, \'2026\')'))
        assert conn.execute(sa.text("SELECT rowid FROM reports")).all() == [(1,)]
        command.upgrade(cfg, "0005")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT * FROM reports")).all() == [("s", 7, 3, 1, 1)]
        assert conn.execute(sa.text("SELECT * FROM sums")).all() == [("s", 1, 3, -1, 1)]
        assert conn.execute(sa.text("SELECT * FROM devices")).all() == [("s", 7, 1, "2026")]
        for table in ("reports", "sums", "devices"):
            with pytest.raises(sa.exc.OperationalError, match="rowid"):
                conn.execute(sa.text(f"SELECT rowid FROM {table}"))
    engine.dispose()


def test_json_log_lines():
    record = logging.LogRecord("dpfreq.server", logging.INFO, __file__, 1, "request", None, None)
    record.route, record.status = "/readyz", 200
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "request"
    assert line["level"] == "info"
    assert line["route"] == "/readyz"
    assert line["status"] == 200
    assert line["ts"].endswith("Z")


def testread_admin_token_file_is_created_private(tmp_path, monkeypatch):
    monkeypatch.delenv("DPFREQ_ADMIN_TOKEN", raising=False)
    path = tmp_path / "admin.token"
    token = read_admin_token(str(path))
    assert len(token) >= 43
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_admin_token(str(path)) == token
    monkeypatch.setenv("DPFREQ_ADMIN_TOKEN", "from-the-environment")
    assert read_admin_token(str(path)) == "from-the-environment"


def test_load_generator_runs_simulated_devices(sqlite_url, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from loadgen import main

    with LiveServer(sqlite_url) as srv:
        httpx.post(srv.url + "/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"study": "load", "horizon": 16, "max_changes": 2, "epsilon": 1.0,
                         "method": "auto", "start": START, "period": "1d",
                         "min_devices": 1, "enrolment": "open"}).raise_for_status()
        main(["--server", srv.url, "--study", "load", "--devices", "25", "--seed", "3",
              "--json"])
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert out["enrolled"] == 25
        assert out["acknowledged"] == out["reports"] > 0
        with srv.app.state.service.engine.connect() as conn:
            n = conn.execute(sa.select(sa.func.sum(storage.uploads.c.reports)))
            assert n.scalar_one() == out["reports"]


def test_sigterm_finishes_batches_in_flight(sqlite_url, tmp_path):
    srv = Served(sqlite_url, tmp_path / "serve.log", log_level="info")
    srv.start()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    r = httpx.post(srv.url + "/v1/studies", headers=auth, json={
        "study": "stop", "horizon": 64, "max_changes": 2, "epsilon": 1.0, "method": "auto",
        "start": START, "period": "1d", "min_devices": 1, "enrolment": "open"})
    pid = r.json()["param_id"]
    devices = [httpx.post(srv.url + "/v1/studies/stop/devices",
                          json={"param_id": pid, "order": 0}).json() for _ in range(40)]
    answers: list[int | None] = [None] * len(devices)

    def upload(i: int) -> None:
        e = devices[i]
        reps = [{"device": e["device"], "order": 0, "interval": j, "bit": j % 2,
                 "param_id": pid} for j in range(1, 65)]
        try:
            answers[i] = httpx.post(srv.url + "/v1/studies/stop/reports", json={"reports": reps},
                                    headers={"Authorization": f"Bearer {e['token']}"},
                                    timeout=30).status_code
        except httpx.TransportError:
            answers[i] = None

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(len(devices))]
    for t in threads:
        t.start()
    srv.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    # uvicorn re-raises the signal after its graceful shutdown: exit status -SIGTERM
    assert srv.proc.wait(60) in (0, -signal.SIGTERM)
    lines = [json.loads(x) for x in (tmp_path / "serve.log").read_text().splitlines()
             if x.startswith("{")]
    assert any(x["msg"] == "service stopped" for x in lines)  # the writer was drained
    assert all("token" not in json.dumps(x).lower() for x in lines)
    engine = storage.make_engine(sqlite_url)
    with engine.connect() as conn:
        stored = dict(conn.execute(sa.select(storage.uploads.c.device,
                                             sa.func.sum(storage.uploads.c.reports))
                                   .group_by(storage.uploads.c.device)).all())
    engine.dispose()
    for e, status in zip(devices, answers, strict=True):
        if status == 200:  # acknowledged ⇒ durable and whole
            assert stored.get(e["device"]) == 64
        else:  # refused while stopping ⇒ all or nothing
            assert stored.get(e["device"], 0) in (0, 64)


def test_liveness_and_readiness(sqlite_client):
    assert sqlite_client.get("/livez").json() == {"status": "ok"}
    assert sqlite_client.get("/readyz").json() == {"status": "ok"}


def test_not_ready_while_the_writer_is_not_running(sqlite_client):
    ingestor = sqlite_client.app.state.ingestor
    ingestor.stop()  # the writer thread ends: nothing could be acknowledged
    r = sqlite_client.get("/readyz")
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    assert "writer" in str(r.json())
    assert sqlite_client.get("/livez").status_code == 200  # alive, only not ready


def test_not_ready_while_the_token_checks_are_not_running(sqlite_client):
    sqlite_client.app.state.tokens.stop()  # no token this process has not cached is checked
    r = sqlite_client.get("/readyz")
    assert r.status_code == 503
    assert "token checks" in str(r.json())


def test_startup_error_is_one_line_without_the_password(tmp_path, monkeypatch):
    from dpfreq.cli.serve import command

    monkeypatch.setenv("DPFREQ_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("DPFREQ_DB", "postgresql://u:hunter2secret@127.0.0.1:1/x")
    monkeypatch.setenv("DPFREQ_DB_WAIT", "0.5")  # settings come from the environment too
    res = CliRunner().invoke(command, ["--port", "0"])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1
    assert "cannot open database postgresql+psycopg://u:***@127.0.0.1:1/x" in lines[0]
    assert "hunter2secret" not in res.output
    res = CliRunner().invoke(command, ["--db", str(tmp_path / "no" / "such" / "dir.db"),
                                       "--port", "0"])
    assert res.exit_code == 1
    assert str(tmp_path / "no" / "such" / "dir.db") in res.output


@pytest.mark.parametrize("where", ["command line", "environment", "config file"])
@pytest.mark.parametrize("port", ["65536", "99999"])
def test_a_port_out_of_range_is_refused_not_wrapped(tmp_path, monkeypatch, where, port):
    """`--port 99999` used to listen on 99999 mod 65536 (34463) without a word; it is refused
    in one line before anything starts, wherever the setting comes from (parsing only: no
    server is started, whatever the outcome)."""
    import click

    from dpfreq.cli.serve import command

    args = ["--db", str(tmp_path / "p.db")]
    if where == "command line":
        args += ["--port", port]
    elif where == "environment":
        monkeypatch.setenv("DPFREQ_PORT", port)
    else:
        (tmp_path / "serve.toml").write_text(f"port = {port}\n", encoding="utf-8")
        args += ["--config", str(tmp_path / "serve.toml")]
    with pytest.raises(click.BadParameter) as info:
        command.make_context("serve", args, auto_envvar_prefix="DPFREQ")
    message = info.value.format_message()
    assert message == (f"Invalid value for '--port': must be an integer in [0, 65535] "
                       f"(0 picks a free port); got {int(port)}")
    assert len(message.splitlines()) == 1
    ctx = command.make_context("serve", [*args[:2], "--port", "65535"])
    assert ctx.params["port"] == 65535


def test_request_ids_and_plain_log_lines(sqlite_client):
    r = sqlite_client.get("/livez", headers={"X-Request-Id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    assert len(sqlite_client.get("/livez").headers["x-request-id"]) == 16
    record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                               "Traceback (most recent call last):\n  File x\n"
                               "OSError: \x1b[31mboom\x1b[0m",
                               None, None)
    record.color_message = "\x1b[32mgreen\x1b[0m"
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "OSError: boom"
    assert "color_message" not in line


def test_metrics_are_text_with_runtime_and_queue(sqlite_client):
    r = sqlite_client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    for name in ("dpfreq_ingest_queue", "dpfreq_http_in_flight", "process_cpu_seconds_total",
                 "python_gc_collections_total"):
        assert name in r.text


def test_serve_migrate_is_its_own_step(tmp_path, monkeypatch):
    from dpfreq.cli.serve import command

    db = tmp_path / "m.db"
    monkeypatch.setenv("DPFREQ_DB", str(db))
    res = CliRunner().invoke(command, ["migrate"], auto_envvar_prefix="DPFREQ")
    assert res.exit_code == 0, res.output
    engine = storage.make_engine(str(db))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
            ("0008",)]
        assert conn.execute(sa.select(sa.func.count()).select_from(storage.tokens)
                            ).scalar_one() == 0
    engine.dispose()


def test_serve_logs_the_address_it_listens_on(tmp_path):
    """With --port 0 the kernel picks the port: the start-up log line names the address, and
    the service answers there."""
    env = {**os.environ, "DPFREQ_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from dpfreq.cli.main import main; "
         "sys.exit(main(sys.argv[1:]))", "serve", "--db", str(tmp_path / "listen.db"),
         "--port", "0", "--log-level", "info"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # until the start-up line (the process stays up)
            if line.startswith("{") and json.loads(line)["msg"].startswith("service started"):
                started = json.loads(line)
                break
        else:
            raise AssertionError("no start-up line")
        url = started["url"]
        assert started["msg"] == f"service started, listening on {url}"
        assert url.startswith("http://127.0.0.1:")
        assert not url.endswith(":0")
        assert httpx.get(url + "/livez", timeout=10).json() == {"status": "ok"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_every_serve_example_of_the_docs_has_an_admin_token():
    """A `dpfreq serve` started without an admin token cannot create a study: every example
    that starts the service (docs/service.md, the README) gives one."""
    root = Path(__file__).resolve().parents[2]
    found = 0
    for doc in (root / "docs" / "service.md", root / "README.md"):
        # a command continued on the next lines (a trailing backslash) is one line
        text_of = doc.read_text(encoding="utf-8").replace("\\\n", " ")
        for line in text_of.splitlines():
            text = line.strip()
            if not text.startswith("dpfreq serve") or text.startswith(
                    ("dpfreq serve migrate", "dpfreq serve purge", "dpfreq serve`")):
                continue
            found += 1
            assert "--admin-token-file" in text or "DPFREQ_ADMIN_TOKEN" in text, text
    assert found >= 2
