"""A device restored from an older state and fed other input (docs/protocol.md §7): the Python
client, told the slots already sent (``LongitudinalClient.note_sent``), withholds every report
whose bit differs from the one sent, keeps its counters, and persists what it knows. (The
uploaders on both sides, against a live service: tests/server/test_uploader.py and the
TypeScript client's Node tests.)"""

from __future__ import annotations

import json

import pytest

from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient, make_params

PARAMS = make_params(horizon=16, max_changes=3, epsilon=1.0, method="auto")
A = [0] * 8 + [1, 0, 1, 0, 1, 0, 1, 1]
B = [0] * 8 + [0, 0, 0, 1, 1, 1, 0, 0]


def _run(client: LongitudinalClient, xs: list[int]) -> dict[int, int]:
    return {r["interval"]: r["bit"] for x in xs for r in client.step(x)}


def test_a_restored_client_told_what_was_sent_withholds_the_other_bits() -> None:
    checked = 0
    for seed in range(64):
        first = LongitudinalClient(PARAMS, rng=seed)
        _run(first, A[:8])
        saved = first.to_json()
        sent = _run(first, A[8:])
        shadow = LongitudinalClient.from_json(saved)  # not told: what it would send
        other = _run(shadow, B[8:])
        differ = sorted(j for j in other if other[j] != sent[j])
        restored = LongitudinalClient.from_json(saved)
        restored.note_sent(sorted(sent.items()))
        got = _run(restored, B[8:])
        assert restored.withheld == differ
        assert got == {j: b for j, b in other.items() if j not in differ}
        assert all(got[j] == sent[j] for j in got)  # never another bit for a slot sent
        # the counters advance as if every report had been sent
        assert {k: getattr(restored, k) for k in ("t", "changes_used", "frozen", "used")} == \
            {k: getattr(shadow, k) for k in ("t", "changes_used", "frozen", "used")}
        checked += bool(differ)
    assert checked >= 5  # the property was exercised (deterministic seeds)


def test_known_slots_persist_and_passed_intervals_are_ignored() -> None:
    c = next(c for s in range(64) if (c := LongitudinalClient(PARAMS, rng=s)).order <= 1)
    limit = PARAMS.padded_horizon >> c.order
    _run(c, [0] * (1 << c.order))  # one interval passed
    c.note_sent([(1, 1), (limit, 0)])  # interval 1 is passed: nothing to withhold there
    state = json.loads(c.to_json())["payload"]["state"]
    assert state["ahead"] == [[limit, 0]]
    again = LongitudinalClient.from_json(c.to_json())
    assert again.ahead == {limit: 0}
    assert again.to_json() == c.to_json()


@pytest.mark.parametrize(("slots", "match"), [
    ([(0, 1)], "interval of LongitudinalClient.note_sent must be an integer in 1.."),
    ([(1, 2)], "bit of LongitudinalClient.note_sent must be 0 or 1; got 2."),
    ([(2, 0), (2, 1)], "one bit per interval; got two for interval 2."),
])
def test_note_sent_refuses_bad_slots(slots: list[tuple[int, int]], match: str) -> None:
    # an order with at least two intervals (interval 2 in range)
    c = next(c for s in range(64) if (c := LongitudinalClient(PARAMS, rng=s)).order <= 1)
    with pytest.raises(DataError, match=match.replace("(", r"\(").replace(")", r"\)")):
        c.note_sent(slots)


def test_an_edited_state_with_slots_already_passed_is_refused() -> None:
    c = LongitudinalClient(PARAMS, rng=5)
    _run(c, A[:8])
    raw = json.loads(c.to_json())
    raw["payload"]["state"]["ahead"] = [[1, 1]]
    with pytest.raises(DataError):
        LongitudinalClient.from_json(json.dumps(raw))
