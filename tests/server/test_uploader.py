"""Device side: the uploader's on-disk queue survives being offline, lost acknowledgements and
restarts without storing anything twice."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat

import httpx
import numpy as np
import pytest

from conftest import ADMIN, START, make_client, stored
from dpfreq.artifacts import create_private, write_private
from dpfreq.cli.serve import read_admin_token
from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams
from dpfreq.server.storage import make_engine
from dpfreq.server.uploader import DeviceUploader, Uploader, Wait


class Flaky:
    """An HTTP client that fails while ``down`` is set, and can drop the next answer after the
    server handled the request (a lost acknowledgement)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.down = False
        self.lose_next_answer = False
        self.calls = 0

    def request(self, method, url, **kw):
        self.calls += 1
        if self.down:
            raise httpx.ConnectError("offline")
        resp = self.inner.request(method, url, **kw)
        if self.lose_next_answer:
            self.lose_next_answer = False
            raise httpx.ReadTimeout("answer lost")
        return resp


def _study(c) -> None:
    """A study that needs its enrolment secret (kept on the test client for the uploaders)."""
    r = c.post("/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"}, json={
        "study": "s1", "horizon": 16, "max_changes": 2, "epsilon": 1.0, "method": "auto",
        "start": START, "period": "1d", "min_devices": 1})
    assert r.status_code == 201
    c.enrol_secret = r.json()["enrolment_secret"]


def test_offline_device_resends_later_without_duplicates(sqlite_client, tmp_path, seed):
    c = sqlite_client
    _study(c)
    flaky = Flaky(c)
    sleeps: list[float] = []
    up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=flaky,
                  sleep=sleeps.append, max_batch=3, retries=4)
    dev = DeviceUploader(up, rng=np.random.Generator(np.random.PCG64(seed)))
    order = dev.client.order
    x = [0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    for t in range(8):
        dev.step(x[t])
    flaky.down = True
    res = up.flush()
    assert res.offline
    assert res.sent == 0
    assert res.pending == 8 >> order
    assert len(sleeps) == 3  # retries - 1 waits
    assert all(0 <= s <= 30 for s in sleeps)
    flaky.down = False
    # the server stores the first batch but its answer is lost: the device sends it again
    flaky.lose_next_answer = True
    res = up.flush()
    assert res.sent == 8 >> order
    assert res.pending == 0
    assert stored(c)[0] == 8 >> order
    # the device restarts from its queue file: same order, same device, no new enrolment
    device = up.device
    up.close()
    up2 = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=flaky,
                   sleep=sleeps.append)
    dev2 = DeviceUploader(up2)
    assert dev2.client.order == order
    assert up2.device == device
    for t in range(8, 16):
        dev2.step(x[t])
    assert up2.flush().sent == (16 >> order) - (8 >> order)
    assert stored(c)[0] == 16 >> order
    with c.app.state.service.engine.connect() as conn:
        import sqlalchemy as sa

        from dpfreq.server import storage

        n_devices = conn.execute(sa.select(sa.func.count()).select_from(storage.devices))
        assert n_devices.scalar_one() == 1
    up2.close()


def test_refused_reports_are_kept_aside(sqlite_client, tmp_path):
    c = sqlite_client
    _study(c)
    up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=c,
                  sleep=lambda s: None)
    params_id = c.get("/v1/studies/s1").json()["param_id"]
    device = up.enrol(0, params_id)
    assert up.enrol(0, params_id) == device  # enrolment happens once
    up.enqueue({"device": device, "order": 0, "interval": 1, "bit": 1, "param_id": "bad"})
    res = up.flush()
    assert (res.sent, res.refused, res.pending) == (0, 1, 0)
    assert up.refused()[0]["status"] == 400
    assert stored(c) == (0, 0)
    up.close()


def _snapshot(up: Uploader, path) -> None:
    """A consistent copy of the queue file as a backup or VM snapshot would hold it."""
    dst = sqlite3.connect(str(path))
    up.db.backup(dst)
    dst.close()


