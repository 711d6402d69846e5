"""Load generator: many simulated devices against a running collection service.

Usage: python benchmarks/loadgen.py --server URL --study STUDY --devices N [--horizon T]
       [--concurrency C] [--batch B] [--seed S] [--json]

Every device is a real :class:`~dpfreq.longitudinal.LongitudinalClient` (it draws its order and
randomizes on the "device") fed a synthetic 0/1 sequence with at most ``k`` changes; the
devices enrol and upload their reports in batches over HTTP/1.1, ``concurrency`` at a time,
with retries (exponential backoff) on connection errors, 429 and 5xx. The HTTP client is a few
lines over asyncio streams (:class:`_Connection`: one keep-alive connection per concurrent
device, requests written as prepared bytes): it costs a fifth of aiohttp's CPU time per
request, and the generator shares the machine with the server it measures. Used from the
command line (above), by the crash test and by
``benchmarks/bench_server.py``. Each request body is encoded before the clock starts (with the
device id put in when the device has enrolled), so that the generator spends its CPU time on
HTTP, not on JSON: it shares the machine with the server it measures.

``shape="order0"`` is a throughput shape for benchmarks: every device enrols with order 0 and
sends fair-coin bits (the law of an order-0 report whose partial sum is zero), so each device
has one report per period and batches can hold ``horizon`` reports.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams
from dpfreq.longitudinal.simulate import synthetic_changes
from dpfreq.server.protocol import client_order, client_report, params_from_json

__all__ = ["LoadResult", "device_reports", "run_devices"]


@dataclass
class LoadResult:
    """What a load run did; ``acked`` lists ``(device, interval, bit)`` the server confirmed."""

    devices: int = 0
    reports: int = 0
    acked_reports: int = 0
    requests: int = 0
    failures: int = 0
    seconds: float = 0.0
    enrol_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    acked: list[tuple[int, int, int]] = field(default_factory=list)
    enrolled: dict[int, int] = field(default_factory=dict)

    def rate(self) -> float:
        """Acknowledged reports per second."""
        return self.acked_reports / self.seconds if self.seconds > 0 else 0.0

    def latency_ms(self, q: float) -> float:
        """Quantile ``q`` of the report-upload latency in milliseconds."""
        return float(np.quantile(self.latencies, q) * 1e3) if self.latencies else float("nan")


def device_reports(params: ProtocolParams, devices: int, horizon: int, *, shape: str = "clients",
                   seed: int | None = None) -> list[tuple[int, list[dict[str, Any]]]]:
    """``(order, reports)`` per simulated device for periods ``1..horizon`` (reports without
    the device id, which the server assigns at enrolment)."""
    root = np.random.SeedSequence(seed)
    gen = np.random.Generator(np.random.PCG64(root.spawn(1)[0]))
    out: list[tuple[int, list[dict[str, Any]]]] = []
    pid = params.param_id
    if shape == "order0":
        bits = gen.integers(0, 2, size=(devices, horizon))
        for row in bits:
            out.append((0, [{"order": 0, "interval": t + 1, "bit": int(b), "param_id": pid}
                            for t, b in enumerate(row)]))
        return out
    data = synthetic_changes(devices, horizon, int(params.max_changes), rng=gen)
    for i, child in enumerate(root.spawn(devices)):
        client = LongitudinalClient(params, rng=np.random.Generator(np.random.PCG64(child)))
        reps = []
        for x in data[i]:
            for rep in client.step(int(x)):
                wire = client_report(rep, 0)
                del wire["device"]
                reps.append(wire)
        out.append((client_order(client), reps))
    return out


_DEVICE = b"\x00device\x00"


def _templates(reps: list[dict[str, Any]], batch: int) -> list[tuple[bytes, int]]:
    """A device's request bodies (at most ``batch`` reports each), with a placeholder for the
    device id, and how many reports each holds."""
    out = []
    for i in range(0, len(reps), batch):
        chunk = [{"device": 0, **r} for r in reps[i:i + batch]]
        text = json.dumps({"reports": chunk}, separators=(",", ":")).encode()
        out.append((text.replace(b'"device":0', b'"device":' + _DEVICE), len(chunk)))
    return out


class _Connection:
    """One keep-alive HTTP/1.1 connection to ``host:port`` (reopened after any failure)."""

    def __init__(self, host: str, port: int, tls: bool) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes,
                      headers: bytes) -> tuple[int, bytes]:
        """``(status, body)`` of one request; OSError or ValueError when the connection
        fails (it is then closed)."""
        try:
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.tls or None)
            assert self.reader is not None
            self.writer.write(b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n%s\r\n%s"
                              % (method.encode(), path.encode(), self.host.encode(), len(body),
                                 headers, body))
            head = (await self.reader.readuntil(b"\r\n\r\n")).lower()
            status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                data = await self.reader.readexactly(int(head[at + 17:head.index(b"\r", at + 2)]))
            elif b"\r\ntransfer-encoding: chunked" in head:
                data = await self._chunked()
            else:
                data = await self.reader.read()
            if b"\r\nconnection: close" in head or (at < 0 and b"chunked" not in head):
                self.close()
            return status, data
        except (OSError, ValueError, AssertionError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            self.close()
            raise OSError("connection failed") from None

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return b"".join(parts)
            parts.append((await self.reader.readexactly(size + 2))[:-2])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _send(conn: _Connection, method: str, path: str, *, body: Any, token: str | None,
                retries: int, result: LoadResult, max_backoff: float) -> tuple[int, bytes] | None:
    """``(status, body)`` of a request, retried on connection errors, 429 and 5xx."""
    headers = b"content-type: application/json\r\n"
    if token:
        headers += b"authorization: Bearer %s\r\n" % token.encode()
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    wait = min(0.05, max_backoff)
    for _ in range(retries):
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(60):
                status, answer = await conn.request(method, path, data, headers)
            result.requests += 1
            if status < 500 and status != 429:
                if token is not None and status == 200:
                    result.latencies.append(time.perf_counter() - t0)
                return status, answer
        except (TimeoutError, OSError):
            conn.close()
            result.failures += 1
        await asyncio.sleep(wait)
        wait = min(2 * wait, max_backoff)
    return None


async def run_devices(server: str, study: str, *, devices: int, horizon: int | None = None,
                      concurrency: int = 50, batch: int = 64, shape: str = "clients",
                      seed: int | None = None, retries: int = 50, max_backoff: float = 2.0,
                      enrol_first: bool = False,
                      prepared: list[tuple[int, list[dict[str, Any]]]] | None = None,
                      result: LoadResult | None = None) -> LoadResult:
    """Enrol ``devices`` simulated devices and upload their reports (see the module notes).

    Each device enrols and then uploads its reports; with ``enrol_first`` every device enrols
    before any uploads, and ``seconds`` (hence :meth:`LoadResult.rate`) times the uploads only
    (``enrol_seconds`` the enrolments). ``prepared`` (from :func:`device_reports`) skips the
    simulation, so that a benchmark times only the HTTP part; ``result`` is filled while the
    run goes on (progress for a watcher).
    """
    parts = urlsplit(server)
    tls = parts.scheme == "https"
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80)
    prefix = parts.path.rstrip("/")
    first = _Connection(host, port, tls)
    try:
        got = await first.request("GET", f"{prefix}/v1/studies/{study}", b"", b"")
    finally:
        first.close()
    if got[0] != 200:
        raise DataError(f"study {study!r} could not be read from the server "
                        f"(status {got[0]}).")
    info = json.loads(got[1])
    params = params_from_json(info["params"])
    t_max = int(horizon or info["horizon"])
    work = prepared if prepared is not None else await asyncio.to_thread(
        device_reports, params, devices, t_max, shape=shape, seed=seed)
    result = result if result is not None else LoadResult()
    result.devices = len(work)
    result.reports = sum(len(r) for _, r in work)
    pid = params.param_id
    send = functools.partial(_send, retries=retries, result=result, max_backoff=max_backoff)

    async def enrol(conn: _Connection, order: int) -> tuple[int, str] | None:
        got = await send(conn, "POST", f"{prefix}/v1/studies/{study}/devices",
                         body={"param_id": pid, "order": order}, token=None)
        if got is None or got[0] != 201:
            return None
        answer = json.loads(got[1])
        device, token = int(answer["device"]), str(answer["token"])
        result.enrolled[device] = order
        return device, token

    bodies = [_templates(reps, batch) for _, reps in work]

    async def upload(conn: _Connection, device: int, token: str, k: int) -> None:
        ident, reps, at = str(device).encode(), work[k][1], 0
        for template, n in bodies[k]:
            got = await send(conn, "POST", f"{prefix}/v1/studies/{study}/reports",
                             body=template.replace(_DEVICE, ident), token=token)
            if got is not None and got[0] == 200:
                result.acked_reports += n
                result.acked.extend((device, r["interval"], r["bit"])
                                    for r in reps[at:at + n])
            at += n

    async def pool(jobs: list[Any]) -> None:
        it = iter(jobs)

        async def worker() -> None:
            conn = _Connection(host, port, tls)
            try:
                for job in it:
                    await job(conn)
            finally:
                conn.close()

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))

    async def whole(k: int, conn: _Connection) -> None:
        who = await enrol(conn, work[k][0])
        if who is not None:
            await upload(conn, *who, k)

    t0 = time.perf_counter()
    if not enrol_first:
        await pool([functools.partial(whole, k) for k in range(len(work))])
    else:
        ids: list[tuple[int, str] | None] = [None] * len(work)

        async def enrol_into(k: int, conn: _Connection) -> None:
            ids[k] = await enrol(conn, work[k][0])

        await pool([functools.partial(enrol_into, k) for k in range(len(work))])
        result.enrol_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        await pool([_upload_job(upload, who, k) for k, who in enumerate(ids) if who is not None])
    result.seconds = time.perf_counter() - t0
    return result


def _upload_job(upload: Any, who: tuple[int, str], k: int) -> Any:
    """The job uploading device ``k`` (enrolled as ``who``) on a worker's connection."""
    async def job(conn: _Connection) -> None:
        await upload(conn, who[0], who[1], k)
    return job


