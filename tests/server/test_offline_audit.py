"""An auditor's re-aggregation: the service's raw report and enrolment exports, aggregated
offline by ``dpfreq longitudinal aggregate``, give the service's estimate exactly."""

from __future__ import annotations

import datetime as dt
import io
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from conftest import admin, bearer, create_study, enrol, run_devices
from dpfreq.cli.longitudinal import command
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams, aggregate_reports_file
from dpfreq.server.protocol import client_report


def _download(c, study: str, table: str, token: str, path) -> None:
    r = c.get(f"/v1/studies/{study}/exports/{table}", headers=bearer(token))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/vnd.apache.parquet"
    path.write_bytes(r.content)


@pytest.mark.parametrize("horizon", [13, 16])
def test_offline_reaggregation_equals_the_service(client, rng, tmp_path, horizon: int) -> None:
    c = client
    params = create_study(c, horizon=horizon, min_devices=3)
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    run_devices(c, params, rng, 40)
    enrol(c, params, 0)  # enrolled, never reported (a dropout): still in the population
    _download(c, "s1", "reports", an, tmp_path / "reports.parquet")
    _download(c, "s1", "enrolment", an, tmp_path / "enrolment.parquet")
    meta = pq.read_schema(tmp_path / "reports.parquet").metadata
    offline_params = ProtocolParams.from_json(meta[b"params"])
    assert offline_params == params
    assert pq.read_table(tmp_path / "enrolment.parquet").num_rows == 41
    service = c.get("/v1/studies/s1/estimates", params={"confidence": 0.9},
                    headers=bearer(an)).json()
    offline = aggregate_reports_file(str(tmp_path / "reports.parquet"), offline_params,
                                     enrolled=str(tmp_path / "enrolment.parquet"),
                                     confidence=0.9)
    assert offline.devices == service["devices"] == 41
    for name, col in offline.table().items():
        if np.asarray(col).dtype.kind == "f":
            assert [float(v) for v in col] == service["columns"][name], name
    (tmp_path / "params.json").write_text(offline_params.to_json())
    res = CliRunner().invoke(command, [
        "aggregate", str(tmp_path / "reports.parquet"), "--params", str(tmp_path / "params.json"),
        "--enrolment", str(tmp_path / "enrolment.parquet"), "--confidence", "0.9",
        "--json", str(tmp_path / "out.json")])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["value"] == service["columns"]["estimate"]


def test_exports_need_a_reader_and_the_minimum(client, rng) -> None:
    c = client
    params = create_study(c, min_devices=5)
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    assert c.get("/v1/studies/s1/exports/reports").status_code == 401
    _, device_token = enrol(c, params, 0)
    assert c.get("/v1/studies/s1/exports/reports",
                 headers=bearer(device_token)).status_code == 403
    assert c.get("/v1/studies/s1/exports/reports", headers=bearer(an)).status_code == 403
    run_devices(c, params, rng, 5)
    assert c.get("/v1/studies/s1/exports/nope", headers=bearer(an)).status_code == 404
    r = c.get("/v1/studies/s1/exports/enrolment", headers=admin())
    assert r.status_code == 200
    assert pq.read_table(io.BytesIO(r.content)).column_names == ["device", "order"]


def test_always_on_devices_are_all_counted_at_every_period(tmp_path) -> None:
    """5 000 devices always on, horizon 13 (padded to 16): each device's last step reports the
    padding itself, the population is the enrolment, and the truth 5 000 lies in every
    period's interval at confidence 1 − 1e-7 (the undercount put it far below)."""
    from dpfreq.longitudinal import make_params

    p = make_params(horizon=13, max_changes=1, epsilon=2.0, method="auto")
    cols: dict[str, list] = {"device": [], "order": [], "interval": [], "bit": []}
    enrolled = {"device": [], "order": []}
    gen = np.random.default_rng(29)
    for u in range(5000):
        cl = LongitudinalClient(p, rng=gen)
        enrolled["device"].append(u)
        enrolled["order"].append(cl.order)
        for _ in range(13):
            for r in cl.step(1):
                w = client_report(r, u)
                for k in cols:
                    cols[k].append(w[k])
    assert len(cols["device"]) == sum(16 >> h for h in enrolled["order"])
    rel = aggregate_reports_file(cols, p, enrolled=enrolled, engine="memory",
                                 confidence=1 - 1e-7)
    assert rel.devices == 5000
    assert rel.mechanism_params["missing_reports"] == 0
    assert np.all(rel.error.lower <= 5000)
    assert np.all(rel.error.upper >= 5000)
    assert not math.isnan(float(rel.value[-1]))


