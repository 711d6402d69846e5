"""The fast first ask of arbitrary windows gives bit-identical answers and intervals.

* A seeded release answered by the fast path (kept upper-level row tables, lower level pairs
  listed query by query, exact counts and intervals in a helper thread or not) equals, field
  by field, the same release answered the straightforward way: every node of every dominance
  cover drawn one by one and summed, in one thread.
* The keyed node noise equals golden values computed by the element-by-element implementation
  this path replaced (provenance: ``KeyedDiscreteLaplace`` / ``KeyedDiscreteGaussian`` of commit
  23e1130, the log-guess count and one AES call per 2^16 ids): the values are a deterministic
  function of (key, structure, id), so any change in them shows here.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows import release_window_counts
from dpfreq.windows import state as answers_mod
from dpfreq.windows.layouts import dyadic
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace
from dpfreq.windows.structures.windows import ProductTrees

KEY = bytes(range(32))
FIELDS = ("estimate", "sd", "lower", "upper", "band_lower", "band_upper", "bias_bound")


def straightforward_noise(self: ProductTrees, t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
    """Tree 0 minus tree 1, node by node over every (query, node) pair of the covers."""
    q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64), np.asarray(t2, dtype=np.int64))
    q, ids = dyadic.dominance_pairs(q1.ravel() - 1, q2.ravel() - 1, self.domain)
    out = np.zeros(q1.size, dtype=np.int64)
    np.add.at(out, q, self._impl[0].noise_of(ids) - self._impl[1].noise_of(ids))
    return out.reshape(q1.shape)


def answers(horizon: int, t1: np.ndarray, t2: np.ndarray) -> tuple[list, int]:
    """Answers of a seeded release for k = 1, 2 and one scalar window, and the split ``S`` of
    its k = 1 structure after them (``2L`` when nothing was folded into tables)."""
    rng = np.random.default_rng(horizon)
    n = 40 * horizon
    item, times = rng.integers(0, horizon, n), rng.integers(1, horizon + 1, n)
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[1, 2],
                                windows=["all"], method={"all": "tree2d"}, unit="event", rng=7)
    out = [rel.window(t1, t2, k) for k in (1, 2)] + [rel.window(int(t1[0]), int(t2[0]), 1)]
    return out, rel._state.structures[("all", 1)]._sum._split


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize(("horizon", "n_windows"), [(16, 60), (1000, 3000)])
def test_fast_first_ask_equals_the_straightforward_sum(monkeypatch: pytest.MonkeyPatch,
                                                       horizon: int, n_windows: int,
                                                       overlap: bool) -> None:
    """``overlap``: exact counts and intervals in the helper thread while the noise is drawn
    (the straightforward run never uses it)."""
    rng = np.random.default_rng(n_windows)
    a = rng.integers(1, horizon + 1, size=(2, n_windows))
    t1, t2 = a.min(axis=0), a.max(axis=0)
    t1[:3], t2[:3] = (1, 1, horizon), (horizon, 1, horizon)  # whole range, first, last period
    with monkeypatch.context() as m:
        m.setattr(answers_mod, "OVERLAP_MIN", 1 if overlap else 10**9)
        fast, split = answers(horizon, t1, t2)
    with monkeypatch.context() as m:
        m.setattr(answers_mod, "OVERLAP_MIN", 10**9)
        m.setattr(ProductTrees, "noise", straightforward_noise)
        slow, _ = answers(horizon, t1, t2)
    for f, s in zip(fast, slow, strict=True):
        for name in FIELDS:
            assert np.array_equal(getattr(f, name), getattr(s, name)), name
    levels = dyadic.domain_size(horizon).bit_length()
    assert 0 < split < 2 * levels - 2  # both halves ran: tables for some level pairs only


def digest(values: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(values, dtype="<i8").tobytes()).hexdigest()


GOLDEN = {
    Fraction(1, 1156): "379cda18e80fdbb391120917f1329e9fc7a314930fa9dda58ac0c77ebe872cc7",
    Fraction(1, 4700): "72b0ceecef3fbc176a340b65d328270ecc298ebcd3891fbc07c6d7937c14f1a4",
    Fraction(1, 3): "da77d6f716a8a4dcbd75307188147290c64e16f6a6ad028ac0dc19e2df9900cb",
    Fraction(1, 20000): "70e2732a8b370af98746c582311af670b12e5d32b3d4d8eb182838fbbde7592e",
}
GOLDEN_GAUSSIAN = "bb833edad99ae6c845a83e28e6ff1482fb388707d084f85dddb34aa97ebedc73"


def golden_ids() -> np.ndarray:
    far = np.random.default_rng(28).integers(0, 1 << 62, 15000)
    return np.unique(np.concatenate((np.arange(5000), far))).astype(np.int64)


@pytest.mark.parametrize("gamma", sorted(GOLDEN))
def test_keyed_laplace_values_are_unchanged(gamma: Fraction) -> None:
    """γ = 1/1156 (the T = 2^16 trees at ε = 1: a table of 16,384 thresholds, almost no
    tail draws), 1/4700 (3% tail draws), 1/3 (a short table) and 1/20000 (buckets too fine:
    the logarithm guess)."""
    values = KeyedDiscreteLaplace(KEY, ("all", 1, 0), gamma).noise(golden_ids())
    assert digest(values) == GOLDEN[gamma]


def test_keyed_gaussian_values_are_unchanged() -> None:
    values = KeyedDiscreteGaussian(KEY, ("all", 1, 1), 5000.0).noise(golden_ids()[:4000])
    assert digest(values) == GOLDEN_GAUSSIAN
