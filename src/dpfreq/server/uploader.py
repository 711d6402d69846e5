"""Device side of the collection service: an HTTP uploader with an on-disk queue.

A device (:class:`DeviceUploader`) runs a :class:`~dpfreq.longitudinal.LongitudinalClient`.
Each period it steps the client and, in **one** SQLite transaction on the device, saves the
client's new state and queues the report it produced, so a device that restarts neither redraws
its order nor loses or re-randomizes a report. :meth:`Uploader.flush` sends the queue in batches
with retries and exponential backoff (full jitter; ``Retry-After`` honoured) and deletes reports
only after the server acknowledged them. A device offline for days keeps its queue and sends it
later; a batch whose acknowledgement was lost is sent again and the server answers it as a
success without storing anything twice (one report per device and interval).

Only locally randomized reports leave the device; the raw state never does.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dpfreq.artifacts import create_private
from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient

from .protocol import client_order, client_report, params_from_json

__all__ = ["DeviceUploader", "FlushResult", "Uploader"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending (
    interval INTEGER PRIMARY KEY, report TEXT NOT NULL, queued REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refused (
    interval INTEGER PRIMARY KEY, report TEXT NOT NULL, status INTEGER NOT NULL,
    error TEXT NOT NULL);
"""

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class FlushResult:
    """What one :meth:`Uploader.flush` did."""

    sent: int
    refused: int
    pending: int
    offline: bool


def _jitter() -> float:
    """A uniform number in [0, 1) from the OS's random source (backoff jitter only)."""
    return int.from_bytes(os.urandom(4), "little") / 2**32


class Uploader:
    """Queue and send one device's reports.

    Parameters
    ----------
    server : str
        Base URL of the service, e.g. ``https://collect.example.org``.
    study : str
        Study id.
    queue_path : str or Path
        The device's SQLite queue file (created if absent, mode 0600: it holds the device
        secret, the device token and the queued reports).
    max_batch : int
        Most reports per request.
    retries : int
        Attempts per batch before :meth:`flush` gives up for now (the queue is kept).
    backoff, max_backoff : float
        First and largest wait in seconds; the wait doubles after each failed attempt and is
        drawn uniformly from ``[0, wait]`` (full jitter).
    http : httpx.Client or None
        A client to reuse (tests pass Starlette's ``TestClient``).
    sleep : callable
        ``time.sleep`` (tests inject a recorder).
    enrolment_secret : str or None
        The study's enrolment secret (given once when the study was created), sent as the
        bearer token of the enrolment request; None for a study created with
        ``enrolment="open"``. It is used only to enrol and never stored in the queue file.
    """

    def __init__(self, server: str, study: str, *, queue_path: str | Path, max_batch: int = 256,
                 retries: int = 6, backoff: float = 0.25, max_backoff: float = 30.0,
                 timeout: float = 30.0, http: Any = None,
                 sleep: Callable[[float], None] = time.sleep,
                 enrolment_secret: str | None = None) -> None:
        self.server = server.rstrip("/")
        self.study = study
        self.enrolment_secret = enrolment_secret
        self.max_batch = max_batch
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep
        self.http = http if http is not None else httpx.Client(timeout=timeout)
        # the queue holds the device secret, its token and reports: owner-only (0600)
        self.db = sqlite3.connect(str(create_private(queue_path)), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)

    # -- state on disk ----------------------------------------------------------------------
    def get(self, key: str) -> str | None:
        """A value of the device's metadata (device id, token, client state)."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def device(self) -> int | None:
        """The device id given at enrolment (None before)."""
        value = self.get("device")
        return None if value is None else int(value)

    def pending(self) -> int:
        """Reports queued and not yet acknowledged."""
        return int(self.db.execute("SELECT count(*) FROM pending").fetchone()[0])

    def refused(self) -> list[dict[str, Any]]:
        """Reports the server refused for good (with the status and its error line)."""
        return [{"interval": i, "status": s, "error": e} for i, s, e in self.db.execute(
            "SELECT interval, status, error FROM refused ORDER BY interval")]

    # -- HTTP -------------------------------------------------------------------------------
    def _request(self, method: str, path: str, *, body: Any = None,
                 token: str | None = None) -> httpx.Response | None:
        """Send with retries; None when the server stayed unreachable or busy."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        wait = self.backoff
        for attempt in range(self.retries):
            retry_after = None
            try:
                resp = self.http.request(method, self.server + path, json=body, headers=headers)
                if resp.status_code not in RETRY_STATUSES:
                    return resp
                retry_after = resp.headers.get("retry-after")
            except httpx.TransportError:
                pass
            if attempt + 1 == self.retries:
                break
            delay = wait * _jitter()
            if retry_after is not None and retry_after.isdigit():
                delay = max(delay, float(retry_after))
            self.sleep(min(delay, self.max_backoff))
            wait = min(2 * wait, self.max_backoff)
        return None

    def enrol(self, order: int, param_id: str, protocol_version: int | None = None) -> int:
        """Enrol once (a second call returns the stored id); keeps id and token on disk."""
        known = self.device
        if known is not None:
            return known
        resp = self._request("POST", f"/v1/studies/{self.study}/devices", body={
            "param_id": param_id, "order": int(order), "protocol_version": protocol_version},
            token=self.enrolment_secret)
        if resp is None:
            raise DataError("enrolment failed: the server is unreachable; try again later.")
        if resp.status_code != 201:
            raise DataError(f"enrolment refused ({resp.status_code}): {_error(resp)}")
        out = resp.json()
        self.db.execute("BEGIN IMMEDIATE")
        self._put("device", str(int(out["device"])))
        self._put("token", str(out["token"]))
        self.db.execute("COMMIT")
        return int(out["device"])

    def enqueue(self, report: dict[str, Any]) -> None:
        """Queue one wire-form report (a second copy of an interval is ignored)."""
        self.db.execute(
            "INSERT OR IGNORE INTO pending (interval, report, queued) VALUES (?, ?, ?)",
            (int(report["interval"]), json.dumps(report), time.time()))

    def flush(self) -> FlushResult:
        """Send every queued report; stop early (queue kept) when the server is unreachable."""
        token = self.get("token")
        if token is None:
            raise DataError("flush before enrolment: call enrol first.")
        sent = refused = 0
        while True:
            rows = self.db.execute(
                "SELECT interval, report FROM pending ORDER BY interval LIMIT ?",
                (self.max_batch,)).fetchall()
            if not rows:
                return FlushResult(sent, refused, 0, False)
            resp = self._request("POST", f"/v1/studies/{self.study}/reports",
                                 body={"reports": [json.loads(r) for _, r in rows]}, token=token)
            if resp is None:
                return FlushResult(sent, refused, self.pending(), True)
            intervals = [(i,) for i, _ in rows]
            self.db.execute("BEGIN IMMEDIATE")
            if resp.status_code != 200:  # refused for good: keep them aside, with the reason
                self.db.executemany(
                    "INSERT OR REPLACE INTO refused (interval, report, status, error) "
                    "VALUES (?, ?, ?, ?)",
                    [(i, r, resp.status_code, _error(resp)) for i, r in rows])
                refused += len(rows)
            else:
                sent += len(rows)
            self.db.executemany("DELETE FROM pending WHERE interval = ?", intervals)
            self.db.execute("COMMIT")

    def close(self) -> None:
        """Close the queue file."""
        self.db.close()


