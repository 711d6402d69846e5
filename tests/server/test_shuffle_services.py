"""The shuffle's three roles as services (uvicorn in threads, SQLite): what each role
receives, and the faults — a duplicated, different or malformed share, a late one, a party
that never uploads, a worker down and resumed, an aggregator restarted."""

from __future__ import annotations

import dataclasses
import json
import time

import httpx
import numpy as np
import pytest
from shuffle_services import (
    ADMINS,
    RoleThread,
    offline_release,
    shuffle_params,
    stored_draws,
    wait_result,
)

from dpfreq.cli.sketch_shuffle import _lines
from dpfreq.crossparty import Coverage
from dpfreq.crossparty.shuffle import share_registers
from dpfreq.crossparty.shuffle.aggregate import read_output
from dpfreq.crossparty.shuffle.party import read_party_share
from dpfreq.server.roles.client import save_state, setup_measurement, upload_shares


@pytest.fixture
def roles(tmp_path):
    started = {"aggregator": RoleThread("aggregator", str(tmp_path / "agg.db"), "aggregator",
                                        record=True),
               "worker0": RoleThread("worker", str(tmp_path / "w0.db"), "worker0", record=True),
               "worker1": RoleThread("worker", str(tmp_path / "w1.db"), "worker1")}
    for r in started.values():
        r.start()
    yield started
    for r in started.values():
        r.stop()


def _setup(roles, params):
    return setup_measurement(
        params, aggregator=(roles["aggregator"].url, ADMINS["aggregator"]),
        workers=[(roles["worker0"].url, ADMINS["worker0"]),
                 (roles["worker1"].url, ADMINS["worker1"])])


def _upload(tmp_path, roles, params, tokens, x, parties=None, wait=10.0):
    out = {}
    for i, p in enumerate(params.parties):
        if parties is not None and p not in parties:
            continue
        shares = share_registers(x[i], params=params, party=p, rng=i)
        save_state(tmp_path / f"{p}.state", shares, [])
        out[p] = upload_shares(tmp_path / f"{p}.state",
                               [roles["worker0"].url, roles["worker1"].url],
                               tokens["parties"][p], wait=wait)
    return out


def _check_equal(payload, offline):
    assert payload["value"] == offline.to_dict()["value"]
    assert payload["histograms"] == [h.tolist() for h in offline.histograms]
    assert payload["frequency"] == offline.to_dict()["frequency"]
    assert payload["error"]["lower"] == offline.to_dict()["error"]["lower"]


def test_each_role_receives_only_its_view(tmp_path, roles, rng):
    """The aggregator: public set-up (parameters, token requests) and per entity one output
    frame per worker, whose sums are the published noisy histograms — nothing else. Worker 0:
    one share of each party (a seed or the vector share), and from worker 1 its public draws
    (secret, total dummies, mask seed: never the counts per value). The release states the
    parameters' coverage, as 'shuffle-result' shows it."""
    params = shuffle_params(["tv", "web", "app"], per_party=True,
                            coverage=Coverage(period=(0, 28), period_unit="integer"))
    tokens = _setup(roles, params)
    x = rng.poisson(0.3, (3, params.registers)).clip(0, params.max_frequency)
    _upload(tmp_path, roles, params, tokens, x)
    status, payload = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 200, payload
    _check_equal(payload, offline_release(x, params, list(params.parties),
                                          [roles["worker0"].db, roles["worker1"].db]))
    assert payload["mechanism_params"]["coverage"] == params.coverage.to_dict()
    assert "# measurement 'campaign' covering period [0, 28) of the time column" in _lines(
        payload)

    inbox = roles["aggregator"].recorder.messages
    outputs = [m for m in inbox if m["method"] == "PUT"]
    others = [m for m in inbox if m["method"] != "PUT"]
    assert len(outputs) == 2 * params.histograms
    for m in others:  # set-up and reads: public parameters, or nothing
        assert m["body"] in (b"", b"null") or set(json.loads(m["body"])) <= {"params",
                                                                              "position"}
    frames = {(f.header["entity"], f.header["position"]): f
              for f in (read_output(m["body"], params) for m in outputs)}
    for e in range(params.histograms):
        header0, header1 = (dict(frames[(e, w)].header) for w in (0, 1))
        assert {k: v for k, v in header0.items() if k not in ("position", "sha256")} == {
            k: v for k, v in header1.items() if k not in ("position", "sha256")}
        y = sum(np.frombuffer(frames[(e, w)].payload, dtype="<u4") for w in (0, 1))
        hist = payload["histograms"][e]
        assert np.bincount(y, minlength=len(hist)).tolist() == hist

    view = roles["worker0"].recorder.messages
    shares = [m for m in view if m["path"].endswith("/share")]
    assert len(shares) == 3
    for m in shares:
        frame = read_party_share(m["body"], params)
        i = params.party_index(frame.header["party"])
        assert frame.header["form"] == ("seed" if i % 2 == 0 else "vector")
    plans = [m for m in view if m["path"].endswith("/peer/plan")]
    assert plans == []  # worker 0 fixes the plan; it only reads worker 1's manifest
    w1 = stored_draws(roles["worker1"].db, "campaign").public()
    assert set(w1) == {"position", "secret", "dummies"}
    assert all(set(d) == {"count", "mask"} for d in w1["dummies"])


