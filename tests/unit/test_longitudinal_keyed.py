"""Replay-safe device randomness: the keyed stream follows its written specification, every
sampler on it is exact (enumerated over its uniform draws), and any replay of any saved client
state sends bit-identical reports."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.errors import DataError
from dpfreq.longitudinal import LongitudinalClient, make_params
from dpfreq.longitudinal import keyed as keyed_mod
from dpfreq.longitudinal.keyed import DeviceKey, KeyedStream, subset_from_choices
from dpfreq.longitudinal.laws import distance_law

MODES = ["rr", "futurerand", "calibrated", "threshold", "erlingsson"]


# -- the specification, written again independently of the module -----------------------------

def _enc(part: str | int) -> bytes:
    tag, body = (b"s", part.encode()) if isinstance(part, str) else (b"i", str(part).encode())
    return tag + len(body).to_bytes(8, "big") + body


def _kdf(key: bytes, *parts: str | int) -> bytes:
    return hmac.new(key, b"dpfreq-kdf-1" + b"".join(_enc(p) for p in parts),
                    hashlib.sha256).digest()


def _spec_words(secret: bytes, pid: str, purpose: str, *slot: int):
    k = _kdf(secret, "longitudinal-device", pid, purpose, *slot)
    for b in itertools.count():
        block = _kdf(k, "block", b)
        for i in range(4):
            yield int.from_bytes(block[8 * i:8 * i + 8], "big")


def _spec_below(words, n: int) -> int:
    b = (n - 1).bit_length()
    if b == 0:
        return 0
    w = (b + 63) // 64
    while True:
        value = 0
        for _ in range(w):
            value = (value << 64) | next(words)
        value >>= 64 * w - b
        if value < n:
            return value


@pytest.mark.parametrize("mode", ["threshold", "erlingsson", "rr"])
def test_client_draws_follow_the_written_specification(mode: str) -> None:
    """Order, kept change, vector and coins recomputed from the spec with hmac alone."""
    p = make_params(horizon=16, max_changes=4, epsilon=1.0, method=mode)
    pid = p.param_id
    for seed in range(6):
        c = LongitudinalClient(p, rng=seed)
        secret = bytes.fromhex(json.loads(c.to_json())["payload"]["state"]["secret"])
        assert c.order == _spec_below(_spec_words(secret, pid, "order"), p.orders)
        if mode == "erlingsson":
            assert c.r == 1 + _spec_below(_spec_words(secret, pid, "kept-change"), 4)
        else:
            law = distance_law(mode, 4, 1.0)
            words = _spec_words(secret, pid, "vector")
            u = _spec_below(words, law.total)
            ell = sum(1 for cum in law.cumulative if cum <= u)
            a = list(range(4))
            for i in range(ell):
                j = i + _spec_below(words, 4 - i)
                a[i], a[j] = a[j], a[i]
            assert c.v == [-1 if pos in a[:ell] else 1 for pos in range(4)]
        reps = [r for _ in range(16) for r in c.step(0)]  # all-zero input: coins only
        for r in reps:
            top = _spec_below(_spec_words(secret, pid, "coin", r["interval"]), 2)
            assert r["bit"] == top


class _Scripted(KeyedStream):
    """A stream whose uniform draws are given (to enumerate a sampler's law exactly)."""

    def __init__(self, draws: list[int]) -> None:
        super().__init__(b"\0" * 32)
        self.draws, self.pos, self.sizes = draws, 0, []

    def uniform_below(self, n: int) -> int:
        self.sizes.append(n)
        if self.pos == len(self.draws):
            raise LookupError(n)
        self.pos += 1
        return self.draws[self.pos - 1]


def _enumerate_law(run, cut: Fraction) -> tuple[dict, Fraction]:
    """Exact law of ``run(stream)`` over ideal uniform draws: every path of probability
    ``>= cut`` is followed; returns the outcomes' masses and the mass left unexplored."""
    law: dict = {}
    left = Fraction(0)
    stack = [([], Fraction(1))]
    while stack:
        draws, mass = stack.pop()
        s = _Scripted(draws)
        try:
            out = run(s)
        except LookupError as need:
            n = int(need.args[0])
            if mass / n < cut:
                left += mass
                continue
            stack.extend(([*draws, v], mass / n) for v in range(n))
            continue
        law[out] = law.get(out, Fraction(0)) + mass
    return law, left


def test_uniform_below_reads_top_bits_and_rejects_exactly() -> None:
    class Words(KeyedStream):
        def __init__(self, words: list[int]) -> None:
            super().__init__(b"\0" * 32)
            self.it = iter(words)

        def word(self) -> int:
            return next(self.it)

    assert Words([]).uniform_below(1) == 0
    assert Words([(5 << 61) | 12345, 3 << 61]).uniform_below(5) == 3  # 5 rejected, then 3
    big = (1 << 64) + 7  # two words, 65 bits kept
    assert Words([1 << 63, 1 << 63]).uniform_below(big) == (1 << 64) | 1
    assert Words([3 << 62, 0, 1 << 63, 1 << 63]).uniform_below(big) == (1 << 64) | 1
    with pytest.raises(Exception, match="uniform_below"):
        Words([]).uniform_below(0)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_partial_fisher_yates_gives_uniform_subsets(k: int) -> None:
    for ell in range(k + 1):
        seqs = itertools.product(*(range(k - i) for i in range(ell)))
        counts = Counter(tuple(subset_from_choices(k, list(c))) for c in seqs)
        assert len(counts) == math.comb(k, ell)
        assert set(counts.values()) == {math.factorial(ell)}
        assert all(v.count(-1) == ell for v in counts)


def test_distance_inversion_at_every_threshold() -> None:
    """``U`` in ``[c_{ℓ−1}, c_ℓ)`` gives distance ℓ: each distance gets exactly its integer
    mass ``C(k, ℓ)·w(ℓ)`` of the ``N`` values."""
    law = distance_law("futurerand", 6, 1.0)
    cum = law.cumulative
    for ell in range(law.k + 1):
        lo = cum[ell - 1] if ell else 0
        for u in (lo, cum[ell] - 1):
            s = _Scripted([u] + [0] * ell)
            v = s.distance_vector(cum, law.k)
            assert v.count(-1) == ell
            assert s.sizes[0] == law.total


@pytest.mark.parametrize("gamma", [Fraction(1, 2), Fraction(1), Fraction(3, 2)])
def test_keep_bit_law_enumerated(gamma: Fraction) -> None:
    """Pr[keep] = 1/(1 + e^{−γ}) and the geometric's pmf, over every draw path of mass
    ≥ 1e-6 (the rest bounds the difference; the audit suite tests the keyed bits at
    α = 1e-6)."""
    law, left = _enumerate_law(lambda s: s.geometric(gamma), Fraction(1, 10**6))
    assert left < Fraction(1, 20)
    alpha = math.exp(-float(gamma))
    for g in range(4):
        assert abs(float(law.get(g, 0)) - (1 - alpha) * alpha**g) <= float(left) + 1e-15
    keep = sum(m for g, m in law.items() if g % 2 == 0)
    assert abs(float(keep) - 1 / (1 + alpha)) <= float(left) + 1e-15


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 1), (1, 3), (2, 5)])
def test_bernoulli_exp_enumerated(num: int, den: int) -> None:
    law, left = _enumerate_law(lambda s: s.bernoulli_exp(num, den), Fraction(1, 10**7))
    assert left < Fraction(1, 10**3)
    assert abs(float(law.get(True, 0)) - math.exp(-num / den)) <= float(left) + 1e-15