def main(argv: list[str] | None = None) -> None:
    """Run simulated devices against a server and print what the run did."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True, help="base URL of the service")
    ap.add_argument("--study", required=True, help="study id (its parameters come from the server)")
    ap.add_argument("--devices", type=int, required=True, help="number of simulated devices")
    ap.add_argument("--horizon", type=int, default=None,
                    help="periods to simulate (default: the study's horizon)")
    ap.add_argument("--concurrency", type=int, default=50, help="devices uploading at once")
    ap.add_argument("--batch", type=int, default=64, help="most reports per request")
    ap.add_argument("--seed", type=int, default=None, help="seed (reproducible load; not private)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    res = asyncio.run(run_devices(args.server, args.study, devices=args.devices,
                                  horizon=args.horizon, concurrency=args.concurrency,
                                  batch=args.batch, seed=args.seed))
    out = {"devices": res.devices, "enrolled": len(res.enrolled), "reports": res.reports,
           "acknowledged": res.acked_reports, "requests": res.requests,
           "transport_failures": res.failures, "seconds": round(res.seconds, 3),
           "reports_per_second": round(res.rate(), 1),
           "p50_ms": round(res.latency_ms(0.5), 2), "p99_ms": round(res.latency_ms(0.99), 2)}
    if args.json:
        print(json.dumps(out))
        return
    for key, value in out.items():
        print(f"{key:>20}  {value}")


if __name__ == "__main__":
    main()
