"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import os
import shutil

import httpx
import numpy as np
import pytest

from conftest import ADMIN, START
from dpfreq.longitudinal import ProtocolParams

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                               args=["--no-sandbox", "--disable-gpu", "--disable-quic",
                                     "--no-first-run", "--disable-background-networking",
                                     "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


def _study(http: httpx.Client, min_devices: int) -> tuple[ProtocolParams, str]:
    auth = {"Authorization": f"Bearer {ADMIN}"}
    r = http.post("/v1/studies", headers=auth, json={
        "study": "dash", "title": "Feature X on", "horizon": 32, "max_changes": 2,
        "epsilon": 2.0, "randomizer": "auto", "start": START, "period": "1d",
        "min_devices": min_devices})
    r.raise_for_status()
    token = http.post("/v1/studies/dash/analyst-tokens", headers=auth).json()["token"]
    return ProtocolParams.from_json(r.json()["params"]), token


def _upload(http: httpx.Client, params: ProtocolParams, rng: np.random.Generator, n: int) -> int:
    total = 0
    for _ in range(n):
        order = int(rng.integers(0, params.orders))
        e = http.post("/v1/studies/dash/devices",
                      json={"param_id": params.param_id, "order": order}).json()
        reps = [{"device": e["device"], "order": order, "interval": j,
                 "bit": int(rng.integers(0, 2)), "param_id": params.param_id}
                for j in range(1, (params.padded_horizon >> order) + 1)]
        http.post("/v1/studies/dash/reports", json={"reports": reps},
                  headers={"Authorization": f"Bearer {e['token']}"}).raise_for_status()
        total += len(reps)
    bad = [{**reps[0], "order": (order + 1) % params.orders}]
    assert http.post("/v1/studies/dash/reports", json={"reports": bad},
                     headers={"Authorization": f"Bearer {e['token']}"}).status_code == 400
    return total


def test_dashboard_renders_in_chromium(browser, live_sqlite, rng, tmp_path):
    with httpx.Client(base_url=live_sqlite.url) as http:
        params, token = _study(http, min_devices=5)
        total = _upload(http, params, rng, 8)
    page = browser.new_page()
    page.goto(f"{live_sqlite.url}/studies/dash/dashboard#token={token}")
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert page.inner_text("#devices") == "8"
    assert page.inner_text("#privacy") == "ε = 2"
    assert page.inner_text("#reports-total") == str(total)
    assert page.locator("#reports-chart rect.bar").count() == 32
    assert page.locator("#estimate-chart polygon.band").count() == 1
    assert page.locator("#estimate-chart polyline.line").count() == 1
    rows = page.locator("#rejections tbody tr")
    reasons = {rows.nth(i).locator("td").nth(0).inner_text():
               rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())}
    assert reasons["order"] == "1"
    assert page.locator("#orders tbody tr").count() == params.orders
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    # without a token the page says what to do and shows no data
    page.goto(f"{live_sqlite.url}/studies/dash/dashboard")
    page.wait_for_selector("#status.error")
    assert "#token=" in page.inner_text("#status")
    page.close()