@pytest.mark.parametrize("mode", MODES)
def test_any_replay_of_any_saved_state_sends_identical_bytes(mode: str) -> None:
    """A device saved after every period and replayed three times from each saved state sends
    byte-for-byte the reports of the original run (so replays reveal nothing new)."""
    p = make_params(horizon=13, max_changes=3, epsilon=1.0, method=mode)
    gen = np.random.default_rng(17)
    for seed in range(8):
        x = [int(v) for v in gen.integers(0, 2, size=13)]
        c = LongitudinalClient(p, rng=seed)
        saved, sent = [c.to_json()], []
        for xt in x:
            sent.append([json.dumps(r, sort_keys=True) for r in c.step(xt)])
            saved.append(c.to_json())
        for t, state in enumerate(saved):
            for _ in range(3):
                again = LongitudinalClient.from_json(state)
                replay = [[json.dumps(r, sort_keys=True) for r in again.step(xt)]
                          for xt in x[t:]]
                assert replay == sent[t:]
                assert again.to_json() == saved[-1]


def test_secret_from_the_os_unless_seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    a, b = LongitudinalClient(p), LongitudinalClient(p)
    assert not a.seeded
    assert not b.seeded
    state = json.loads(a.to_json())["payload"]["state"]
    assert state["seeded"] is False
    assert state["secret"] != json.loads(b.to_json())["payload"]["state"]["secret"]
    calls: list[int] = []

    def fake(n: int) -> bytes:
        calls.append(n)
        return bytes(range(n))

    monkeypatch.setattr(keyed_mod.os, "urandom", fake)
    c = LongitudinalClient(p)
    assert calls == [32]
    assert json.loads(c.to_json())["payload"]["state"]["secret"] == bytes(range(32)).hex()
    assert LongitudinalClient(p, rng=3).seeded


def test_secret_and_keyed_fields_are_checked() -> None:
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="erlingsson")
    with pytest.raises(DataError):
        DeviceKey(b"short", p.param_id, seeded=False)
    with pytest.raises(DataError):
        DeviceKey.from_state({"secret": "zz", "seeded": False}, p.param_id)
    with pytest.raises(DataError):
        DeviceKey.from_state({"secret": "00" * 32, "seeded": 1}, p.param_id)
    key = DeviceKey(bytes(32), p.param_id, seeded=True)
    assert key.stream("coin", 1).word() == key.stream("coin", 1).word()
    assert key.stream("coin", 1).word() != key.stream("coin", 2).word()
    other = DeviceKey(bytes(32), "another-study", seeded=True)
    assert key.stream("order").word() != other.stream("order").word()
