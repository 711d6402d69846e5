"""End to end on localhost: ``dpfreq serve --role aggregator|worker`` ×3 and 10 party
processes ``dpfreq sketch share``; the release equals the offline computation on the same noise
(the parties' exact registers recomputed from the rows of their logs in the parameters' period,
plus the dummies the two workers stored). Then the crash pattern of the collection service:
workers and the aggregator killed with SIGKILL while parties upload and while the workers send,
restarted on their databases; nothing acknowledged is lost, nothing is counted twice, the
release is the offline one."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest
from shuffle_services import offline_release, wait_result

from conftest import ADMIN, Served
from dpfreq.cli.main import main
from dpfreq.crossparty import Coverage, write_hash_key
from dpfreq.crossparty.registers import LogSpec, register_frequencies
from dpfreq.crossparty.shuffle import ShuffleParams, share_log
from dpfreq.server.roles.client import save_state, setup_measurement, upload_shares

PARTIES = [f"pub{i}" for i in range(10)]


def _cli(argv: list[str]) -> int:
    try:
        return int(main(argv) or 0)
    except SystemExit as exc:
        return int(exc.code or 0)


def _logs(tmp_path, gen: np.random.Generator) -> list[str]:
    """Ten overlapping logs: each publisher reaches 1500 of 10,000 users, 1..4 impressions on
    days 0..39."""
    paths = []
    for p in PARTIES:
        users = gen.choice(10_000, 1500, replace=False)
        rows = np.repeat(users, gen.integers(1, 5, users.size))
        path = tmp_path / f"{p}.csv"
        pd.DataFrame({"user_id": rows, "day": gen.integers(0, 40, rows.size)}).to_csv(
            path, index=False)
        paths.append(str(path))
    return paths


def _services(tmp_path) -> dict[str, Served]:
    out = {}
    for name, role in (("aggregator", "aggregator"), ("worker0", "worker"),
                       ("worker1", "worker")):
        out[name] = Served(str(tmp_path / f"{name}.db"), tmp_path / f"{name}.log",
                           args=("--role", role))
    threads = [threading.Thread(target=s.start) for s in out.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _registers(paths: list[str], params: ShuffleParams, key: bytes) -> np.ndarray:
    """The parties' exact registers: the rows of the parameters' period, as a build counts
    them (the day column when there is a period)."""
    period = params.coverage.period
    spec = LogSpec(user="user_id", time=None if period is None else "day", period=period)
    space = params.register_space()
    return np.vstack([register_frequencies(p, spec=spec, params=space, key=key,
                                           engine="duckdb").values for p in paths])


def test_three_services_and_ten_party_processes(tmp_path, capsys):
    started = time.monotonic()
    services = _services(tmp_path)
    try:
        key_file = tmp_path / "hash.key"
        assert _cli(["sketch", "key", str(key_file)]) == 0
        deadline = "2099-01-01T00:00:00Z"
        assert _cli(["sketch", "shuffle-params", "--measurement", "spring", "--registers",
                     "16384", "--sampling-start", "0", "--sampling-width", "1",
                     "--max-frequency", "4", "--epsilon", "1.0986", "--delta", "1e-9",
                     *[a for p in PARTIES for a in ("--party", p)], "--histograms", "union",
                     "--start", "0", "--end", "28", "--deadline", deadline, "--key",
                     str(key_file), "--out", str(tmp_path / "params.json")]) == 0
        for name in services:
            (tmp_path / f"{name}.admin").write_text(ADMIN)
        assert _cli(["sketch", "shuffle-setup", "--params", str(tmp_path / "params.json"),
                     "--aggregator", services["aggregator"].url, "--aggregator-token-file",
                     str(tmp_path / "aggregator.admin"),
                     "--worker", services["worker0"].url, "--worker", services["worker1"].url,
                     "--worker-token-file", str(tmp_path / "worker0.admin"),
                     "--worker-token-file", str(tmp_path / "worker1.admin"),
                     "--out-dir", str(tmp_path / "tokens")]) == 0
        paths = _logs(tmp_path, np.random.default_rng(11))
        procs = [subprocess.Popen(
            [sys.executable, "-c", "import sys; from dpfreq.cli.main import main; "
             "sys.exit(main(sys.argv[1:]))", "sketch", "share", path, "--party", p,
             "--params", str(tmp_path / "params.json"), "--key", str(key_file),
             "--user", "user_id", "--time", "day", "--worker", services["worker0"].url,
             "--worker", services["worker1"].url,
             "--token-file", str(tmp_path / "tokens" / f"{p}.worker0.token"),
             "--token-file", str(tmp_path / "tokens" / f"{p}.worker1.token"),
             "--state", str(tmp_path / f"{p}.state"), "--wait", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
            for p, path in zip(PARTIES, paths, strict=True)]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
            assert b'"worker0": "acknowledged", "worker1": "acknowledged"' in out
        status, payload = wait_result(services["aggregator"].url,
                                      (tmp_path / "tokens" / "analyst.token").read_text().strip(),
                                      measurement="spring")
        assert status == 200, payload
        capsys.readouterr()
        assert _cli(["sketch", "shuffle-result", "--aggregator", services["aggregator"].url,
                     "--measurement", "spring", "--token-file",
                     str(tmp_path / "tokens" / "analyst.token")]) == 0
        text = capsys.readouterr().out
        assert "union\t1+" in text
        assert "epsilon=1.0986, delta=1e-09" in text
        assert "# measurement 'spring' covering period [0, 28) of the time column" in text
    finally:
        for s in services.values():
            s.stop()
    params = ShuffleParams.load(tmp_path / "params.json")
    key = bytes.fromhex(key_file.read_text().strip())
    registers = _registers(paths, params, key)
    offline = offline_release(registers, params, PARTIES,
                              [services["worker0"].db, services["worker1"].db])
    assert payload["histograms"] == [h.tolist() for h in offline.histograms]
    assert payload["value"] == offline.to_dict()["value"]
    assert payload["frequency"] == offline.to_dict()["frequency"]
    every = _registers(paths[:1], dataclasses.replace(params, coverage=Coverage()), key)
    assert registers[0].sum() < every[0].sum()  # the days 28..39 did not count
    logs = [pd.read_csv(p) for p in paths]
    truth = len(set().union(*[set(f["user_id"][f["day"] < 28]) for f in logs]))
    assert abs(payload["value"][0] / truth - 1) < 0.1  # a sanity check, not a statistical one
    print(f"end to end in {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize("victims", [("worker1", "aggregator")])
def test_kill_9_of_workers_and_aggregator_loses_nothing(tmp_path, victims):
    """Worker 1 killed while the parties upload, the aggregator killed while the workers send;
    both restarted. The parties' state files re-send what was not acknowledged."""
    services = _services(tmp_path)
    key = bytes(range(32))
    write_hash_key(tmp_path / "hash.key", key)
    from dpfreq.crossparty import key_fingerprint

    params = ShuffleParams(measurement="spring", registers=8192, sampling_start=0,
                           sampling_width=1, max_frequency=3, epsilon=1.0, delta=1e-9,
                           parties=PARTIES[:6], per_party=True, coverage=Coverage(),
                           deadline="2099-01-01",
                           hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    try:
        tokens = setup_measurement(params, aggregator=(services["aggregator"].url, ADMIN),
                                   workers=[(services["worker0"].url, ADMIN),
                                            (services["worker1"].url, ADMIN)])
        paths = _logs(tmp_path, np.random.default_rng(5))[:6]
        urls = [services["worker0"].url, services["worker1"].url]
        for i, (p, path) in enumerate(zip(params.parties, paths, strict=True)):
            shares = share_log(path, user="user_id", party=p, params=params, key=key, rng=i)
            save_state(tmp_path / f"{p}.state", shares, [])
            if i == 2:
                services[victims[0]].kill9()
                threading.Timer(1.0, services[victims[0]].start).start()
            outcome = upload_shares(tmp_path / f"{p}.state", urls, tokens["parties"][p],
                                    wait=60)
            assert outcome["worker0"] == outcome["worker1"] == "acknowledged", outcome
        services[victims[1]].kill9()
        time.sleep(1.0)  # the workers plan, exchange, and retry the aggregator meanwhile
        services[victims[1]].start()
        status, payload = wait_result(services["aggregator"].url, tokens["analyst"],
                                      measurement="spring")
        assert status == 200, payload
    finally:
        for s in services.values():
            s.stop()
    offline = offline_release(_registers(paths, params, key), params, list(params.parties),
                              [services["worker0"].db, services["worker1"].db])
    assert payload["histograms"] == [h.tolist() for h in offline.histograms]
    assert payload["value"] == offline.to_dict()["value"]
    assert payload["party_kplus_reach"] == offline.to_dict()["party_kplus_reach"]
