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

**Restored from an older copy.** Fed the same inputs again, a device restored from an older
copy of its queue file re-sends bit-identical reports. Fed other inputs, it could compute
another bit for a slot it already sent, and two bits for one slot show that its inputs
changed (docs/protocol.md §7). So before its first upload of each run, :meth:`Uploader.flush`
reads the slots the service holds for the device (:meth:`Uploader.sync`) and never sends
another bit for any of them: such a report is **withheld** (kept aside as refused with status
:attr:`Uploader.WITHHELD`, never sent), and :class:`DeviceUploader` tells its client, which
withholds those of the periods to come.
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

__all__ = ["DeviceUploader", "FlushResult", "Uploader", "Wait"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending (
    interval INTEGER PRIMARY KEY, report TEXT NOT NULL, queued REAL NOT NULL);
CREATE TABLE IF NOT EXISTS refused (
    interval INTEGER PRIMARY KEY, report TEXT NOT NULL, status INTEGER NOT NULL,
    error TEXT NOT NULL);
"""

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_WITHHELD_ERROR = ("withheld on the device: the service holds another bit for this interval "
                   "(the device was restored from an older state and fed other input); never "
                   "sent")


@dataclass(frozen=True)
class Wait:
    """One wait of the uploader between two attempts of a request (see ``on_wait``)."""

    path: str
    attempt: int
    seconds: float
    status: int | None  # None: a transport error
    error: str | None  # the service's one-line error, when it sent one


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
    on_wait : callable or None
        Called with a :class:`Wait` before each wait between two attempts of a request (a
        busy or rate-limited service, or a transport error): how long and why, so that the
        device can say it is waiting (an enrolment past the service's enrolment rate limit
        waits as long as the 429 answer's ``Retry-After``; its error states the limit).
    """

    #: Status of a report the device withheld itself (never sent): the service holds another
    #: bit for its interval (module notes).
    WITHHELD = 0

    def __init__(self, server: str, study: str, *, queue_path: str | Path, max_batch: int = 256,
                 retries: int = 6, backoff: float = 0.25, max_backoff: float = 30.0,
                 timeout: float = 30.0, http: Any = None,
                 sleep: Callable[[float], None] = time.sleep,
                 enrolment_secret: str | None = None,
                 on_wait: Callable[[Wait], None] | None = None) -> None:
        self.server = server.rstrip("/")
        self.study = study
        self.enrolment_secret = enrolment_secret
        self.max_batch = max_batch
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep
        self.on_wait = on_wait
        #: ``(status, error)`` of the last failed attempt of the last request (status None:
        #: a transport error), or None
        self.last_failure: tuple[int | None, str | None] | None = None
        self.held: dict[int, int] | None = None  # the service's slots, once read in this run
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
        self.last_failure = None
        for attempt in range(self.retries):
            retry_after = status = error = None
            try:
                resp = self.http.request(method, self.server + path, json=body, headers=headers)
                if resp.status_code not in RETRY_STATUSES:
                    return resp
                retry_after = resp.headers.get("retry-after")
                status, error = resp.status_code, _error(resp)
            except httpx.TransportError:
                pass
            self.last_failure = (status, error)
            if attempt + 1 == self.retries:
                break
            delay = wait * _jitter()
            if retry_after is not None and retry_after.isdigit():
                delay = max(delay, float(retry_after))
            delay = min(delay, self.max_backoff)
            if self.on_wait is not None:
                self.on_wait(Wait(path, attempt + 1, delay, status, error))
            self.sleep(delay)
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
            status, error = self.last_failure or (None, None)
            why = "unreachable" if status is None else f"busy ({status}: {error})"
            raise DataError(f"enrolment failed: the server stayed {why}; try again later.")
        if resp.status_code != 201:
            raise DataError(f"enrolment refused ({resp.status_code}): {_error(resp)}")
        out = resp.json()
        self.db.execute("BEGIN IMMEDIATE")
        self._put("device", str(int(out["device"])))
        self._put("token", str(out["token"]))
        self.db.execute("COMMIT")
        return int(out["device"])

    def enqueue(self, report: dict[str, Any]) -> bool:
        """Queue one wire-form report; whether it was queued. A second copy of a queued
        interval is ignored; a report whose interval is queued, or held by the service (as
        read by :meth:`sync` in this run), with the other bit is withheld: kept aside as
        refused with status :attr:`Uploader.WITHHELD`, never sent."""
        j, bit = int(report["interval"]), int(report["bit"])
        row = self.db.execute("SELECT report FROM pending WHERE interval = ?", (j,)).fetchone()
        known = json.loads(row[0])["bit"] if row is not None else (self.held or {}).get(j)
        if known is not None:
            if known != bit:
                self.withhold(j, report)
            return False
        self.db.execute("INSERT INTO pending (interval, report, queued) VALUES (?, ?, ?)",
                        (j, json.dumps(report), time.time()))
        return True

    def withhold(self, interval: int, report: dict[str, Any] | None) -> None:
        """Keep a report aside as refused with status :attr:`Uploader.WITHHELD` (it is never sent);
        ``report`` None when its bit was never computed into a report."""
        self.db.execute("INSERT OR REPLACE INTO refused (interval, report, status, error) "
                        "VALUES (?, ?, ?, ?)",
                        (int(interval), json.dumps(report), self.WITHHELD, _WITHHELD_ERROR))

    def sync(self) -> int | None:
        """Read the slots the service holds for this device (``GET /v1/studies/{study}/
        reports``) into :attr:`held`, and settle the queue against them: a queued report with
        the other bit is withheld, one with the same bit is dropped (it is stored). None when
        the service stayed unreachable or busy, else the answer's status (another status than
        200 refuses every queued report for good, as an upload's would)."""
        token = self.get("token")
        if token is None:
            raise DataError("sync before enrolment: call enrol first.")
        resp = self._request("GET", f"/v1/studies/{self.study}/reports", token=token)
        if resp is None:
            return None
        rows = self.db.execute("SELECT interval, report FROM pending").fetchall()
        self.db.execute("BEGIN IMMEDIATE")
        if resp.status_code != 200:
            self.db.executemany(
                "INSERT OR REPLACE INTO refused (interval, report, status, error) "
                "VALUES (?, ?, ?, ?)", [(i, r, resp.status_code, _error(resp)) for i, r in rows])
            self.db.execute("DELETE FROM pending")
        else:
            self.held = {int(j): int(b) for j, b in resp.json()["slots"]}
            for i, r in rows:
                known = self.held.get(i)
                if known is None:
                    continue
                if known != json.loads(r)["bit"]:
                    self.withhold(i, json.loads(r))
                self.db.execute("DELETE FROM pending WHERE interval = ?", (i,))
        self.db.execute("COMMIT")
        return resp.status_code

    def flush(self) -> FlushResult:
        """Send every queued report (after :meth:`sync`, once per run); stop early (queue
        kept) when the server is unreachable."""
        token = self.get("token")
        if token is None:
            raise DataError("flush before enrolment: call enrol first.")
        sent = refused = 0
        if self.held is None:
            before = (self.pending(), len(self.refused()))
            status = self.sync()
            if status is None:
                return FlushResult(0, 0, before[0], True)
            refused = len(self.refused()) - before[1]
            sent = before[0] - self.pending() - refused  # stored before this run
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
        self._noted = False  # the first flush of the run reads the service's slots

    def _note(self) -> None:
        """Once the service's slots are read, tell the client (it withholds the reports of
        periods to come that disagree with them)."""
        if not self._noted and self.uploader.held is not None:
            self.client.note_sent(sorted(self.uploader.held.items()))
            self._noted = True

    def step(self, x: int) -> list[dict[str, Any]]:
        """Read the next period's value; queue the reports due (at the last period of the
        horizon, every report still due) in one transaction with the new state. A report the
        client withholds (another bit was sent for its slot) is kept aside as refused with
        status :attr:`Uploader.WITHHELD`."""
        self._note()
        before = len(self.client.withheld)
        reps = self.client.step(x)
        db = self.uploader.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self.uploader._put("client", self.client.to_json())
            for j in self.client.withheld[before:]:
                self.uploader.withhold(j, None)
            wires = [client_report(rep, self.uploader.device or 0) for rep in reps]
            for wire in wires:
                self.uploader.enqueue(wire)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return wires
