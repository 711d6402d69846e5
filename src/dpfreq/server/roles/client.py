"""The clients of the shuffle services: a party's upload, the operators' setup, the result.

**A party's upload** (:func:`upload_shares`). The two shares are written to a state file
(mode 0600: together they are the party's exact registers) *before* anything is sent, with the
workers that acknowledged them; each share is sent until its worker acknowledges it (200, also
for an identical retry), with backoff while a worker is down, for at most ``wait`` seconds.
A later run with the same state file sends the same shares again — never new ones: a party
whose two workers hold shares of different uploads would not be measured — and skips the
workers that already acknowledged. A refusal (409: the worker holds another share of this
party; 410: past the deadline; 422: malformed) is final and reported.

**Setup** (:func:`setup_measurement`): with the three services' admin tokens, creates the
measurement at the aggregator and both workers, exchanges the tokens they present to each
other, and issues each party's two tokens and an analyst token. Three organisations would do
their own part of it by hand (docs/guide/crossparty.md); this is the localhost shortcut.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from dpfreq.artifacts import write_private
from dpfreq.crossparty.shuffle import PartyShares, ShuffleParams
from dpfreq.errors import DataError

__all__ = ["UploadOutcome", "fetch_result", "load_state", "save_state", "setup_measurement",
           "upload_shares"]

_STATE = b"DPFQPST1"


def save_state(path: str | Path, shares: PartyShares, acked: list[int]) -> None:
    """Write the party's state: both frames and the workers that acknowledged (mode 0600)."""
    frames = [shares.frame(0), shares.frame(1)]
    return _write(path, {"measurement": shares.params.measurement,
                         "param_id": shares.params.param_id, "party": shares.party,
                         "share_id": shares.share_id, "acked": sorted(acked),
                         "sizes": [len(f) for f in frames]}, frames)


def _write(path: str | Path, head: dict[str, Any], frames: list[bytes]) -> None:
    text = json.dumps(head, sort_keys=True).encode("utf-8")
    data = _STATE + len(text).to_bytes(4, "big") + text + b"".join(frames)
    tmp = Path(f"{path}.tmp")
    tmp.unlink(missing_ok=True)
    write_private(tmp, data)
    tmp.replace(path)


def load_state(path: str | Path) -> tuple[dict[str, Any], list[bytes]]:
    """``(header, [frame 0, frame 1])`` of a state file (DataError when it is not one)."""
    try:
        data = Path(path).read_bytes()
        size = int.from_bytes(data[8:12], "big")
        head = json.loads(data[12:12 + size])
        start = 12 + size
        s0, s1 = head["sizes"]
        frames = [data[start:start + s0], data[start + s0:start + s0 + s1]]
        if data[:8] != _STATE or len(frames[1]) != s1 or start + s0 + s1 != len(data):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError):
        raise DataError(f"{path} is not a dpfreq party state file.") from None
    return head, frames


class UploadOutcome(dict[str, Any]):
    """Per worker: ``"acknowledged"`` or the refusal's one line; and the share id."""


def _send(client: httpx.Client, url: str, token: str, frame: bytes) -> tuple[int, str]:
    try:
        r = client.put(url, content=frame, headers={"Authorization": f"Bearer {token}",
                                                    "Content-Type": "application/octet-stream"})
    except httpx.HTTPError as exc:
        return 0, f"unreachable ({type(exc).__name__})"
    if r.status_code == 200:
        return 200, "acknowledged"
    try:
        reason = str(r.json().get("error", r.text))
    except ValueError:
        reason = r.text[:200]
    return r.status_code, reason


def upload_shares(state: str | Path, workers: list[str], tokens: list[str], *,
                  wait: float, timeout: float = 60.0) -> UploadOutcome:
    """Send the shares in ``state`` (see the module docstring) to ``workers`` (2 URLs) with
    their ``tokens``; the outcome per worker once every share is acknowledged or refused, or
    ``wait`` seconds have passed (then ``"unreachable ..."``)."""
    head, frames = load_state(state)
    outcome = UploadOutcome(share_id=head["share_id"])
    acked = set(head["acked"])
    deadline, pause = time.monotonic() + wait, 0.2
    with httpx.Client(timeout=timeout) as client:
        while True:
            for w in (0, 1):
                if w in acked or f"worker{w}" in outcome:
                    continue
                url = f"{workers[w].rstrip('/')}/v1/measurements/{head['measurement']}/share"
                status, text = _send(client, url, tokens[w], frames[w])
                if status == 200:
                    acked.add(w)
                    head["acked"] = sorted(acked)
                    _write(state, head, frames)
                elif status in (400, 401, 403, 404, 409, 410, 413, 422):
                    outcome[f"worker{w}"] = f"refused ({status}): {text}"
            for w in acked:
                outcome[f"worker{w}"] = "acknowledged"
            if all(f"worker{w}" in outcome for w in (0, 1)) or time.monotonic() > deadline:
                break
            time.sleep(pause)
            pause = min(2 * pause, 5.0)
    for w in (0, 1):
        outcome.setdefault(f"worker{w}", "unreachable: not acknowledged in time")
    return outcome


def _post(client: httpx.Client, url: str, token: str, body: Any = None) -> Any:
    try:
        r = client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise DataError(f"cannot reach {url} ({type(exc).__name__}).") from None
    if r.status_code not in (200, 201):
        raise DataError(f"POST {url} answered {r.status_code}: {r.text[:300]}")
    return r.json()


def setup_measurement(params: ShuffleParams, *, aggregator: tuple[str, str],
                      workers: list[tuple[str, str]], timeout: float = 30.0
                      ) -> dict[str, Any]:
    """Create the measurement at the three services (``(url, admin token)`` each) and issue
    the tokens: ``{"parties": {party: [token at worker 0, token at worker 1]}, "analyst":
    token}`` (shown once: keep them)."""
    text = params.to_json()
    name = params.measurement
    agg_url, agg_admin = aggregator
    with httpx.Client(timeout=timeout) as c:
        _post(c, f"{agg_url}/v1/measurements", agg_admin, {"params": text})
        worker_tokens = [_post(c, f"{agg_url}/v1/measurements/{name}/worker-tokens", agg_admin,
                               {"position": w})["token"] for w in (0, 1)]
        analyst = _post(c, f"{agg_url}/v1/measurements/{name}/analyst-tokens", agg_admin)
        # the token each worker issues for the other (before it holds the measurement)
        peer = [_post(c, f"{url}/v1/measurements/{name}/peer-tokens", admin)["token"]
                for url, admin in workers]
        for w, (url, admin) in enumerate(workers):
            _post(c, f"{url}/v1/measurements", admin, {
                "params": text, "position": w, "peer_url": workers[1 - w][0],
                "peer_token": peer[1 - w], "aggregator_url": agg_url,
                "aggregator_token": worker_tokens[w]})
        parties = {p: [_post(c, f"{url}/v1/measurements/{name}/party-tokens", admin,
                             {"party": p})["token"] for url, admin in workers]
                   for p in params.parties}
    return {"parties": parties, "analyst": analyst["token"]}


def fetch_result(url: str, measurement: str, token: str, *, timeout: float = 30.0
                 ) -> tuple[int, dict[str, Any]]:
    """``(HTTP status, JSON)`` of the aggregator's result of ``measurement``."""
    where = f"{url.rstrip('/')}/v1/measurements/{measurement}/result"
    try:
        r = httpx.get(where, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise DataError(f"cannot reach {where} ({type(exc).__name__}).") from None
    try:
        return r.status_code, dict(r.json())
    except ValueError:
        return r.status_code, {"error": r.text[:300]}
