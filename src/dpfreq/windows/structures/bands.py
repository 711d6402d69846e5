"""Simultaneous bands for tree answers that share node noise, calibrated on their exact joint law.

A band holds for every window of the answering family at once. Where each window has its own
noise (``per_query``), Šidák's per-answer level ``1 − (1 − β)^{1/n}`` is exact. Where answers
share node noises, the union bound ``β/n`` is certified but loose (measured at nominal 0.90:
0.927 for the cumulative tree, 0.929 for item-level ``per_start``). For the consistent trees
(``tree``, ``per_start`` and ``compressed`` with domain at most
:data:`~dpfreq.windows.structures.base.CONSISTENCY_MAX_DOMAIN`) the band is calibrated instead:

* every answer's noise is a fixed linear map of i.i.d. node noises (the consistency weights
  ``A`` of :func:`~dpfreq.windows.layouts.weights.layout_weights`), independent of the data;
* :data:`BAND_DRAWS` independent copies of the family's whole noise vector are drawn from that
  exact law (the same exact node sampler and the same map), and ``c`` is the order statistic
  (:func:`~dpfreq.order_stats.order_quantile`) at level ``1 − β`` of their maxima
  ``max_w |N_w| / h_w``, where ``h_w`` is window ``w``'s own half-width at level ``β`` (the
  certified quantile of its exact law, public, floored at one item by :func:`band_scale`;
  scaling by it rather than by the standard deviation balances windows whose laws have tails
  of different shapes);
* the band is ``estimate ± max(c, 1)·h_w`` (never narrower than the answer's own interval).

Guarantee. The real noise vector and the simulated ones are i.i.d., so the real maximum is
exchangeable with the simulated maxima and the band holds with probability at least
``⌈(N + 1)(1 − β)⌉/(N + 1) >= 1 − β`` over the noise and the simulation together: an exact
finite-sample statement, not an approximation. The simulation's stream is derived from the
release's secret key under its own name, so it is independent of the real noise and the same
on every load; ``c`` is a function of draws independent of the data and of the real noise, so
releasing it costs no privacy. A plan (no key) simulates with a public stream: its band is a
prediction, within Monte Carlo error of the release's.

The simple counter's answers are the running sums of its leaf noises: each simulated family is
one cumulative sum of ``T`` exact leaf draws (:func:`walk_multiplier`).

The trees without consistency (``blocks``, ``single``, ``tree2d`` and a binary or ``B``-ary
cumulative tree too large for consistency) are calibrated the same way: their answers' noises are
signed sums of node noises over the answers' covers, a sparse ``{−1, 0, 1}`` map of the nodes
the family uses (:func:`cover_map`: the structure's own ``node_cover``, the same covers its
``noise`` sums), so the simulation draws those nodes and applies the map. The maxima are then
discrete (integer noises over public scales); the real maximum is at most the simulated order
statistic with probability at least ``⌈(N + 1)(1 − β)⌉/(N + 1)`` all the same (ties only add
coverage).

Where the simulation would draw more than :data:`BAND_MAX_NODES` node noises or cost more than
:data:`BAND_MAX_WORK` multiply-adds (per_start beyond ``T = 64``, tree2d beyond ``T = 64``, a
single tree beyond ``T = 8192``), and for per-start trees without consistency, the union bound
is kept.

Each structure chooses its simulation (``simulate_band`` of
:class:`~dpfreq.windows.structures.protocol.WindowStructure`): :func:`walk_multiplier`,
:func:`weights_multiplier` or :func:`cover_multiplier`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import public_errors
from dpfreq.order_stats import order_quantile
from dpfreq.windows.noise.keyed import structure_name
from dpfreq.windows.structures.protocol import NodeSampler, WindowStructure

__all__ = [
    "BAND_DRAWS",
    "BAND_MAX_NODES",
    "BAND_MAX_WORK",
    "PLAN_KEY",
    "band_multiplier",
    "band_scale",
    "cover_map",
    "cover_multiplier",
    "plan_multiplier",
    "walk_multiplier",
    "weights_multiplier",
]

#: simulated copies of the family's noise vector (the level is met exactly at any count; more
#: draws only make the band's width less variable between releases)
BAND_DRAWS = 1000

#: largest simulation run: node draws, and multiply-adds of the map from nodes to answers
#: (each under about two seconds on the reference machine: up to T = 64 for per-start and
#: product trees, T = 8192 for one tree)
BAND_MAX_NODES = 1 << 23
BAND_MAX_WORK = 1 << 31

#: public key of the plan's simulation (a plan has no secret; its band is a prediction)
PLAN_KEY = b"dpfreq-windows-band-plan-public-key"

_SCHEME = "band-simulation"
_CHUNK_VALUES = 1 << 22  # node draws per batch of the simulation (32 MiB of float64)


def band_scale(half: NDArray[np.float64]) -> NDArray[np.float64]:
    """The public scale ``h_w`` of each window in the band: its own half-width at ``β``,
    floored at one item, so that a window whose interval is ``±0`` still counts as missed in
    the simulation whenever its noise is not 0 (the release's band is ``max(c, 1)·h_w`` with
    this same scale)."""
    return np.maximum(half, 1.0)


def _node_sampler(s: WindowStructure, key: bytes, name: tuple[str | int, ...]) -> NodeSampler:
    """``sample(start, count)``: i.i.d. node noises number ``start .. start + count − 1`` of
    the simulation, from the structure's exact node law (called with consecutive ranges)."""
    sample: NodeSampler = s.law.simulation(key, name, _SCHEME)
    return sample


