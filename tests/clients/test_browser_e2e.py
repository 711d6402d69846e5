"""End to end in a real headless Chromium: a few hundred TypeScript devices (clients/js, built
and bundled here) enrol with a running collection service, report every period and flush; the
service's estimate equals the offline aggregation of the very reports the browser sent.

As deployed: the page comes from the web application's origin (a static server on another
port) and talks to the service on its own origin, allowed by ``--cors-origin``; so every answer
the devices need (enrolment, stored slots, uploads) must carry the CORS policy, or the browser
hides it and the device retries for ever.

Skipped with the reason when Node with the package's devDependencies, Chromium, Playwright or the
[server] extra is missing (``DPFREQ_REQUIRE_NODE=1``, set by CI, makes the first a failure).
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "clients" / "js"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ADMIN = "browser-e2e-admin-token-" + "x" * 16
DEVICES = 300

# what each browser device runs: its own secret (crypto.getRandomValues), its own store
_SCRIPT = """
async ([bundle, server, study, secret, inputs]) => {
  const { Device, memoryStore } = globalThis.dpfreqDevice;
  const out = [];
  for (const xs of inputs) {
    const dev = await Device.open(bundle, memoryStore(),
                                  { server, study, enrolmentSecret: secret, retries: 3 });
    const device = await dev.enrol();
    const reports = [];
    for (let t = 1; t <= xs.length; t++) {
      for (const r of await dev.observe(t, xs[t - 1])) reports.push({ ...r, device });
    }
    const res = await dev.flush();
    if (res.sent !== reports.length || res.refused || res.pending) {
      throw new Error(JSON.stringify(res));
    }
    out.push({ device, order: dev.client.order, reports });
  }
  return out;
}
"""


def _unavailable(what: str) -> NoReturn:
    if os.environ.get("DPFREQ_REQUIRE_NODE") == "1" and "Node" in what:
        pytest.fail(f"{what} (DPFREQ_REQUIRE_NODE=1)")
    pytest.skip(what)


def _bundle_js(tmp: Path) -> str:
    npm, npx = shutil.which("npm"), shutil.which("npx")
    if npm is None or npx is None or not (JS / "node_modules" / ".bin" / "esbuild").exists():
        _unavailable("Node with clients/js's devDependencies (`npm ci` there) is needed")
    # its own output directory: the Node tests may be building dist/ at the same time
    subprocess.run([npx, "tsc", "-p", "tsconfig.json", "--outDir", str(tmp / "dist")], cwd=JS,
                   check=True, timeout=300)
    out = tmp / "device.iife.js"
    subprocess.run([npx, "esbuild", str(tmp / "dist" / "index.js"), "--bundle", "--minify",
                    "--format=iife",
                    "--global-name=dpfreqDevice", f"--outfile={out}", "--log-level=warning"],
                   cwd=JS, check=True, timeout=300)
    return out.read_text(encoding="utf-8")


def _device_bundle(params: Any) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(
        "dpfreq_vectors", ROOT / "clients" / "vectors" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out: dict[str, Any] = module.bundle(params)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    """The web application's origin: a static page on its own port."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "index.html").write_text("<!doctype html><title>app</title>", encoding="utf-8")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", _free_port()), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join(timeout=30)
    httpd.server_close()


@pytest.fixture
def live(tmp_path: Path, web: str) -> Iterator[str]:
    """``dpfreq serve``'s app under uvicorn in a thread on 127.0.0.1 (SQLite), allowing the
    web application's origin by CORS."""
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    uvicorn = pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
    from dpfreq.server import ServerConfig, create_app

    port = _free_port()
    app = create_app(ServerConfig(db=str(tmp_path / "e2e.db"), admin_token=ADMIN, rate=0,
                                  enrol_rate=0, cors_origins=(web,)))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def test_browser_devices_estimate_equals_offline_aggregation(live: str, web: str, tmp_path: Path,
                                                             rng: np.random.Generator) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    import httpx

    from dpfreq.longitudinal import LongitudinalAggregator, ProtocolParams

    script = _bundle_js(tmp_path)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=live) as http:
        r = http.post("/v1/studies", headers=auth, json={
            "study": "web", "horizon": 20, "max_changes": 3, "epsilon": 1.0,
            "method": "auto", "start": "2020-01-01", "period": "1d", "min_devices": 5})
        r.raise_for_status()
        params = ProtocolParams.from_json(r.json()["params"])
        secret = r.json()["enrolment_secret"]
        analyst = http.post("/v1/studies/web/analyst-tokens", headers=auth).json()["token"]
    flips = rng.random((DEVICES, params.horizon)) < 0.15
    inputs = (np.cumsum(flips, axis=1) % 2).tolist()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page()
            page.goto(f"{web}/index.html")  # the application's origin, not the service's
            assert page.evaluate("location.origin") != live
            page.add_script_tag(content=script)
            sent = page.evaluate(_SCRIPT, [_device_bundle(params), live, "web", secret, inputs])
        finally:
            browser.close()
    assert len(sent) == DEVICES
    assert all(len(d["reports"]) == params.padded_horizon >> d["order"] for d in sent)
    agg = LongitudinalAggregator(params)
    agg.enrol(np.array([d["device"] for d in sent]), np.array([d["order"] for d in sent]))
    agg.ingest_reports([r for d in sent for r in d["reports"]])
    ref = agg.estimate(confidence=0.9)
    with httpx.Client(base_url=live) as http:
        r = http.get("/v1/studies/web/estimates?confidence=0.9",
                     headers={"Authorization": f"Bearer {analyst}"})
    assert r.status_code == 200, r.text
    cols = r.json()["columns"]
    for name in ("estimate", "lower", "upper", "band_lower", "band_upper", "sd"):
        np.testing.assert_array_equal(cols[name], np.asarray(ref.table()[name], dtype=float))
    np.testing.assert_array_equal(cols["unclamped"], ref.unclamped)