def test_duplicated_different_and_malformed_shares(tmp_path, roles, rng):
    params = shuffle_params(["tv", "web"])
    tokens = _setup(roles, params)
    x = rng.poisson(0.3, (2, params.registers)).clip(0, params.max_frequency)
    url = f"{roles['worker0'].url}/v1/measurements/campaign/share"
    auth = {"Authorization": f"Bearer {tokens['parties']['tv'][0]}"}
    other_period = dataclasses.replace(params, coverage=Coverage(period=(0, 7),
                                                                 period_unit="integer"))
    r = httpx.put(url, content=share_registers(x[0], params=other_period, party="tv",
                                               rng=1).frame(0), headers=auth)
    assert r.status_code == 422  # another coverage: other parameters, never summed
    assert "made for other parameters" in r.json()["error"]
    shares = share_registers(x[0], params=params, party="tv", rng=1)
    assert httpx.put(url, content=shares.frame(0), headers=auth).json()["new"] is True
    again = httpx.put(url, content=shares.frame(0), headers=auth)  # an identical retry
    assert again.status_code == 200
    assert again.json()["new"] is False
    other = share_registers(x[0], params=params, party="tv", rng=2)
    r = httpx.put(url, content=other.frame(0), headers=auth)
    assert r.status_code == 409
    assert "already uploaded another share" in r.json()["error"]
    r = httpx.put(url, content=b"not a frame", headers=auth)
    assert r.status_code == 422
    assert "not a dpfreq shuffle frame" in r.json()["error"]
    web = share_registers(x[1], params=params, party="web", rng=3)
    r = httpx.put(url, content=web.frame(0), headers=auth)  # tv's token, web's share
    assert r.status_code == 422
    assert "another party" in r.json()["error"]
    r = httpx.put(url, content=b"x" * (4 * params.registers + 70_000), headers=auth)
    assert r.status_code == 413
    # the state file re-sends tv's first share to worker 1 (worker 0 acknowledged it already)
    save_state(tmp_path / "tv.state", shares, [0])
    assert upload_shares(tmp_path / "tv.state", [roles["worker0"].url, roles["worker1"].url],
                         tokens["parties"]["tv"], wait=10)["worker1"] == "acknowledged"
    _upload(tmp_path, roles, params, tokens, x, parties=["web"])
    status, payload = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 200
    _check_equal(payload, offline_release(x, params, ["tv", "web"],
                                          [roles["worker0"].db, roles["worker1"].db]))
    metrics = httpx.get(roles["worker0"].url + "/metrics").text
    assert 'dpfreq_shuffle_shares_refused_total{reason="duplicate"} 1.0' in metrics
    audit = httpx.get(roles["worker0"].url + "/v1/audit",
                      headers={"Authorization": f"Bearer {ADMINS['worker0']}"}).json()["audit"]
    assert any(line["action"] == "PUT /v1/measurements/campaign/share" for line in audit)