def cover_map(s: WindowStructure, t1: NDArray[np.int64], t2: NDArray[np.int64]
              ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]] | None:
    """Every node noise in the answers to windows ``(t1, t2)``, with its sign, as the
    structure's ``noise`` sums them.

    Returns
    -------
    (rows, ids, signs) or None
        Answer ``i``'s noise is ``Σ signs[j]·Z[ids[j]]`` over the ``j`` with ``rows[j] = i``,
        where ``Z`` are i.i.d. node noises of the structure's law and ``ids`` number the
        nodes of the whole structure (tree ``c`` of a 1d layout: ``c·2D + heap id``; product
        tree ``i``: ``i·(2D)² + u·2D + v``). ``None`` for a structure whose answers are not
        such sums (consistent trees, ``per_query``, per-start trees).
    """
    return None if s.consistent else s.node_cover(t1, t2)


def cover_multiplier(s: WindowStructure, beta: float, draws: int, sample: NodeSampler
                     ) -> float | None:
    """The multiplier of a structure whose answers are signed sums over covers
    (:func:`cover_map`), or ``None`` beyond the simulation's limits."""
    if draws * s.n_family > BAND_MAX_WORK:  # every cover holds a node: never list the family
        return None
    t1, t2 = s.family_queries()
    if draws * int(s.nodes(t1, t2).sum()) > BAND_MAX_WORK:
        return None
    cover = cover_map(s, t1, t2)
    if cover is None:
        return None
    rows, ids, signs = cover
    nodes, cols = np.unique(ids, return_inverse=True)
    if draws * nodes.size > BAND_MAX_NODES:
        return None
    import scipy.sparse  # here, past the limits: only the structures simulated here need it

    # sparse: a window's cover holds O(log² D) of the family's O(D²) nodes
    m = scipy.sparse.csr_matrix((signs.astype(np.float64), (rows, cols.ravel())),
                                shape=(t1.size, nodes.size))
    scale = band_scale(s.halfwidth(t1, t2, beta))[:, None]
    chunk = max(1, _CHUNK_VALUES // max(nodes.size, t1.size))
    maxima = np.empty(draws, dtype=np.float64)
    for lo in range(0, draws, chunk):
        n = min(chunk, draws - lo)
        z = sample(lo * nodes.size, n * nodes.size).reshape(n, nodes.size).astype(np.float64)
        maxima[lo:lo + n] = (np.abs(m @ z.T) / scale).max(axis=0)
    return float(order_quantile(maxima, 1.0 - beta))


def walk_multiplier(s: WindowStructure, beta: float, draws: int, sample: NodeSampler
                    ) -> float | None:
    """The multiplier of the simple counter: its answers are the running sums of ``T`` i.i.d.
    leaf noises, so each simulated family is one cumulative sum (``None`` beyond the limits)."""
    t = s.horizon
    if draws * t > BAND_MAX_NODES:
        return None
    ts = np.arange(1, t + 1, dtype=np.int64)
    scale = band_scale(s.halfwidth(np.ones_like(ts), ts, beta))
    chunk = max(1, _CHUNK_VALUES // t)
    maxima = np.empty(draws, dtype=np.float64)
    for lo in range(0, draws, chunk):
        n = min(chunk, draws - lo)
        z = sample(lo * t, n * t).reshape(n, t)
        maxima[lo:lo + n] = (np.abs(np.cumsum(z, axis=1)) / scale).max(axis=1)
    return float(order_quantile(maxima, 1.0 - beta))


_PLAN_MEMO: dict[tuple[Any, ...], float | None] = {}
_PLAN_MEMO_SIZE = 256


def plan_multiplier(s: WindowStructure, beta: float, name: tuple[Any, ...]) -> float | None:
    """:func:`band_multiplier` on the public :data:`PLAN_KEY`, remembered by ``name`` and the
    node law: structures a plan compares that differ only in what the simulation does not read
    (``k`` where the node law is the same) share one simulation. ``name`` must determine the
    layout (family, method, horizon, level, width, group size)."""
    memo = (tuple(name), float(beta), s.law, bool(s.consistent))
    if memo not in _PLAN_MEMO:
        if len(_PLAN_MEMO) >= _PLAN_MEMO_SIZE:
            _PLAN_MEMO.clear()
        _PLAN_MEMO[memo] = band_multiplier(s, beta, PLAN_KEY, name)
    return _PLAN_MEMO[memo]


@public_errors("band_multiplier")
def band_multiplier(s: WindowStructure, beta: float, key: bytes, name: Any,
                    draws: int = BAND_DRAWS) -> float | None:
    """``c`` with ``Pr[|N_w| <= c·h_w for every window w of the family] >= 1 − β``, where
    ``h_w`` is the window's own (exact, per-answer) half-width at level ``β``.

    Parameters
    ----------
    s : WindowStructure
        A calibrated structure (its node law and consistency map are public).
    beta : float
        ``1 − confidence`` of the band.
    key : bytes
        The release's secret key (or :data:`PLAN_KEY` for a plan).
    name : str, int or tuple of them
        The structure's name in its release; the simulation draws under it with its own scheme.
    draws : int
        Number of simulated noise vectors.

    Returns
    -------
    float or None
        The multiplier, or ``None`` where the band keeps the union bound (module docstring).
    """
    if s.domain < 1 or not s.law.usable:  # per_query, or unusable
        return None
    return s.simulate_band(beta, draws, _node_sampler(s, key, structure_name(
        name)))


def weights_multiplier(s: WindowStructure, limits: NDArray[np.int64], step: int, beta: float,
                       draws: int, sample: NodeSampler) -> float | None:
    """The multiplier of consistent trees: tree ``i`` answers the prefix values
    ``x < limits[i]`` by the weights of
    :meth:`~dpfreq.windows.structures.protocol.WindowStructure.weights`
    (the window ``[1, x·step + 1]`` has prefix value ``x``); ``None`` beyond the limits."""
    d = s.domain
    weights = s.weights()
    n_nodes = weights.shape[1]
    if draws * limits.size * n_nodes > BAND_MAX_NODES or \
            draws * limits.size * n_nodes * d > BAND_MAX_WORK:
        return None
    scale = np.full(d, math.inf)  # prefixes no tree answers never miss
    xs = np.arange(int(limits.max()), dtype=np.int64)
    scale[:xs.size] = band_scale(s.halfwidth(np.ones_like(xs), xs * step + 1, beta))
    valid = np.arange(d)[None, :] < limits[:, None]  # (trees, d)
    per_draw = limits.size * n_nodes
    chunk = max(1, _CHUNK_VALUES // per_draw)
    maxima = np.empty(draws, dtype=np.float64)
    for lo in range(0, draws, chunk):
        n = min(chunk, draws - lo)
        z = sample(lo * per_draw, n * per_draw).reshape(n, limits.size, n_nodes)
        z = z.astype(np.float64)  # binary trees: heap id 0 is no node, its weight is 0
        ratio = np.abs(z @ weights.T) / scale
        maxima[lo:lo + n] = np.where(valid, ratio, 0.0).max(axis=(1, 2))
    return float(order_quantile(maxima, 1.0 - beta))
