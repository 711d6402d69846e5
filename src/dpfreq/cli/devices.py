"""`dpfreq longitudinal devices`: a load generator of simulated devices against a running
collection service (``dpfreq serve``; needs the ``[server]`` extra)."""

from __future__ import annotations

import asyncio
import json

import click

from dpfreq.cli._common import COUNT, IntegerType, warn_if_seeded
from dpfreq.errors import EngineUnavailableError

__all__ = ["command"]


@click.command(name="devices")
@click.option("--server", required=True, metavar="URL", help="Base URL of the service.")
@click.option("--study", required=True, help="Study id (its parameters are read from the server).")
@click.option("--devices", "n_devices", type=IntegerType(1, 10**7), required=True,
              help="Number of simulated devices.")
@click.option("--horizon", type=IntegerType(1, 1 << 16), default=None,
              help="Periods to simulate (default: the study's horizon).")
@click.option("--concurrency", type=IntegerType(1, 10_000), default=50, show_default=True,
              help="Devices uploading at the same time.")
@click.option("--batch", type=IntegerType(1, 4096), default=64, show_default=True,
              help="Most reports per request.")
@click.option("--seed", type=COUNT, default=None,
              help="Seed the simulated devices (reproducible load; not private).")
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the result as JSON.")
def command(server: str, study: str, n_devices: int, horizon: int | None, concurrency: int,
            batch: int, seed: int | None, as_json: bool) -> None:
    """Simulate DEVICES devices (each a LongitudinalClient with its own order and randomizer)
    enrolling in STUDY and uploading every report of the first HORIZON periods."""
    try:
        from dpfreq.server.loadgen import run_devices
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq longitudinal devices needs the server and bench extras: "
            "pip install 'dpfreq[server,bench]'"
        ) from exc
    warn_if_seeded(seed)
    res = asyncio.run(run_devices(server, study, devices=n_devices, horizon=horizon,
                                  concurrency=concurrency, batch=batch, seed=seed))
    out = {"devices": res.devices, "enrolled": len(res.enrolled), "reports": res.reports,
           "acknowledged": res.acked_reports, "requests": res.requests,
           "transport_failures": res.failures, "seconds": round(res.seconds, 3),
           "reports_per_second": round(res.rate(), 1),
           "p50_ms": round(res.latency_ms(0.5), 2), "p99_ms": round(res.latency_ms(0.99), 2)}
    if as_json:
        click.echo(json.dumps(out))
        return
    for key, value in out.items():
        click.echo(f"{key:>20}  {value}")