def test_replayed_queue_snapshots_send_identical_bytes(sqlite_client, tmp_path, seed):
    """Every snapshot of the uploader's queue file (client state and queue), restored three
    times and run on, queues byte-identical reports, and the server takes the re-sent reports
    as the same reports (no 409, nothing stored twice)."""
    c = sqlite_client
    r = c.post("/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"}, json={
        "study": "s1", "horizon": 13, "max_changes": 3, "epsilon": 1.0, "method": "auto",
        "start": START, "period": "1d", "min_devices": 1})
    assert r.status_code == 201
    c.enrol_secret = r.json()["enrolment_secret"]
    up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=c,
                  sleep=lambda s: None)
    dev = DeviceUploader(up, rng=np.random.Generator(np.random.PCG64(seed)))
    x = [int(v) for v in np.random.default_rng(seed).integers(0, 2, size=13)]
    sent = []
    for t in range(13):
        _snapshot(up, tmp_path / f"snap{t}.db")
        sent.append([json.dumps(w, sort_keys=True) for w in dev.step(x[t])])
    assert sum(map(len, sent)) == 16 >> dev.client.order  # the horizon's end reported itself
    assert up.flush().sent == 16 >> dev.client.order
    first = stored(c)
    for t in range(13):
        for _ in range(3):
            path = tmp_path / f"replay{t}.db"
            shutil.copyfile(tmp_path / f"snap{t}.db", path)
            up2 = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=path, http=c,
                           sleep=lambda s: None)
            dev2 = DeviceUploader(up2)
            again = [[json.dumps(w, sort_keys=True) for w in dev2.step(xt)] for xt in x[t:]]
            assert again == sent[t:]
            res = up2.flush()
            assert res.refused == 0
            assert res.pending == 0
            up2.close()
            path.unlink()
    assert stored(c) == first
    up.close()