def _days_ago(n: int) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(days=n)).date().isoformat()


def test_estimates_never_cover_periods_that_have_not_ended(sqlite_client, rng) -> None:
    """Day 4 of a study: periods 1..3 are estimated (JSON, CSV), not the running period nor
    the future; a study that has not started estimates nothing."""
    c = sqlite_client
    params = create_study(c, horizon=16, min_devices=3, start=_days_ago(3))
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    for _ in range(4):
        order = int(rng.integers(0, params.orders))
        device, token = enrol(c, params, order)
        reps = [{"device": device, "order": order, "interval": j, "bit": int(rng.integers(2)),
                 "param_id": params.param_id}
                for j in range(1, (16 >> order) + 1) if j << order <= 3]
        if reps:
            assert c.post("/v1/studies/s1/reports", json={"reports": reps},
                          headers=bearer(token)).status_code == 200
    summary = c.get("/v1/studies/s1/summary", headers=bearer(an)).json()
    if summary["today"] != 4:
        pytest.skip("the UTC date changed during the test")
    assert summary["periods_ended"] == 3
    est = c.get("/v1/studies/s1/estimates", headers=bearer(an)).json()
    assert est["periods_ended"] == 3
    assert est["columns"]["period"] == [1, 2, 3]
    assert all(len(col) == 3 for col in est["columns"].values())
    assert max(est["columns"]["date"])[:10] < dt.datetime.now(dt.UTC).date().isoformat()
    csv_text = c.get("/v1/studies/s1/estimates", params={"format": "csv"},
                     headers=bearer(an)).text
    assert len(csv_text.strip().splitlines()) == 1 + 3
    later = create_study(c, "later", horizon=8, min_devices=1, start=_days_ago(-2))
    enrol(c, later, 0, "later")
    # nothing of a study that has not started is due, so no device has reported: withheld
    late = c.get("/v1/studies/later/estimates", headers=admin())
    assert late.status_code == 403
    assert "have reported" in late.json()["error"]


def test_an_ended_period_without_its_reports_is_null_not_zero(sqlite_client) -> None:
    """Day 4: one device of order 0 has sent periods 1 and 2, not 3 (late, or dropped out):
    period 3 has ended but has no estimate yet, null in JSON and empty in CSV, never 0."""
    c = sqlite_client
    params = create_study(c, horizon=16, min_devices=1, start=_days_ago(3))
    an = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    device, token = enrol(c, params, 0)
    reps = [{"device": device, "order": 0, "interval": j, "bit": 1,
             "param_id": params.param_id} for j in (1, 2)]
    assert c.post("/v1/studies/s1/reports", json={"reports": reps},
                  headers=bearer(token)).status_code == 200
    est = c.get("/v1/studies/s1/estimates", headers=bearer(an)).json()
    if est["today"] != 4:
        pytest.skip("the UTC date changed during the test")
    cols = est["columns"]
    for name in ("estimate", "unclamped", "lower", "upper", "band_lower", "band_upper"):
        assert cols[name][2] is None, name
        assert None not in cols[name][:2], name
    assert "have no estimate yet" in est["description"]
    csv_rows = c.get("/v1/studies/s1/estimates", params={"format": "csv"},
                     headers=bearer(an)).text.strip().splitlines()
    head = csv_rows[0].split(",")
    assert csv_rows[3].split(",")[head.index("estimate")] == ""