def test_missing_party_late_share_and_a_worker_down(tmp_path, roles, rng):
    """app never uploads; web uploads to worker 0 only (worker 1 is down) and worker 1 comes
    back after the deadline; tv uploads to both. The release measures tv alone and says why
    the others are missing; a share after the deadline is refused."""
    # room for the two uploads before the deadline on a loaded 2-core machine
    params = shuffle_params(["tv", "web", "app"], deadline_seconds=8.0)
    tokens = _setup(roles, params)
    x = rng.poisson(0.3, (3, params.registers)).clip(0, params.max_frequency)
    _upload(tmp_path, roles, params, tokens, x, parties=["tv"])
    roles["worker1"].stop()
    outcome = _upload(tmp_path, roles, params, tokens, x, parties=["web"], wait=1.0)["web"]
    assert outcome["worker0"] == "acknowledged"
    assert outcome["worker1"].startswith("unreachable")
    time.sleep(max(0.0, (params.deadline_at.timestamp() - time.time())) + 0.5)
    roles["worker1"].start()  # resumed: the plan is made now
    status, payload = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 200, payload
    assert payload["parties"] == ["tv"]
    assert payload["missing"] == [["web", "one"], ["app", "none"]]
    assert "only one worker" in payload["mechanism_params"]["missing"]["web"]
    _check_equal(payload, offline_release(x, params, ["tv"],
                                          [roles["worker0"].db, roles["worker1"].db]))
    late = upload_shares(tmp_path / "web.state", [roles["worker0"].url, roles["worker1"].url],
                         tokens["parties"]["web"], wait=2.0)
    assert late["worker1"].startswith("refused (410)")


def test_nobody_uploads_by_the_deadline(tmp_path, roles):
    params = shuffle_params(["tv", "web"], deadline_seconds=2.0)
    tokens = _setup(roles, params)
    time.sleep(2.5)
    status, payload = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 422
    assert "no party uploaded to both workers by the deadline" in payload["error"]
    assert "tv: no share reached either worker by the deadline" in payload["error"]


def test_aggregator_restart_keeps_the_outputs_and_the_release(tmp_path, roles, rng):
    params = shuffle_params(["tv", "web"])
    tokens = _setup(roles, params)
    roles["aggregator"].stop()
    x = rng.poisson(0.3, (2, params.registers)).clip(0, params.max_frequency)
    _upload(tmp_path, roles, params, tokens, x)
    time.sleep(1.0)  # the workers planned and keep retrying the aggregator
    roles["aggregator"].start()
    status, first = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 200
    roles["aggregator"].stop()
    roles["aggregator"].start()
    status, second = wait_result(roles["aggregator"].url, tokens["analyst"])
    assert status == 200
    assert second == first
    _check_equal(first, offline_release(x, params, ["tv", "web"],
                                        [roles["worker0"].db, roles["worker1"].db]))


def test_the_roles_on_postgresql(tmp_path, postgres, rng):
    """The same run with every role on PostgreSQL (row locks instead of SQLite's single
    writer), including a duplicate upload and a worker restarted after the plan."""
    import secrets

    roles = {name: RoleThread(role, postgres.create_database("s_" + secrets.token_hex(6)),
                              name)
             for name, role in (("aggregator", "aggregator"), ("worker0", "worker"),
                                ("worker1", "worker"))}
    for r in roles.values():
        r.start()
    try:
        params = shuffle_params(["tv", "web"], per_party=True)
        tokens = _setup(roles, params)
        x = rng.poisson(0.3, (2, params.registers)).clip(0, params.max_frequency)
        _upload(tmp_path, roles, params, tokens, x)
        # the same shares again, sent afresh to both workers: an identical retry
        save_state(tmp_path / "tv-again.state",
                   share_registers(x[0], params=params, party="tv", rng=0), [])
        again = upload_shares(tmp_path / "tv-again.state", [roles["worker0"].url,
                                                            roles["worker1"].url],
                              tokens["parties"]["tv"], wait=5)
        assert again["worker0"] == again["worker1"] == "acknowledged"
        roles["worker1"].stop()
        roles["worker1"].start()
        status, payload = wait_result(roles["aggregator"].url, tokens["analyst"])
        assert status == 200, payload
        _check_equal(payload, offline_release(x, params, ["tv", "web"],
                                              [roles["worker0"].db, roles["worker1"].db]))
    finally:
        for r in roles.values():
            r.stop()