class Recorder:
    """An HTTP client that keeps every bit that reached the server, per interval (stored or
    refused: what a curious server sees)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seen: dict[int, set[int]] = {}
        self.statuses: list[int] = []

    def request(self, method, url, **kw):
        for rep in (kw.get("json") or {}).get("reports", []):
            self.seen.setdefault(rep["interval"], set()).add(rep["bit"])
        resp = self.inner.request(method, url, **kw)
        self.statuses.append(resp.status_code)
        return resp


_A = [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 1]
_B = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0]


def _diverging_seed(params) -> tuple[int, int]:
    """A seed whose device, restored at period 8 and fed ``_B`` instead of ``_A``, computes
    another bit for at least one slot it sent (shadow clients; a deterministic search)."""
    for s in range(256):
        a, b = LongitudinalClient(params, rng=s), LongitudinalClient(params, rng=s)
        bits = {r["interval"]: r["bit"] for x in _A for r in a.step(x)}
        differ = sum(bits[r["interval"]] != r["bit"] for x in _A[:8] + _B[8:] for r in b.step(x))
        if differ and a.order <= 1:
            return s, differ
    raise AssertionError("no diverging seed among the 256 tried")


@pytest.mark.parametrize("when", ["queued before the first flush", "stepped after it"])
def test_restored_device_fed_other_input_never_sends_a_second_bit(sqlite_client, tmp_path,
                                                                 when):
    """docs/protocol.md §7: a device restored from an older copy of its queue file and fed other
    input withholds every report whose slot the service holds with another bit, whether the
    report was queued before the first flush of the run (the queue is settled against the
    service's slots) or computed after it (the client was told the slots): the service never
    sees two bits for one slot, and the device lists what it withheld."""
    c = sqlite_client
    _study(c)
    params = ProtocolParams.from_json(c.get("/v1/studies/s1").json()["params"])
    seed, differ = _diverging_seed(params)
    rec = Recorder(c)
    up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=rec, sleep=lambda s: None)
    dev = DeviceUploader(up, rng=seed)
    for x in _A[:8]:
        dev.step(x)
    _snapshot(up, tmp_path / "snap.db")
    for x in _A[8:]:
        dev.step(x)
    assert up.flush().refused == 0
    up.close()
    up2 = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                   queue_path=tmp_path / "snap.db", http=rec, sleep=lambda s: None)
    dev2 = DeviceUploader(up2)
    if when == "stepped after it":
        assert up2.flush().refused == 0
    for x in _B[8:]:
        dev2.step(x)
    res = up2.flush()
    assert (res.pending, res.offline) == (0, False)
    withheld = [r for r in up2.refused() if r["status"] == Uploader.WITHHELD]
    assert len(withheld) == differ
    assert all(r["error"].startswith("withheld on the device") for r in withheld)
    assert len(dev2.client.withheld) == (differ if when == "stepped after it" else 0)
    assert all(len(bits) == 1 for bits in rec.seen.values())  # one bit per slot, ever
    assert 409 not in rec.statuses
    assert c.app.state.service.rejection_counts("s1")["conflict"] == 0
    up2.close()


def test_files_with_secrets_tokens_or_reports_are_0600(sqlite_client, tmp_path, monkeypatch):
    c = sqlite_client
    _study(c)
    old = os.umask(0o022)
    try:
        up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=c,
                      sleep=lambda s: None)
        dev = DeviceUploader(up)
        dev.step(1)
        made = [p for p in tmp_path.iterdir() if p.name.startswith("q.db")]
        assert {p.name for p in made} >= {"q.db", "q.db-wal"}
        for p in made:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
        up.close()
        (tmp_path / "loose.db").write_bytes(b"")
        (tmp_path / "loose.db").chmod(0o644)
        create_private(tmp_path / "loose.db")  # an existing file is tightened
        assert stat.S_IMODE((tmp_path / "loose.db").stat().st_mode) == 0o600
        write_private(tmp_path / "export.parquet", b"PAR1")
        assert stat.S_IMODE((tmp_path / "export.parquet").stat().st_mode) == 0o600
        engine = make_engine(str(tmp_path / "server.db"))
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")
        engine.dispose()
        assert stat.S_IMODE((tmp_path / "server.db").stat().st_mode) == 0o600
        monkeypatch.delenv("DPFREQ_ADMIN_TOKEN", raising=False)
        assert read_admin_token(str(tmp_path / "admin.token"))
        assert stat.S_IMODE((tmp_path / "admin.token").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_crash_between_saving_the_client_and_enrolling(sqlite_client, tmp_path, monkeypatch):
    """The client is saved before enrolment: a device whose enrolment failed enrols on its next
    start with the same secret, hence the same order."""
    c = sqlite_client
    _study(c)
    up = Uploader("http://testserver", "s1", enrolment_secret=c.enrol_secret,
                  queue_path=tmp_path / "q.db", http=c,
                  sleep=lambda s: None, retries=1)

    def down(*args, **kwargs):
        raise DataError("enrolment failed: the server is unreachable; try again later.")

    with monkeypatch.context() as m:
        m.setattr(Uploader, "enrol", down)
        with pytest.raises(DataError):
            DeviceUploader(up)
    assert up.device is None
    order = LongitudinalClient.from_json(up.get("client")).order
    dev = DeviceUploader(up)
    assert up.device is not None
    assert dev.client.order == order
    assert c.app.state.service.device_order("s1", up.device) == order
    up.close()


def test_a_rate_limited_enrolment_tells_the_device_it_waits_and_why(sqlite_url, tmp_path):
    """The enrolment rate limit (issue: 60 devices took 41 s with no word): every wait of the
    uploader is reported to ``on_wait`` with the service's reason, which states the limit, and
    the final error says the service stayed busy, not unreachable."""
    with make_client(sqlite_url, enrol_rate=0.5, enrol_burst=1) as c:
        r = c.post("/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"}, json={
            "study": "s1", "horizon": 16, "max_changes": 2, "epsilon": 1.0, "method": "auto",
            "start": START, "period": "1d", "min_devices": 1, "enrolment": "open"})
        pid = r.json()["param_id"]
        first = Uploader("http://testserver", "s1", queue_path=tmp_path / "a.db", http=c)
        first.enrol(0, pid)
        waits: list[Wait] = []
        slept: list[float] = []
        second = Uploader("http://testserver", "s1", queue_path=tmp_path / "b.db", http=c,
                          retries=3, sleep=slept.append, on_wait=waits.append)
        with pytest.raises(DataError, match=r"stayed busy \(429: rate limit: at most 0.5 "
                                            r"enrolments per study and client address"):
            second.enrol(0, pid)
    assert [w.attempt for w in waits] == [1, 2]
    assert all(w.status == 429 and w.path == "/v1/studies/s1/devices" for w in waits)
    assert all(w.seconds >= 2 for w in waits)  # Retry-After: 1/0.5 s, rounded up
    assert [w.seconds for w in waits] == slept
    assert all("--enrol-rate, --enrol-burst" in (w.error or "") for w in waits)
    first.close()
    second.close()
