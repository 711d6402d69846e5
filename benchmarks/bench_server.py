"""Benchmark of the collection service (``dpfreq serve``) over loopback.

Usage: python benchmarks/bench_server.py [--quick] [--devices N] [--concurrency C] [--batch B]
       [--backends sqlite,postgresql] [--workers W]
  default: 10^4 simulated devices × 64 periods; --quick: 10^3 devices.

For each storage backend it starts ``dpfreq serve`` as a subprocess (SQLite in a temporary file;
PostgreSQL in a throwaway cluster from the installed binaries), creates a study and runs the
load generator (``benchmarks/loadgen.py``, ``C`` devices uploading at once, at most ``B``
reports per request) in two shapes:

* ``clients``: real :class:`~dpfreq.longitudinal.LongitudinalClient` devices (each draws its
  order, so it has ``64/2^order`` reports; a device's whole queue goes in one request);
* ``order0``: every device of order 0 with 64 fair-coin reports, so every request carries
  ``B`` = 64 reports (the target's batch size).

All devices enrol first (``enrol s``); then it times the uploads alone and prints acknowledged
reports per second and the p50/p99 latency of report uploads, the server's CPU time over both
phases (``per cpu-s``: reports per CPU-second of the server, enrolments included) and the load
generator's, beside the named baseline measured in the same run: the in-process
``LongitudinalAggregator.ingest`` rate on the same reports, batch by batch as the server gets
them (the ``ratio`` column), while an analyst polls the study's ``/summary`` every
``--poll-every`` seconds (0.2: about ten polls per second of uploads, so that a p99 means
something; ``polls``, ``poll p50``, ``poll p99``, ``poll max`` in ms). Targets: ratio >= 0.20,
upload p99 < 200 ms at 50 concurrent devices, analyst poll p99 <= 250 ms on both backends. The
load generator runs on the same machine (and cores) as the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np

from dpfreq.longitudinal import LongitudinalAggregator, ProtocolParams
from dpfreq.server.auth import new_token

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from loadgen import device_reports, run_devices

from pgtemp import TemporaryPostgres, find_pg_bin

HORIZON = 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and of its live descendants (the workers of
    ``--workers N`` and their writer processes), from Linux's /proc."""
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def descends(p: int) -> bool:
        while p > 1:
            if p == pid:
                return True
            p = parent.get(p, 0)
        return False

    return sum(c for p, c in cpu.items() if descends(p))


@contextlib.contextmanager
def served(db: str, admin: str, workers: int = 1) -> Iterator[tuple[str, int]]:
    """``dpfreq serve --workers N`` on ``db`` at a free loopback port; yields its URL and
    pid."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from dpfreq.cli.main import main; "
         "sys.exit(main(sys.argv[1:]))", "serve", "--db", db, "--port", str(port),
         "--rate", "0", "--enrol-rate", "0", "--log-level", "warning",
         "--workers", str(workers)],
        env={**os.environ, "DPFREQ_ADMIN_TOKEN": admin})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("dpfreq serve did not start") from None
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def create_study(url: str, admin: str, study: str) -> ProtocolParams:
    r = httpx.post(url + "/v1/studies", headers={"Authorization": f"Bearer {admin}"}, json={
        "study": study, "horizon": HORIZON, "max_changes": 4, "epsilon": 1.0,
        "method": "auto", "start": "2020-01-01", "period": "1d", "min_devices": 1,
        "enrolment": "open"})
    r.raise_for_status()
    return ProtocolParams.from_json(r.json()["params"])


def ingest_rate(params: ProtocolParams, work: list[tuple[int, list[dict[str, Any]]]],
                batch: int) -> float:
    """In-process aggregator: enrol every device, ingest each device's reports in batches."""
    agg = LongitudinalAggregator(params)
    devices = np.arange(len(work), dtype=np.int64)
    orders = np.array([o for o, _ in work], dtype=np.int64)
    cols = []
    for dev, (order, reps) in enumerate(work):
        for i in range(0, len(reps), batch):
            chunk = reps[i:i + batch]
            cols.append((np.full(len(chunk), dev), np.full(len(chunk), order),
                         np.array([r["interval"] for r in chunk]),
                         np.array([r["bit"] for r in chunk])))
    t0 = time.perf_counter()
    agg.enrol(devices, orders)
    n = 0
    for d, o, j, b in cols:
        n += agg.ingest(d, o, j, b, param_id=params.param_id)
    return n / (time.perf_counter() - t0)