def _error(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("error", ""))[:300]
    except ValueError:
        return resp.text[:300]


class DeviceUploader:
    """A :class:`~dpfreq.longitudinal.LongitudinalClient` whose state and reports live in the
    uploader's queue file.

    On first use it fetches the study's parameters, creates the client (its secret from the OS
    CSPRNG unless ``rng`` seeds it for a test), saves it and enrols with its order; afterwards
    it restores the client from the file (and enrols if a crash came before enrolment). Every
    draw of the client is a keyed function of its secret (:mod:`dpfreq.longitudinal.keyed`),
    so a queue file restored from any earlier copy re-sends bit-identical reports (the server
    stores each once).
    """

    def __init__(self, uploader: Uploader, *, rng: Any = None) -> None:
        self.uploader = uploader
        state = uploader.get("client")
        if state is not None:
            client = LongitudinalClient.from_json(state)
        else:
            resp = uploader._request("GET", f"/v1/studies/{uploader.study}")
            if resp is None or resp.status_code != 200:
                raise DataError("could not read the study's parameters from the server.")
            client = LongitudinalClient(params_from_json(resp.json()["params"]), rng=rng)
            # saved before enrolling: a restart enrols with the same secret, hence the same order
            uploader.db.execute("BEGIN IMMEDIATE")
            uploader._put("client", client.to_json())
            uploader.db.execute("COMMIT")
        uploader.enrol(client_order(client), client.params.param_id, int(client.params.version))
        self.client = client

    def step(self, x: int) -> list[dict[str, Any]]:
        """Read the next period's value; queue the reports due (at the last period of the
        horizon, every report still due) in one transaction with the new state."""
        reps = self.client.step(x)
        db = self.uploader.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self.uploader._put("client", self.client.to_json())
            wires = [client_report(rep, self.uploader.device or 0) for rep in reps]
            for wire in wires:
                self.uploader.enqueue(wire)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return wires
