"""Helpers of the shuffle services' tests: the three roles served by uvicorn in threads (with a
recorder of every request a role receives), parameters, and the offline recomputation of a
release from the workers' stored draws."""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
from typing import Any

import numpy as np
import sqlalchemy as sa
import uvicorn

from dpfreq.crossparty import Coverage
from dpfreq.crossparty.shuffle import ShuffleParams, make_plan, release_from_histograms
from dpfreq.crossparty.shuffle.worker import WorkerDraws
from dpfreq.server import ServerConfig, create_role_app, storage
from dpfreq.server.roles import tables

ADMINS = {"aggregator": "admin-aggregator-" + "a" * 24, "worker0": "admin-worker0-" + "b" * 24,
          "worker1": "admin-worker1-" + "c" * 24}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Recorder:
    """ASGI wrapper keeping every request: (method, path, headers without the token, body)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.messages.append({"method": scope["method"], "path": scope["path"],
                              "headers": {k.decode(): v.decode() for k, v in scope["headers"]
                                          if k != b"authorization"}, "body": body})
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class RoleThread:
    """One role served by uvicorn in a thread on a fixed port, restartable on its database."""

    def __init__(self, role: str, db: str, name: str, record: bool = False) -> None:
        self.role, self.db, self.name, self.record = role, db, name, record
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.recorder: Recorder | None = None
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> RoleThread:
        app: Any = create_role_app(ServerConfig(db=self.db, admin_token=ADMINS[self.name],
                                                role=self.role))
        if self.record:
            old = [] if self.recorder is None else self.recorder.messages
            self.recorder = Recorder(app)
            self.recorder.messages = old
            app = self.recorder
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="error", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the {self.role} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            assert self.thread is not None
            self.thread.join(30)
            self.server = None


def shuffle_params(parties: list[str], *, registers: int = 4096, per_party: bool = False,
                   deadline_seconds: float = 600.0, K: int = 3,
                   coverage: Coverage | None = None) -> ShuffleParams:
    deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=deadline_seconds)
    return ShuffleParams(measurement="campaign", registers=registers, sampling_start=0,
                         sampling_width=1, max_frequency=K, epsilon=1.0, delta=1e-9,
                         parties=parties, per_party=per_party,
                         coverage=Coverage() if coverage is None else coverage,
                         deadline=deadline.isoformat(),
                         hash="sha256-prefix/v1", key_id="0" * 32)


def stored_draws(db: str, measurement: str) -> WorkerDraws:
    engine = storage.make_engine(db)
    m = tables.measurements
    with engine.connect() as conn:
        text = conn.execute(sa.select(m.c.draws).where(m.c.measurement == measurement)
                            ).scalar_one()
    engine.dispose()
    return WorkerDraws.from_dict(json.loads(text))


def offline_release(registers: np.ndarray, params: ShuffleParams, included: list[str],
                    dbs: list[str], confidence: float = 0.95) -> Any:
    """The release recomputed offline: the exact registers of the included parties, plus both
    workers' stored dummies (``registers``: one row per declared party)."""
    draws = [stored_draws(db, params.measurement) for db in dbs]
    ids = dict.fromkeys(included, "0" * 32)
    plan = make_plan(params, ids, ids)
    hists = []
    for i, (_, parties) in enumerate(plan.entities):
        V = params.max_frequency * len(parties)
        truth = np.bincount(registers[list(parties)].sum(axis=0), minlength=V + 1)
        hists.append(truth + draws[0].dummies[i] + draws[1].dummies[i])
    return release_from_histograms(hists, params=params, plan=plan, confidence=confidence)


def wait_result(url: str, token: str, measurement: str = "campaign",
                timeout: float = 60.0) -> tuple[int, dict[str, Any]]:
    from dpfreq.server.roles.client import fetch_result

    deadline = time.monotonic() + timeout
    while True:
        status, payload = fetch_result(url, measurement, token)
        if status != 409 or time.monotonic() > deadline:
            return status, payload
        time.sleep(0.1)
