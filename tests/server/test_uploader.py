"""Device side: the uploader's on-disk queue survives being offline, lost acknowledgements and
restarts without storing anything twice."""

from __future__ import annotations

import httpx
import numpy as np

from conftest import ADMIN, START, stored
from dpfreq.server.uploader import DeviceUploader, Uploader


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
    r = c.post("/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"}, json={
        "study": "s1", "horizon": 16, "max_changes": 2, "epsilon": 1.0, "randomizer": "auto",
        "start": START, "period": "1d", "min_devices": 1})
    assert r.status_code == 201


def test_offline_device_resends_later_without_duplicates(sqlite_client, tmp_path, seed):
    c = sqlite_client
    _study(c)
    flaky = Flaky(c)
    sleeps: list[float] = []
    up = Uploader("http://testserver", "s1", queue_path=tmp_path / "q.db", http=flaky,
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
    up2 = Uploader("http://testserver", "s1", queue_path=tmp_path / "q.db", http=flaky,
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
    up = Uploader("http://testserver", "s1", queue_path=tmp_path / "q.db", http=c,
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
