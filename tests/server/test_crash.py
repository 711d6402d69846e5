"""Crash safety: ``dpfreq serve`` killed with SIGKILL during a load run and restarted, several
times. Every report the server acknowledged must be stored exactly once, the running sums must
equal the stored reports, and the estimate must equal the in-process aggregator's."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import sqlalchemy as sa

from conftest import ADMIN, START, Served
from dpfreq.longitudinal import LongitudinalAggregator, ProtocolParams
from dpfreq.server import storage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from loadgen import LoadResult, run_devices  # the benchmarks' load generator


def test_kill_9_during_load_loses_no_acknowledged_report(db_url, tmp_path, seed):
    kills = 5  # the service target: nothing acknowledged is lost across 5 kill -9 restarts
    srv = Served(db_url, tmp_path / "serve.log")
    srv.start()
    try:
        r = httpx.post(srv.url + "/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"},
                       json={"study": "crash", "horizon": 32, "max_changes": 2, "epsilon": 1.0,
                             "method": "auto", "start": START, "period": "1d",
                             "min_devices": 1, "enrolment": "open"})
        assert r.status_code == 201
        params = ProtocolParams.from_json(r.json()["params"])
        result = LoadResult()
        box: dict[str, object] = {}

        def load() -> None:
            try:
                asyncio.run(run_devices(srv.url, "crash", devices=80, concurrency=16, batch=4,
                                        seed=seed % 2**32, retries=1000, max_backoff=0.1,
                                        result=result))
            except BaseException as exc:  # reported by the main thread
                box["error"] = exc

        worker = threading.Thread(target=load)
        worker.start()
        while result.reports == 0 and worker.is_alive():
            time.sleep(0.01)
        killed_at: list[int] = []
        for i in range(kills):
            target = result.reports * (i + 1) // (kills + 2)
            deadline = time.monotonic() + 60
            while result.acked_reports < target and worker.is_alive() and \
                    time.monotonic() < deadline:
                time.sleep(0.002)
            assert worker.is_alive()  # the kill lands during the load run
            srv.kill9()
            killed_at.append(result.acked_reports)
            srv.start()
        worker.join(120)
        assert not worker.is_alive()
        print("acknowledged reports at each kill:", killed_at, "of", result.reports)
        assert "error" not in box, box.get("error")
        assert result.acked_reports == result.reports  # every report acknowledged eventually
        estimate = httpx.get(srv.url + "/v1/studies/crash/estimates",
                             headers={"Authorization": f"Bearer {ADMIN}"}).json()
    finally:
        srv.stop()
    engine = storage.make_engine(db_url)
    with engine.connect() as conn:
        # every stored report, the upload rows unpacked: (device, interval, order, bit)
        cols = storage.report_columns(conn, "crash")
        rows = list(zip(*(cols[c].tolist() for c in ("device", "interval", "order", "bit")),
                        strict=True))
        devs = conn.execute(sa.select(storage.devices.c.device, storage.devices.c.order)).all()
        sums = {(h, j): (t, n) for h, j, t, n in conn.execute(sa.select(
            storage.sums.c.order, storage.sums.c.interval, storage.sums.c.total,
            storage.sums.c.reports))}
    engine.dispose()
    slots = {(d, j): b for d, j, _, b in rows}
    assert len(slots) == len(rows)
    assert len(result.acked) == len(set(result.acked))
    assert all(slots.get((d, j)) == b for d, j, b in result.acked)  # acknowledged ⇒ stored
    # the running sums equal the stored reports
    recomputed: dict[tuple[int, int], list[int]] = {}
    for _, j, h, b in rows:
        acc = recomputed.setdefault((h, j), [0, 0])
        acc[0] += 2 * b - 1
        acc[1] += 1
    assert {k: tuple(v) for k, v in recomputed.items()} == {
        k: v for k, v in sums.items() if v[1] > 0}
    # the estimate equals the in-process aggregator on the stored enrolment and reports
    agg = LongitudinalAggregator(params)
    agg.enrol(np.array([d for d, _ in devs]), np.array([h for _, h in devs]))
    arr = np.array(rows, dtype=np.int64)
    agg.ingest(arr[:, 0], arr[:, 2], arr[:, 1], arr[:, 3], param_id=params.param_id)
    ref = agg.estimate(confidence=0.95)
    np.testing.assert_allclose(estimate["columns"]["estimate"], np.asarray(ref.value),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(estimate["columns"]["unclamped"], ref.unclamped, rtol=0,
                               atol=1e-9)
