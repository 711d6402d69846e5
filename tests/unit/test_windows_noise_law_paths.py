"""The certified quantiles of dpfreq.windows.laws.sums by every path give the same numbers: the
compiled Chernoff minimum and Dirichlet secant search (dpfreq.windows.noise.kernel), the numpy
fallback, and a reference (a bisection of ``[−1, r]`` over the full grid, written out here) on
many cover sizes, levels and laws, edge cases included; every quantile certified by the
few-term sum is the one the full transform of the folded law (``sum_abs_cdf``) certifies."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import fft as sfft

from dpfreq.windows.laws import sums as nl
from dpfreq.windows.noise import kernel as node_kernel

pytest.importorskip("numba")

GAMMAS = [Fraction(1, 1156), Fraction(1, 97), Fraction(1, 20), Fraction(1, 3), Fraction(2),
          Fraction(1, 40000)]
BETAS = [0.5, 0.2, 0.05, 0.01, 1e-4, 1e-7, 1e-10, 2.328e-11, 1.01e-12, 1e-12]
MS = [1, 2, 3, 4, 5, 7, 12, 14, 40, 100, 127, 128, 338, 390, 1000, 4096]


def reference_row(m: int, r: int, beta: float, gamma: float) -> float | None:
    """The certified quantile of one cover size by bisection of ``[−1, r]`` (``None``: the
    few-term sum does not apply or ``r`` is not certified)."""
    n = sfft.next_fast_len(2 * r + 1, real=True)
    k_max = nl._dirichlet_terms(m, n, gamma)
    if k_max is None:
        return None
    k = np.arange(1, k_max + 1, dtype=np.float64)
    w = (2.0 / n) * np.exp(m * nl._log_phi(k, n, gamma)) / np.sin(np.pi * k / n)
    ks = np.arange(1, k_max + 1, dtype=np.int64)
    slack = nl._slack(m, n) + nl.TRUNC

    def certified(b: int) -> bool:
        odd = 2 * b + 1
        mass = odd / n + float(np.sum(w * np.sin(np.pi * ((odd * ks) % (2 * n)) / n)))
        return bool(mass - slack >= 1.0 - beta)

    if not certified(r):
        return None
    lo, hi = -1, r
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if certified(max(mid, 0)):
            hi = mid
        else:
            lo = mid
    return float(hi)


def reference_quantiles(ms: list[int], beta: float, gamma: Fraction) -> list[float]:
    """:func:`nl._compute_quantiles` of discrete Laplace noise, written out without shortcuts."""
    lam, log_m = nl._chernoff_grid(float(gamma))
    col = np.array(ms, dtype=np.int64)[:, None]
    x = np.floor(np.min((col * log_m + math.log(2.0 / beta)) / lam, axis=1)).tolist()
    if beta <= 10 * nl.TAIL:
        return x
    rs = np.floor(np.min((col * log_m + math.log(2.0 / nl.TAIL)) / lam, axis=1)).tolist()
    out = []
    for m, v, r in zip(ms, x, rs, strict=True):
        n = sfft.next_fast_len(2 * int(r) + 1, real=True)
        q = math.inf
        if r <= nl.MAX_RADIUS and nl._slack(m, n) + nl.TRUNC < beta:
            got = reference_row(m, int(r), beta, float(gamma))
            if got is None:
                cdf = nl.sum_abs_cdf(m, gamma)
                b = int(np.searchsorted(cdf, 1.0 - beta, side="left")) if cdf is not None else -1
                got = float(b) if cdf is not None and b < cdf.size else None
            q = math.inf if got is None else got
        out.append(min(float(v), q))
    return out


@pytest.fixture(scope="module")
def kern():
    mod = node_kernel.load()
    assert mod is not None
    return mod


def by_path(monkeypatch, kern, ms: list[int], beta: float, gamma: Fraction | None,
            sigma2: int | None = None) -> tuple[list[float], list[float]]:
    """``(compiled, numpy)`` results of :func:`nl._compute_quantiles`."""
    out = []
    for mod in (kern, None):
        with monkeypatch.context() as mp:
            mp.setattr(node_kernel, "loaded", lambda mod=mod: mod)
            out.append(nl._compute_quantiles(ms, beta, gamma, sigma2))
    return out[0], out[1]


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("beta", BETAS)
def test_every_path_gives_the_reference_quantiles(monkeypatch, kern, gamma: Fraction,
                                                  beta: float) -> None:
    compiled, fallback = by_path(monkeypatch, kern, MS, beta, gamma)
    assert compiled == fallback
    assert compiled == reference_quantiles(MS, beta, gamma)


def test_random_cover_sizes_give_the_reference_quantiles(monkeypatch, kern) -> None:
    rng = np.random.default_rng(28)
    for _ in range(6):
        gamma = Fraction(int(rng.integers(1, 50)), int(rng.integers(1, 5000)))
        beta = float(10.0 ** rng.uniform(-11, -0.4))
        ms = sorted({int(m) for m in rng.integers(1, 3000, size=40)})
        compiled, fallback = by_path(monkeypatch, kern, ms, beta, gamma)
        assert compiled == fallback == reference_quantiles(ms, beta, gamma)


@pytest.mark.parametrize("sigma2", [1, 10, 1000])
def test_gaussian_quantiles_are_the_same_on_both_paths(monkeypatch, kern, sigma2: int) -> None:
    for beta in [0.05, 1e-6, 2.328e-11]:
        compiled, fallback = by_path(monkeypatch, kern, [1, 2, 5, 50], beta, None, sigma2)
        assert compiled == fallback


@pytest.mark.parametrize("gamma", [Fraction(1, 1156), Fraction(1, 20), Fraction(1, 3)])
@pytest.mark.parametrize("beta", [0.3, 0.05, 1e-3, 1e-6])
def test_compiled_quantiles_are_the_transform_quantiles(monkeypatch, kern, gamma: Fraction,
                                                        beta: float) -> None:
    """Certified by the exact folded law: ``L[b] >= 1 − β`` for ``L`` of ``sum_abs_cdf`` (a lower
    bound on ``Pr[|S_m| <= b]``), and ``b`` is the smallest such value."""
    ms = [1, 3, 12, 40, 128, 390]
    rs = [int(nl.tail_radius(m, nl.TAIL, gamma=gamma)) for m in ms]
    monkeypatch.setattr(node_kernel, "loaded", lambda: kern)
    got = nl._dirichlet_quantiles(ms, rs, beta, float(gamma))
    assert got
    for m, b in got.items():
        cdf = nl.sum_abs_cdf(m, gamma)
        assert cdf is not None
        assert cdf[int(b)] >= 1.0 - beta
        assert b == 0 or cdf[int(b) - 1] < 1.0 - beta


@pytest.mark.parametrize("guess", [0, 1, 7, 10**9, -5])
def test_search_from_any_guess_ends_where_the_bisection_does(kern, guess: int) -> None:
    gamma, beta = 1 / 1156, 0.05
    ms = [12, 40, 100, 338]
    rs = [int(nl.tail_radius(m, nl.TAIL, gamma=Fraction(1, 1156))) for m in ms]
    ns = np.array([sfft.next_fast_len(2 * r + 1, real=True) for r in rs], dtype=np.int64)
    k_col = np.array([nl._dirichlet_terms(m, int(n), gamma) for m, n in zip(ms, ns, strict=True)],
                     dtype=np.int64)
    offs = np.concatenate(([0], np.cumsum(k_col)))
    row = np.repeat(np.arange(len(ms)), k_col)
    ks = (np.arange(offs[-1]) - offs[row] + 1).astype(np.float64)
    w = nl._dirichlet_weights(np.array(ms)[row], ns[row], ks, gamma)
    slack = np.array([nl._slack(m, int(n)) + nl.TRUNC for m, n in zip(ms, ns, strict=True)])
    out = np.empty(len(ms), dtype=np.int64)
    kern.dirichlet_search(w, offs, ns, np.array(rs, dtype=np.int64), slack, 1.0 - beta,
                          np.full(len(ms), guess, dtype=np.int64), out)
    assert out.tolist() == [reference_row(m, r, beta, gamma) for m, r in zip(ms, rs, strict=True)]


def test_chernoff_minimum_equals_the_whole_grids_on_both_paths(monkeypatch, kern) -> None:
    """Both paths compute only the terms that can be the minimum (compiled: from the previous
    size's minimizer; numpy: a window around a coarse minimizer) and give the whole grid's
    minimum: any order of sizes, any level, tiny and large ``γ``."""
    rng = np.random.default_rng(5)
    ms = np.concatenate((np.arange(1, 5000, 13), rng.permutation(np.arange(1, 3000, 7)),
                         [10**6, 1, 2**40]))
    for gamma in [1 / 40000, 1 / 1156, 0.3, 5.0, 40.0]:
        for beta in [1.0, 0.5, 0.05, 1e-13, 1e-300]:
            with monkeypatch.context() as mp:
                mp.setattr(node_kernel, "loaded", lambda: kern)
                compiled = nl._chernoff_radius(ms, gamma, beta)
            with monkeypatch.context() as mp:
                mp.setattr(node_kernel, "loaded", lambda: None)
                fallback = nl._chernoff_radius(ms, gamma, beta)
            lam, log_m = nl._chernoff_grid(gamma)
            full = np.floor(np.min((ms[:, None] * log_m + math.log(2.0 / beta)) / lam, axis=1))
            assert compiled.tolist() == fallback.tolist() == full.tolist()


@pytest.mark.parametrize("nodes", [np.int64(17), np.array([[0, 3, 17], [17, 120, 3]]),
                                   np.array([5, 1 << 17, 0]), np.zeros(0, dtype=np.int64),
                                   np.array([0, 0])])
def test_cover_sizes_are_looked_up_by_count_or_by_sort_alike(nodes: np.ndarray) -> None:
    """Small sizes are counted (``bincount``), others sorted; both give each size's quantile
    in the shape of ``nodes``."""
    gamma, beta = Fraction(1, 300), 0.05
    nl._QUANTILES.clear()
    got = nl.sum_quantile(nodes, beta, gamma=gamma)
    assert got.shape == np.shape(nodes)
    for idx, m in np.ndenumerate(nodes):
        nl._QUANTILES.clear()
        alone = nl._compute_quantiles([int(m)], beta, gamma, None)[0] if m > 0 else 0.0
        assert got[idx] == alone


@pytest.mark.parametrize("width", [1, 8, 64, 512, 5000])
def test_grid_minimum_of_any_window_is_the_whole_grids(width: int) -> None:
    """Narrow windows miss the minimizer for some sizes (the whole grid is then scanned)."""
    ms = np.array([1, 2, 12, 338, 5000, 10**6], dtype=np.int64)
    for gamma in [1 / 40000, 1 / 1156, 5.0]:
        lam, log_m = nl._chernoff_grid(gamma)
        for c in [math.log(2.0), math.log(2.0 / 1e-13), -0.5]:
            full = np.min((ms[:, None] * log_m + c) / lam, axis=1)
            got = nl._grid_minimum(ms, log_m, lam, c, width)
            assert got.tolist() == full.tolist()
