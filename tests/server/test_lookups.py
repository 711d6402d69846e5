"""Token checks of a process that did not issue the tokens (another worker, or after a
restart): many tokens per query, each device's order learned with its token, and the same
answers as one check at a time (both backends)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import sqlalchemy as sa

from conftest import admin, bearer, create_study, enrol, make_client
from dpfreq.server import storage
from dpfreq.server.auth import Principal, hash_token, token_id
from dpfreq.server.lookups import TokenChecks, owner
from dpfreq.server.protocol import client_report
from dpfreq.server.service import Service


def _count_token_reads(engine: sa.engine.Engine) -> list[str]:
    """Statements that read the tokens table, as they run on ``engine``."""
    seen: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM tokens" in statement:
            seen.append(statement)

    return seen


def test_queued_tokens_are_read_in_one_query_with_their_orders(db_url: str) -> None:
    with make_client(db_url) as issuer:
        params = create_study(issuer)
        devices = [(*enrol(issuer, params, order % 3), order % 3) for order in range(40)]
        _, revoked_token, _ = devices[0]
        r = issuer.delete(f"/v1/tokens/{token_id(hash_token(revoked_token))}", headers=admin())
        assert r.status_code == 200, r.text
    engine = storage.make_engine(db_url)
    try:
        service = Service(engine)  # a process that has seen none of these tokens
        reads = _count_token_reads(engine)
        checks = TokenChecks(service)
        unknown = ["no-such-token-" + "y" * 20]

        async def ask() -> list[Any]:
            futures = [checks.check(token) for _, token, _ in devices] + [
                checks.check(token) for token in unknown]
            checks.start()  # every check is queued: the thread reads them all at once
            return list(await asyncio.gather(*futures))

        answers = asyncio.run(ask())
        checks.stop()
        assert len(reads) == 1
        assert answers[0] is None
        assert answers[-1] is None
        for (device, _, order), who in zip(devices[1:], answers[1:-1], strict=True):
            assert who is not None
            assert who.role == "device"
            assert (who.study, who.device) == ("s1", device)
            assert service.cached_order("s1", device) == order
        # cached now: a second ask reads nothing
        state = SimpleNamespace(service=service, tokens=checks)
        assert asyncio.run(owner(state, devices[1][1])) == answers[1]
        assert len(reads) == 1
    finally:
        engine.dispose()


def test_an_upload_to_a_process_that_did_not_enrol_the_device(db_url: str) -> None:
    """Two apps on one database, like two worker processes: a device enrolled by one uploads
    to the other, which reads its token and order in one query and stores the reports."""
    rng = np.random.default_rng(20261128)
    with make_client(db_url) as first, make_client(db_url, admin_token=None) as second:
        params = create_study(first)
        device, token = enrol(first, params, 0)
        reads = _count_token_reads(second.app.state.service.engine)  # type: ignore[attr-defined]
        bits = rng.integers(0, 2, size=4).tolist()
        reports = [client_report({"order": 0, "interval": j + 1, "bit": int(b),
                                  "param_id": params.param_id}, device)
                   for j, b in enumerate(bits)]
        r = second.post("/v1/studies/s1/reports", json={"reports": reports},
                        headers=bearer(token))
        assert r.status_code == 200, r.text
        assert r.json()["stored"] == 4
        assert len(reads) == 1
        service = second.app.state.service  # type: ignore[attr-defined]
        assert service.cached_order("s1", device) == 0
        with service.engine.connect() as conn:
            n = conn.execute(sa.select(sa.func.sum(storage.uploads.c.reports))).scalar()
        assert n == 4


def test_a_failed_read_fails_every_waiting_check() -> None:
    class Down:
        def principals(self, tokens: list[str]) -> list[Any]:
            raise RuntimeError("the database is away")

    checks = TokenChecks(Down())  # type: ignore[arg-type]

    async def ask() -> list[Any]:
        futures = [checks.check(f"token-{i}") for i in range(3)]
        checks.start()
        return list(await asyncio.gather(*futures, return_exceptions=True))

    answers = asyncio.run(ask())
    checks.stop()
    assert [type(a) for a in answers] == [RuntimeError] * 3


def test_an_expired_token_is_refused(sqlite_url: str) -> None:
    engine = storage.make_engine(sqlite_url)
    try:
        storage.upgrade(engine)
        service = Service(engine)
        service.register_token("short-lived-token-" + "z" * 20, Principal("analyst", "s1"),
                               ttl=0.01)
        time.sleep(0.05)
        fresh = Service(engine)
        assert fresh.principals(["short-lived-token-" + "z" * 20]) == [None]
        assert fresh.cached_principal("short-lived-token-" + "z" * 20) is None
    finally:
        engine.dispose()

