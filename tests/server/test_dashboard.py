"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import datetime as dt
import itertools
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


def _study(http: httpx.Client, min_devices: int,
           start: str = START) -> tuple[ProtocolParams, str]:
    """The study (open enrolment: the devices here are the test's own) and an analyst token."""
    auth = {"Authorization": f"Bearer {ADMIN}"}
    r = http.post("/v1/studies", headers=auth, json={
        "study": "dash", "title": "Feature X on", "horizon": 32, "max_changes": 2,
        "epsilon": 2.0, "method": "auto", "start": start, "period": "1d",
        "min_devices": min_devices, "enrolment": "open"})
    r.raise_for_status()
    token = http.post("/v1/studies/dash/analyst-tokens", headers=auth).json()["token"]
    return ProtocolParams.from_json(r.json()["params"]), token


def _upload(http: httpx.Client, params: ProtocolParams, rng: np.random.Generator, n: int,
            ended: int | None = None) -> int:
    """n devices uploading every interval due by the end of period ``ended`` (all)."""
    total = 0
    last = params.padded_horizon if ended is None else ended
    for _ in range(n):
        order = int(rng.integers(0, params.orders))
        e = http.post("/v1/studies/dash/devices",
                      json={"param_id": params.param_id, "order": order}).json()
        reps = [{"device": e["device"], "order": order, "interval": j,
                 "bit": int(rng.integers(0, 2)), "param_id": params.param_id}
                for j in range(1, (params.padded_horizon >> order) + 1) if j << order <= last]
        if not reps:  # nothing of this order is due yet
            continue
        http.post("/v1/studies/dash/reports", json={"reports": reps},
                  headers={"Authorization": f"Bearer {e['token']}"}).raise_for_status()
        total += len(reps)
        good = (reps, order, e["token"])
    reps, order, token = good
    bad = [{**reps[0], "order": (order + 1) % params.orders}]
    assert http.post("/v1/studies/dash/reports", json={"reports": bad},
                     headers={"Authorization": f"Bearer {token}"}).status_code == 400
    return total


def http_summary(url: str, token: str) -> dict:
    with httpx.Client(base_url=url) as http:
        return http.get("/v1/studies/dash/summary",
                        headers={"Authorization": f"Bearer {token}"}).json()


def _ticks(page, selector: str) -> list[float]:
    texts = page.locator(selector).all_text_contents()
    return [float(t[:-1]) * (1000 if t.endswith("k") else 1e6) if t[-1] in "kM" else float(t)
            for t in texts]


def test_dashboard_marks_today_and_estimates_only_ended_periods(browser, live_sqlite, rng,
                                                               tmp_path):
    """A study in its 10th day: 9 periods estimated, today marked on both charts, y ticks
    evenly spaced round numbers, the vacuous flag as the summary says, and the page fetches
    the summary again by itself (refresh=1)."""
    start = (dt.datetime.now(dt.UTC) - dt.timedelta(days=9)).date().isoformat()
    with httpx.Client(base_url=live_sqlite.url) as http:
        params, token = _study(http, min_devices=5, start=start)
        _upload(http, params, rng, 30, ended=9)
    summary = http_summary(live_sqlite.url, token)
    if summary["today"] != 10:  # the date turned over between two lines: nothing to check
        pytest.skip("the UTC date changed during the test")
    est = summary["estimate"]
    assert est["periods_ended"] == 9
    assert len(est["columns"]["estimate"]) == 9
    assert max(est["columns"]["date"])[:10] < dt.datetime.now(dt.UTC).date().isoformat()
    page = browser.new_page()
    page.goto(f"{live_sqlite.url}/studies/dash/dashboard#token={token}&refresh=1")
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert page.locator("#estimate-chart line.today").count() == 1
    assert page.locator("#reports-chart line.today").count() == 1
    points = page.get_attribute("#estimate-chart polyline.line", "points")
    assert points is not None
    assert len(points.split()) == 9
    assert page.locator("#vacuous").is_visible() == est["band_vacuous"]
    for chart in ("#estimate-chart", "#reports-chart"):
        ticks = _ticks(page, f"{chart} text.ytick")
        steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
        assert len(ticks) >= 2
        assert len(steps) == 1
        step = steps.pop()
        mantissa = step / 10 ** np.floor(np.log10(step))
        assert round(mantissa, 6) in (1.0, 2.0, 5.0)
    page.wait_for_selector("body[data-loads='2']", timeout=15000)  # refreshed by itself
    page.screenshot(path=str(tmp_path / "dashboard-today.png"), full_page=True)
    page.close()


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
    # the study has ended: today is marked at the right edge of both charts, and said so
    for chart in ("#estimate-chart", "#reports-chart"):
        assert page.locator(f"{chart} line.today.past").count() == 1
        assert page.text_content(f"{chart} text.today-label") == "today (after the last period) →"
    assert page.inner_text("#minimum") == ("estimates shown: at least 5 devices have reported "
                                           "(the study's public minimum)")
    summary = http_summary(live_sqlite.url, token)
    assert page.locator("#vacuous").is_visible() == summary["estimate"]["band_vacuous"]
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


def test_dashboard_before_the_start_and_below_the_minimum(browser, live_sqlite):
    """A study that starts tomorrow, with 3 devices enrolled and none reported: the minimum is
    stated as devices that have *reported* (not "estimates from 5 devices" beside the enrolled
    count), the estimate is withheld, and today is marked at the left edge."""
    start = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).date().isoformat()
    with httpx.Client(base_url=live_sqlite.url) as http:
        params, token = _study(http, min_devices=5, start=start)
        for _ in range(3):
            http.post("/v1/studies/dash/devices", json={"param_id": params.param_id,
                                                        "order": 0}).raise_for_status()
    page = browser.new_page()
    page.goto(f"{live_sqlite.url}/studies/dash/dashboard#token={token}")
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    assert page.inner_text("#devices") == "3"
    assert page.inner_text("#minimum") == ("estimates withheld until at least 5 devices have "
                                           "reported (the study's public minimum)")
    assert page.inner_text("#estimate-note").startswith(
        "withheld until at least 5 devices have reported")
    assert page.locator("#reports-chart line.today.before").count() == 1
    assert page.text_content("#reports-chart text.today-label") == (
        "← today (before the first period)")
    page.close()
