"""Fixtures of the collection-service tests: both storage backends (SQLite in a temp file,
PostgreSQL from the installed server binaries), an in-process app, study and device helpers."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("sqlalchemy", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="the [server] extra is not installed")

import httpx
from fastapi.testclient import TestClient

from dpfreq.longitudinal import LongitudinalClient, ProtocolParams
from dpfreq.server import ServerConfig, create_app
from dpfreq.server.protocol import client_order, client_report
from pgtemp import TemporaryPostgres, find_pg_bin

ADMIN = "test-admin-token-" + "x" * 20
START = "2020-01-01"  # every period of the test studies has started


@pytest.fixture(scope="session")
def postgres() -> Iterator[TemporaryPostgres]:
    """One throwaway PostgreSQL cluster for the session (127.0.0.1, a free port)."""
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    with TemporaryPostgres() as pg:
        yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "service.db")
    pg = request.getfixturevalue("postgres")
    return pg.create_database("t_" + secrets.token_hex(6))


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    """A fresh SQLite database file."""
    return str(tmp_path / "service.db")


def make_client(db: str, **config: Any) -> TestClient:
    """A TestClient over a new app on ``db`` (use as a context manager)."""
    config.setdefault("rate", 0)
    config.setdefault("enrol_rate", 0)
    config.setdefault("read_cache_seconds", 0)
    config.setdefault("admin_token", ADMIN)
    return TestClient(create_app(ServerConfig(db=db, **config)))


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The app on each backend, started (migrations applied, writer running)."""
    with make_client(db_url) as c:
        yield c


@pytest.fixture
def sqlite_client(sqlite_url: str) -> Iterator[TestClient]:
    """The app on SQLite only (cases whose logic does not depend on the backend)."""
    with make_client(sqlite_url) as c:
        yield c


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def create_study(c: TestClient, study: str = "s1", **over: Any) -> ProtocolParams:
    """Create a study (64 daily periods from 2020, k = 2, ε = 1) and return its parameters."""
    body = {"study": study, "title": "test", "horizon": 64, "max_changes": 2, "epsilon": 1.0,
            "method": "auto", "start": START, "period": "1d", "min_devices": 3}
    body.update(over)
    r = c.post("/v1/studies", json=body, headers=admin())
    assert r.status_code == 201, r.text
    if "enrolment_secret" in r.json():
        secrets = getattr(c, "enrol_secrets", {})
        secrets[study] = r.json()["enrolment_secret"]
        c.enrol_secrets = secrets  # type: ignore[attr-defined]
    return ProtocolParams.from_json(r.json()["params"])


def enrol_headers(c: TestClient, study: str) -> dict[str, str]:
    """The bearer header with the study's enrolment secret (none for an open study)."""
    secret = getattr(c, "enrol_secrets", {}).get(study)
    return {} if secret is None else bearer(secret)


def enrol(c: TestClient, params: ProtocolParams, order: int, study: str = "s1") -> tuple[int, str]:
    r = c.post(f"/v1/studies/{study}/devices", json={"param_id": params.param_id,
                                                     "order": order},
               headers=enrol_headers(c, study))
    assert r.status_code == 201, r.text
    return int(r.json()["device"]), str(r.json()["token"])


def run_devices(c: TestClient, params: ProtocolParams, rng: np.random.Generator, n: int,
                study: str = "s1") -> list[tuple[int, int, list[dict[str, Any]]]]:
    """Enrol n LongitudinalClients and upload every report; ``(device, order, reports)``."""
    out = []
    for _ in range(n):
        cl = LongitudinalClient(params, rng=rng)
        device, token = enrol(c, params, client_order(cl), study)
        x = rng.integers(0, 2, size=params.horizon)
        reps = [client_report(r, device) for t in range(params.horizon)
                for r in cl.step(int(x[t]))]
        r = c.post(f"/v1/studies/{study}/reports", json={"reports": reps},
                   headers=bearer(token))
        assert r.status_code == 200, r.text
        out.append((device, client_order(cl), reps))
    return out


def stored(c: TestClient) -> tuple[int, int]:
    """(number of stored reports, Σ |running sums|) read straight from the database."""
    import sqlalchemy as sa

    from dpfreq.server import storage

    engine = c.app.state.service.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        n = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(storage.uploads.c.reports), 0))
                         ).scalar_one()
        s = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(storage.sums.c.reports), 0)))
        return int(n), int(s.scalar_one())


class LiveServer:
    """The app served by uvicorn in a thread on 127.0.0.1 at a free port."""

    def __init__(self, db: str, **config: Any) -> None:
        import socket
        import threading

        import uvicorn

        config.setdefault("rate", 0)
        config.setdefault("enrol_rate", 0)
        config.setdefault("read_cache_seconds", 0)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(ServerConfig(db=db, admin_token=ADMIN, **config))
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def live_sqlite(sqlite_url: str) -> Iterator[LiveServer]:
    """A live server on SQLite."""
    with LiveServer(sqlite_url) as srv:
        yield srv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """``dpfreq serve`` as a subprocess on a fixed port, restartable."""

    def __init__(self, db: str, log_path, log_level: str = "warning",
                 args: tuple[str, ...] = ()) -> None:
        self.db, self.port, self.log_path = db, _free_port(), log_path
        self.log_level, self.args = log_level, args
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "DPFREQ_ADMIN_TOKEN": ADMIN}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "import sys; from dpfreq.cli.main import main; "
                 "sys.exit(main(sys.argv[1:]))", "serve", "--db", self.db, "--port",
                 str(self.port), "--rate", "0", "--enrol-rate", "0", "--log-level", self.log_level,
                 *self.args],
                env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None, "dpfreq serve exited"
            time.sleep(0.05)
        raise AssertionError("dpfreq serve did not come up")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