def run(args: argparse.Namespace) -> None:
    admin = new_token()
    backends = args.backends.split(",")
    print(f"devices={args.devices} horizon={HORIZON} concurrency={args.concurrency} "
          f"batch<={args.batch} workers={args.workers} load average at start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (f"{'backend':<11}{'shape':<9}{'reports':>9}{'requests':>9}{'enrol s':>8}"
              f"{'upload s':>9}"
              f"{'reports/s':>11}{'p50 ms':>8}{'p99 ms':>8}{'srv cpu s':>10}{'gen cpu s':>10}"
              f"{'per cpu-s':>11}{'aggregator/s':>14}{'ratio':>8}{'polls':>6}{'poll p50':>9}"
              f"{'poll p99':>9}{'poll max':>9}")
    print(header)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for backend in backends:
            if backend == "sqlite":
                db = os.path.join(tmp, "bench.db")
            elif find_pg_bin() is None:
                print(f"{backend:<11}skipped: PostgreSQL binaries not installed")
                continue
            else:
                pg = stack.enter_context(TemporaryPostgres())
                db = pg.create_database("bench")
            with served(db, admin, args.workers) as (url, pid):
                for shape in ("clients", "order0"):
                    study = f"bench-{shape}"
                    params = create_study(url, admin, study)
                    work = device_reports(params, args.devices, HORIZON, shape=shape,
                                          seed=args.seed)
                    batch = args.batch if shape == "order0" else HORIZON
                    cpu0, gen0 = cpu_seconds(pid), time.process_time()
                    with Analyst(url, admin, study, args.poll_every) as analyst:
                        res = asyncio.run(run_devices(url, study, devices=args.devices,
                                                      concurrency=args.concurrency, batch=batch,
                                                      enrol_first=True, prepared=work))
                    cpu, gen = cpu_seconds(pid) - cpu0, time.process_time() - gen0
                    base = ingest_rate(params, work, batch)
                    assert res.acked_reports == res.reports, "unacknowledged reports"
                    print(f"{backend:<11}{shape:<9}{res.acked_reports:>9}{res.requests:>9}"
                          f"{res.enrol_seconds:>8.2f}{res.seconds:>9.2f}{res.rate():>11.0f}{res.latency_ms(0.5):>8.1f}"
                          f"{res.latency_ms(0.99):>8.1f}{cpu:>10.2f}{gen:>10.2f}"
                          f"{res.acked_reports / max(cpu, 1e-9):>11.0f}{base:>14.0f}"
                          f"{res.rate() / base:>8.3f}{len(analyst.ms):>6}"
                          f"{analyst.quantile(0.5):>9.1f}{analyst.quantile(0.99):>9.1f}"
                          f"{max(analyst.ms, default=0.0):>9.1f}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


class Analyst:
    """An analyst polling the study's ``/summary`` every ``every`` seconds in a thread while the
    devices upload (the read load the service must not let starve ingest, and must answer
    without waiting for the writer)."""

    def __init__(self, url: str, admin: str, study: str, every: float = 1.0) -> None:
        r = httpx.post(f"{url}/v1/studies/{study}/analyst-tokens",
                       headers={"Authorization": f"Bearer {admin}"})
        r.raise_for_status()
        self.url = f"{url}/v1/studies/{study}/summary"
        self.headers = {"Authorization": f"Bearer {r.json()['token']}"}
        self.every = every
        self.ms: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(timeout=60) as http:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                http.get(self.url, headers=self.headers).raise_for_status()
                self.ms.append(1000 * (time.perf_counter() - t0))
                self.stop.wait(max(0.0, self.every - (time.perf_counter() - t0)))

    def quantile(self, q: float) -> float:
        """Quantile ``q`` of the poll latencies in ms (NaN without polls)."""
        return float(np.quantile(self.ms, q)) if self.ms else float("nan")

    def __enter__(self) -> Analyst:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10^3 devices instead of 10^4")
    ap.add_argument("--devices", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--poll-every", type=float, default=0.2,
                    help="seconds between the analyst's /summary polls")
    ap.add_argument("--workers", type=int, default=1, help="server processes (dpfreq serve "
                    "--workers)")
    args = ap.parse_args()
    if args.devices is None:
        args.devices = 1000 if args.quick else 10_000
    run(args)


if __name__ == "__main__":
    main()
