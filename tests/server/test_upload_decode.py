"""The upload path decodes report batches with msgspec; the OpenAPI document shows the pydantic
model ReportBatch. Both must accept exactly the same bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dpfreq.server.models import MAX_BATCH, ReportBatch
from dpfreq.server.upload import Malformed, decode_batch

GOOD = {"device": 5, "order": 1, "interval": 3, "bit": 1, "param_id": "p" * 16}


def _agree(body: bytes) -> bool:
    try:
        ReportBatch.model_validate_json(body)
        model_ok = True
    except ValidationError:
        model_ok = False
    reason = ""
    try:
        decoded = decode_batch(body)
        fast_ok = True
    except Malformed as exc:
        reason = str(exc)
        fast_ok = False
    if not fast_ok:
        assert reason.startswith("invalid request: ")
        assert "\n" not in reason
    if fast_ok and model_ok:
        model = ReportBatch.model_validate_json(body).reports
        assert [(r.device, r.order, r.interval, r.bit, r.param_id) for r in decoded] == \
            [(r.device, r.order, r.interval, r.bit, r.param_id) for r in model]
    return fast_ok == model_ok


EDGES: list[Any] = [
    {"reports": [GOOD]},
    {"reports": [GOOD] * MAX_BATCH},
    {"reports": [GOOD] * (MAX_BATCH + 1)},
    {"reports": []},
    {},
    {"reports": [GOOD], "extra": 1},
    [GOOD],
    {"reports": [{**GOOD, "extra": 0}]},
    *({"reports": [{k: v for k, v in GOOD.items() if k != key}]} for key in GOOD),
    *({"reports": [{**GOOD, key: None}]} for key in GOOD),
    *({"reports": [{**GOOD, key: value}]} for key, value in [
        ("bit", 2), ("bit", -1), ("bit", True), ("bit", 1.0), ("bit", "1"), ("bit", 0),
        ("interval", 0), ("interval", (1 << 31) - 1), ("interval", 1 << 31), ("interval", 1.5),
        ("order", 62), ("order", 63), ("order", -1), ("device", (1 << 62) - 1),
        ("device", 1 << 62), ("device", 1 << 70), ("device", -1), ("param_id", "x" * 64),
        ("param_id", "x" * 65), ("param_id", 7), ("param_id", ""), ("param_id", "é\u2028")]),
]


@pytest.mark.parametrize("body", EDGES)
def test_decoder_and_model_agree_on_edge_cases(body):
    assert _agree(json.dumps(body).encode())


@pytest.mark.parametrize("raw", [b"", b"{", b"null", b'{"reports": [1]}', b"\xff",
                                 b'{"reports": [' + json.dumps(GOOD).encode() + b"] } x",
                                 b'{"reports": [' + json.dumps(GOOD).encode() + b'], "reports": ['
                                 + json.dumps({**GOOD, "bit": 0}).encode() + b"]}"])
def test_decoder_and_model_agree_on_raw_bytes(raw):
    assert _agree(raw)


def test_an_invalid_duplicate_key_is_refused():
    # the model keeps the last value of a repeated key; the decoder checks every value, so it
    # refuses this ambiguous body (it never accepts one the model refuses)
    raw = b'{"reports": [], "reports": [' + json.dumps(GOOD).encode() + b"]}"
    with pytest.raises(Malformed):
        decode_batch(raw)


values = st.one_of(st.none(), st.booleans(), st.integers(-2, 1 << 63), st.floats(-2, 1e10),
                   st.text(max_size=70))
reports = st.dictionaries(st.sampled_from([*GOOD, "x"]), values, max_size=6).map(
    lambda d: {**GOOD, **d})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(reports, max_size=4))
def test_decoder_and_model_agree_on_generated_batches(batch):
    assert _agree(json.dumps({"reports": batch}).encode())



def test_the_current_period_is_the_protocols(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upload path's integer clock gives the period StudyProtocol.current_period gives,
    before the start, on the first instant of a period and just before the next."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from dpfreq.server import upload
    from dpfreq.server.protocol import StudyProtocol

    start = datetime(2026, 1, 1, tzinfo=UTC)
    protocol = SimpleNamespace(start=start, period_seconds=3600)
    for at in (start - timedelta(microseconds=1), start, start + timedelta(hours=3),
               start + timedelta(hours=4) - timedelta(microseconds=1)):
        ns = (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
        monkeypatch.setattr(upload.time, "time_ns", lambda ns=ns: ns)
        assert upload.current_period(protocol) == StudyProtocol.current_period(protocol, at)


@pytest.mark.parametrize("horizon", [5, 6, 8])
def test_due_intervals_follow_the_dyadic_rule_exactly(horizon: int) -> None:
    """Enumerate every order, current period and interval of an 8-period decomposition: an
    interval j of order h is refused as future exactly when min(j·2^h, horizon) > current."""
    from types import SimpleNamespace

    from dpfreq.server.upload import _Refusal, check_reports

    for current in range(10):
        protocol = SimpleNamespace(padded=8, horizon=horizon)
        record = SimpleNamespace(protocol=protocol, param_id="p")
        for order in range(4):
            limit = 8 >> order
            for interval in range(1, limit + 2):
                rep = SimpleNamespace(device=1, param_id="p", order=order, interval=interval,
                                      bit=1)
                if interval > limit:
                    want = "interval"
                elif min(interval << order, horizon) > current:
                    want = "future"
                else:
                    want = "stored"
                try:
                    slots = check_reports(record, 1, order, [rep], current)
                    got = "stored" if slots == [(interval, 1)] else "wrong"
                except _Refusal as refusal:
                    got = refusal.reason
                assert got == want, (current, order, interval)
