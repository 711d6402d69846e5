"""End to end timing of the shuffle on localhost (the ``shuffle-speed`` section of
``bench_crossparty.py``; also runnable alone).

    python benchmarks/shuffle_e2e.py [--parties 10] [--registers 1000000] [--users 200000]

Starts ``dpfreq serve --role aggregator`` and two ``--role worker`` (each its own SQLite
database), creates the measurement (``dpfreq sketch shuffle-setup``'s library call), writes one
Parquet log per party, then times from the start of the party processes (``dpfreq sketch share
LOG ...``, all at once) until the aggregator's release is readable. Baselines measured in the
same run: the parties' exact register computation alone (``register_frequencies`` on DuckDB,
the parties' part of the work, one after the other in this process), and the local-noise mode
on the same logs (``build_sketch`` per party and ``merge_sketches``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

KEY = bytes(range(32))  # benchmarks only
ADMIN = "bench-admin-token-" + "z" * 20
_MAIN = "import sys; from dpfreq.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(role: str, db: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN, "serve", "--role", role, "--db", str(db), "--port",
         str(port), "--log-level", "warning"], env={**os.environ, "DPFREQ_ADMIN_TOKEN": ADMIN},
        stdout=log.open("ab"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"dpfreq serve --role {role} exited (see {log})")
        time.sleep(0.1)
    raise RuntimeError(f"dpfreq serve --role {role} did not come up")


def _logs(tmp: Path, parties: int, users: int) -> list[Path]:
    """One Parquet log per party: each reaches ``users`` of a population of 2·users (about
    half overlap), 1 + Poisson(1.5) impressions each."""
    import duckdb

    paths = []
    for p in range(parties):
        path = tmp / f"party{p}.parquet"
        duckdb.sql(f"""COPY (SELECT u AS user_id FROM (
              SELECT CAST(floor(random() * {2 * users}) AS BIGINT) AS u FROM range({users})),
              range(1 + CAST(floor(random() * 4) AS BIGINT))) TO '{path}' (FORMAT parquet)""")
        paths.append(path)
    return paths


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(parties: int, registers: int, users: int) -> dict[str, Any]:
    """Every timing of one end-to-end run (seconds)."""
    from dpfreq.crossparty import Coverage, CrossPartyParams, key_fingerprint, write_hash_key
    from dpfreq.crossparty.shuffle import ShuffleParams
    from dpfreq.server.roles.client import fetch_result, setup_measurement

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        write_hash_key(tmp / "hash.key", KEY)
        t0 = time.perf_counter()
        paths = _logs(tmp, parties, users)
        out["logs written"] = time.perf_counter() - t0
        params = ShuffleParams(
            measurement="speed", registers=registers, sampling_start=0, sampling_width=1,
            max_frequency=5, epsilon=math.log(3), delta=1e-10,
            parties=[f"party{p}" for p in range(parties)], per_party=False, coverage=Coverage(),
            deadline=(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat(),
            hash="sha256-prefix/v1", key_id=key_fingerprint(KEY))
        params.save(tmp / "params.json")
        t0 = time.perf_counter()
        procs = {name: _serve(role, tmp / f"{name}.db", tmp / f"{name}.log")
                 for name, role in (("aggregator", "aggregator"), ("worker0", "worker"),
                                    ("worker1", "worker"))}
        out["3 services started"] = time.perf_counter() - t0
        try:
            urls = {k: v[1] for k, v in procs.items()}
            tokens = setup_measurement(params, aggregator=(urls["aggregator"], ADMIN),
                                       workers=[(urls["worker0"], ADMIN),
                                                (urls["worker1"], ADMIN)])
            for name, (t_a, t_b) in tokens["parties"].items():
                (tmp / f"{name}.0.token").write_text(t_a)
                (tmp / f"{name}.1.token").write_text(t_b)
            cpu0, t0 = _children_cpu(), time.perf_counter()
            running = [subprocess.Popen(
                [sys.executable, "-c", _MAIN, "sketch", "share", str(path), "--party", name,
                 "--params", str(tmp / "params.json"), "--key", str(tmp / "hash.key"),
                 "--user", "user_id", "--worker", urls["worker0"], "--worker",
                 urls["worker1"], "--token-file", str(tmp / f"{name}.0.token"),
                 "--token-file", str(tmp / f"{name}.1.token"), "--state",
                 str(tmp / f"{name}.state"), "--engine", "duckdb", "--wait", "300"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for name, path in zip(params.parties, paths, strict=True)]
            for proc in running:
                _, err = proc.communicate()
                if proc.returncode != 0:
                    raise RuntimeError(err.decode()[-500:])
            out["parties shared and uploaded"] = time.perf_counter() - t0
            while True:
                status, payload = fetch_result(urls["aggregator"], "speed", tokens["analyst"])
                if status != 409:
                    break
                time.sleep(0.05)
            if status != 200:
                raise RuntimeError(str(payload)[:500])
            out["end to end (parties start → release)"] = time.perf_counter() - t0
            out["party processes CPU"] = _children_cpu() - cpu0
            out["reach"] = payload["value"][0]
        finally:
            for proc, _ in procs.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        out.update(_baselines(paths, params, CrossPartyParams))
    return out


def _baselines(paths: list[Path], params: Any, cls: Any) -> dict[str, float]:
    """The parties' register computation alone, and the local-noise mode, in this process."""
    from dpfreq.crossparty import build_sketch, merge_sketches
    from dpfreq.crossparty.registers import LogSpec, register_frequencies

    space = params.register_space()
    c0, t0 = _self_cpu(), time.perf_counter()
    for path in paths:
        register_frequencies(str(path), spec=LogSpec(user="user_id"), params=space, key=KEY,
                             engine="duckdb")
    out = {"baseline: registers of every party, sequentially": time.perf_counter() - t0,
           "baseline CPU": _self_cpu() - c0}
    local = cls(measurement="speed", registers=params.registers, sampling_start=0,
                sampling_width=1, max_frequency=params.max_frequency,
                epsilon_reach=params.epsilon / 4, epsilon_frequency=3 * params.epsilon / 4,
                hash="sha256-prefix/v1", key_id=params.key_id)
    t0 = time.perf_counter()
    sketches = [build_sketch(str(p), user="user_id", party=f"p{i}", params=local, key=KEY,
                             engine="duckdb", rng=i) for i, p in enumerate(paths)]
    merge_sketches(sketches, confidence=0.95)
    out["local noise: build every sketch and merge, sequentially"] = time.perf_counter() - t0
    return out


def report(out: dict[str, Any], parties: int, registers: int, users: int) -> None:
    base = out["baseline: registers of every party, sequentially"]
    print(f"\n### Shuffle end to end on localhost: {parties} parties × {registers:,} registers "
          f"(3 services, {parties} party processes, {users:,} users per party)\n")
    print("| step | wall s | ratio to the parties' registers alone |")
    print("|---|---|---|")
    for name, value in out.items():
        if name in ("reach", "baseline CPU", "party processes CPU"):
            continue
        print(f"| {name} | {value:.2f} | {value / base:.2f} |")
    print(f"\n(CPU s: party processes {out['party processes CPU']:.1f}, baseline "
          f"{out['baseline CPU']:.1f}; reach estimate {out['reach']:,.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", type=int, default=10)
    ap.add_argument("--registers", type=int, default=10**6)
    ap.add_argument("--users", type=int, default=200_000)
    args = ap.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    report(run(args.parties, args.registers, args.users), args.parties, args.registers,
           args.users)
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
