"""Load generator: many simulated devices against a running collection service.

Every device is a real :class:`~dpfreq.longitudinal.LongitudinalClient` (it draws its order and
randomizes on the "device") fed a synthetic 0/1 sequence with at most ``k`` changes; the
devices enrol and upload their reports in batches over HTTP (aiohttp: its client costs a
fraction of the server's work per request, so one generator process can load a server on the
same machine), ``concurrency`` at a time, with retries (exponential backoff) on connection
errors, 429 and 5xx. Used by ``dpfreq longitudinal
devices``, the crash test and ``benchmarks/bench_server.py``.

``shape="order0"`` is a throughput shape for benchmarks: every device enrols with order 0 and
sends fair-coin bits (the law of an order-0 report whose partial sum is zero), so each device
has one report per period and batches can hold ``horizon`` reports.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np

from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams
from dpfreq.longitudinal.simulate import synthetic_changes

from .protocol import client_order, client_report, params_from_json

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


async def _send(http: aiohttp.ClientSession, method: str, url: str, *, body: Any,
                token: str | None, retries: int, result: LoadResult,
                max_backoff: float) -> tuple[int, Any] | None:
    """``(status, JSON body)`` of a request, retried on connection errors, 429 and 5xx."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    wait = min(0.05, max_backoff)
    for _ in range(retries):
        t0 = time.perf_counter()
        try:
            async with http.request(method, url, json=body, headers=headers) as resp:
                data = await resp.json(content_type=None)
                result.requests += 1
                if resp.status < 500 and resp.status != 429:
                    if token is not None and resp.status == 200:
                        result.latencies.append(time.perf_counter() - t0)
                    return resp.status, data
        except (TimeoutError, aiohttp.ClientError, ValueError):
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
    base = server.rstrip("/")
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        async with http.get(f"{base}/v1/studies/{study}") as resp:
            if resp.status != 200:
                raise DataError(f"study {study!r} could not be read from the server "
                                f"(status {resp.status}).")
            info = await resp.json()
        params = params_from_json(info["params"])
        t_max = int(horizon or info["horizon"])
        work = prepared if prepared is not None else await asyncio.to_thread(
            device_reports, params, devices, t_max, shape=shape, seed=seed)
        result = result if result is not None else LoadResult()
        result.devices = len(work)
        result.reports = sum(len(r) for _, r in work)
        pid = params.param_id
        send = functools.partial(_send, http, retries=retries, result=result,
                                 max_backoff=max_backoff)

        async def enrol(order: int) -> tuple[int, str] | None:
            got = await send("POST", f"{base}/v1/studies/{study}/devices",
                             body={"param_id": pid, "order": order}, token=None)
            if got is None or got[0] != 201:
                return None
            device, token = int(got[1]["device"]), str(got[1]["token"])
            result.enrolled[device] = order
            return device, token

        async def upload(device: int, token: str, reps: list[dict[str, Any]]) -> None:
            for i in range(0, len(reps), batch):
                chunk = [{**r, "device": device} for r in reps[i:i + batch]]
                got = await send("POST", f"{base}/v1/studies/{study}/reports",
                                 body={"reports": chunk}, token=token)
                if got is not None and got[0] == 200:
                    result.acked_reports += len(chunk)
                    result.acked.extend((device, r["interval"], r["bit"]) for r in chunk)

        async def pool(jobs: list[Any]) -> None:
            it = iter(jobs)

            async def worker() -> None:
                for job in it:
                    await job()

            await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))

        async def whole(order: int, reps: list[dict[str, Any]]) -> None:
            who = await enrol(order)
            if who is not None:
                await upload(*who, reps)

        t0 = time.perf_counter()
        if not enrol_first:
            await pool([functools.partial(whole, o, r) for o, r in work])
        else:
            ids: list[tuple[int, str] | None] = [None] * len(work)

            async def enrol_into(k: int) -> None:
                ids[k] = await enrol(work[k][0])

            await pool([functools.partial(enrol_into, k) for k in range(len(work))])
            result.enrol_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            await pool([functools.partial(upload, *who, work[k][1])
                        for k, who in enumerate(ids) if who is not None])
        result.seconds = time.perf_counter() - t0
    return result
