"""Conformance vectors of the device protocol (docs/protocol.md), from the Python reference.

``python clients/vectors/generate.py`` rewrites ``primitives.json`` and ``devices.json`` beside
this script; ``tests/clients/test_vectors.py`` regenerates them in memory and compares byte for
byte, so any change of the Python client that alters one reported bit fails the test suite.

Every secret is drawn from a fixed seed (the devices are marked ``seeded``: test vectors only).
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.longitudinal import LongitudinalClient, device_bundle, make_params
from dpfreq.longitudinal.keyed import DOMAIN, KeyedStream
from dpfreq.longitudinal.params import PROTOCOL_VERSION
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import derive_key

HERE = Path(__file__).resolve().parent
MODES = ("rr", "futurerand", "calibrated", "threshold", "erlingsson")
#: (horizon, max_changes, epsilon, per_order_sparsity) run in every mode
SHAPES = (
    (1, 1, 1.0, False),
    (8, 2, 1.0, False),
    (30, 4, 1.0, False),
    (33, 3, 0.5, True),
    (64, 16, 4.0, False),
    (100, 256, 2.0, False),
)
#: further cases: (mode, horizon, max_changes, epsilon, per_order_sparsity)
EXTRA = (
    ("auto", 1000, 5, 1.0, False),
    ("erlingsson", 17, 3, 0.7, False),
    ("erlingsson", 16, 1, 0.1, False),
    ("rr", 5, 1, 1e-3, False),
)
DEVICES = 5


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n"


def bundle(params: Any) -> dict[str, Any]:
    """The device bundle of docs/protocol.md §1 for ``params`` (the library's own)."""
    return device_bundle(params)


def _inputs(rng: np.random.Generator, i: int, d0: int) -> str:
    if i == 0:
        return "0" * d0
    if i == 1:
        return "1" * d0
    flips = rng.random(d0) < (0.05, 0.2, 0.5)[i % 3]
    return "".join(str(int(b)) for b in np.cumsum(flips) % 2)


def device_case(mode: str, d0: int, k: int, eps: float, sparse: bool,
                seed: int) -> dict[str, Any]:
    """One parameter set, its bundle and ``DEVICES`` devices with their expected reports."""
    params = make_params(horizon=d0, max_changes=k, epsilon=eps, method=mode,
                         per_order_sparsity=sparse)
    rng = np.random.default_rng(seed)
    devices = []
    for i in range(DEVICES):
        client = LongitudinalClient(params, rng=int(rng.integers(1 << 62)))
        xs = _inputs(rng, i, d0)
        stops_early = i == 3 and d0 > 2  # stops at half the horizon and calls finish()
        if stops_early:
            xs = xs[:d0 // 2]
        reports = []
        for t, ch in enumerate(xs, start=1):
            for rep in client.step(int(ch)):
                reports.append([t, rep["interval"], rep["bit"]])
        if stops_early:
            reports += [[len(xs), rep["interval"], rep["bit"]] for rep in client.finish()]
        devices.append({
            "secret": client.key.to_state()["secret"], "x": xs, "finish": stops_early,
            "order": client.order,
            "r": client.r, "v": "".join("+" if a > 0 else "-" for a in client.v),
            "reports": reports,
            "final": {"t": client.t, "changes_used": client.changes_used,
                      "frozen": client.frozen, "used": client.used, "raw_x": client.raw_x,
                      "last_x": client.last_x, "prev": client.prev, "kept": client.kept},
        })
    return {"name": f"{mode}-d{d0}-k{k}-eps{eps}" + ("-sparse" if sparse else ""),
            "epsilon": eps, "bundle": bundle(params), "devices": devices}


def devices() -> dict[str, Any]:
    """Every device case: each mode on every shape, then the extra cases."""
    cases = [(m, *s) for m in MODES for s in SHAPES if not (m == "erlingsson" and s[3])]
    cases += list(EXTRA)
    return {"protocol": PROTOCOL_VERSION, "cases": [device_case(*c, seed=1000 + n)
                                     for n, c in enumerate(cases)]}


def _stream(key: bytes) -> KeyedStream:
    return KeyedStream(key)


def primitives() -> dict[str, Any]:
    """Key derivation, the word stream and each exact sampler on fixed keys."""
    rng = np.random.default_rng(20261128)
    secret = bytes(rng.bytes(32))
    derives = []
    for parts in ((), ("x",), (0,), (12345678901234567890,), (b"\x00\xff",),
                  ("tree", 1, 12), ("tree", 11, 2), ("é ü", -3, b"")):
        enc = [["b", p.hex()] if isinstance(p, bytes) else
               ["s", p] if isinstance(p, str) else ["i", str(p)] for p in parts]
        derives.append({"parts": enc, "out": derive_key(secret, *parts).hex()})
    skey = derive_key(secret, DOMAIN, "0123456789abcdef", "coin", 7)
    s = _stream(skey)
    words = [f"{s.word():016x}" for _ in range(12)]
    uniform = []
    for n in (1, 2, 3, 5, 7, 64, 1000, (1 << 32) + 1, (1 << 53) - 1, (1 << 53) + 3, 1 << 64,
              (1 << 64) + 1, 3 ** 100, (1 << 319) + 12345):
        st = _stream(derive_key(secret, "uniform", str(n)))
        uniform.append({"n": str(n), "draws": [str(st.uniform_below(n)) for _ in range(16)],
                        "words_read": st.words_read + 0})
    bern = []
    for a, m in ((0, 1), (1, 1), (1, 2), (3, 7), (4294967295, 4294967296)):
        st = _stream(derive_key(secret, "bernoulli", a, m))
        bern.append({"a": a, "m": m, "draws": [st.bernoulli_exp(a, m) for _ in range(32)],
                     "words_read": st.words_read})
    keeps = []
    for g in (Fraction(1, 10), Fraction(1), Fraction(7, 2), epsilon_to_fraction(0.7)):
        text = f"{g.numerator}/{g.denominator}"
        st = _stream(derive_key(secret, "keep", text))
        keeps.append({"gamma": text,
                      "draws": [st.keep(g) for _ in range(32)], "words_read": st.words_read})
    return {"protocol": PROTOCOL_VERSION, "secret": secret.hex(), "derive": derives,
            "stream": {"parts": [["s", DOMAIN], ["s", "0123456789abcdef"], ["s", "coin"],
                                 ["i", "7"]], "key": skey.hex(), "words": words},
            "uniform_below": uniform, "bernoulli_exp": bern, "keep": keeps}


def build() -> dict[str, str]:
    """File name → exact text of every vector file."""
    return {"primitives.json": _dump(primitives()), "devices.json": _dump(devices())}


def main() -> int:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
