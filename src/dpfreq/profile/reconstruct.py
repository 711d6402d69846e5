"""Profile reconstruction from a discrete-Laplace-noised histogram (Wu & Pagh, ICML 2024).

Unfolding a clipped histogram, the counts of noisy values on the window ``[−B .. n+B]``, the
reconstruction by Algorithms 2 and 3 or EM (:mod:`dpfreq.profile.solve`), and the release:
per-class intervals and a simultaneous band obtained by pushing simulated noise of the known law
through the same reconstruction, plus the Theorem 1.1 ℓ1 bound as a number. Apart
from :func:`unfold_clipped`, everything here is deterministic post-processing of an ε-DP
sketch and takes no ``rng``: reconstructing many times from one sketch (other norms, other
confidence levels, other methods) is free and spends no further privacy budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_count_array,
    check_epsilon,
    check_int,
    message,
)
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace, sample_geometric
from dpfreq.profile.bounds import (
    bound_parameter,
    default_bound_parameter,
    minimum_bound_parameter,
    profile_error_bounds,
)
from dpfreq.profile.checks import check_reconstruction_memory, integer_array, norm_name
from dpfreq.profile.estimate import SketchMechanism, checked_sketch_counts, sketch_fields
from dpfreq.profile.result import ProfileRelease
from dpfreq.rng import RNGLike, resolve_rng

__all__ = [
    "SKETCH_METHODS",
    "SketchMechanism",
    "bound_parameter",
    "default_bound_parameter",
    "minimum_bound_parameter",
    "noisy_profile_counts",
    "profile_error_bounds",
    "reconstruct_profile",
    "reconstruct_profile_from_counts",
    "sketch_release",
    "unfold_clipped",
]

_CHUNK = 1 << 22
SKETCH_METHODS = ("fft", "mle")


# ----------------------------------------------------------------------------------------------
# unfolding and the noisy profile


@public_errors("unfold_clipped")
def unfold_clipped(clipped: Any, *, max_count: int, epsilon: float,
                   rng: RNGLike = None) -> NDArray[np.int64]:
    """Undo the clipping of a released histogram in distribution (Wu & Pagh 2024, Lemma 4.1).

    Entries equal to 0 become ``0 − E`` and entries equal to ``n`` become ``n + E`` with
    ``E ~ DExp(α)`` i.i.d. (``Pr[E = k] = (1−α)α^k``, ``k >= 0``), so that each output has exactly
    the law of ``h[ℓ] + DLap(α)``. With ``n = 0`` every entry is a fresh ``DLap(α)`` draw.
    Draws are taken for the zeros first, then for the entries equal to ``n``, in index order.

    Parameters
    ----------
    clipped : array-like of int
        ``h̄ = clip(h + Z, 0, n)``.
    max_count : int
        The public cap ``n`` used for clipping.
    epsilon : float
        ε of the sketch; the noise parameter is ``γ = discrete_laplace_gamma(ε)``.
    rng : None, int or numpy.random.Generator, keyword-only
        Random source (None: the secure default).

    Returns
    -------
    numpy.ndarray of int64

    Notes
    -----
    **Privacy.** Post-processing of the ε-DP clipped release with fresh, data-independent
    randomness; no further privacy cost.
    """
    n = check_int(max_count, "max_count", minimum=0)
    eps = check_epsilon(epsilon, "epsilon")
    h = check_count_array(clipped, "clipped")
    if h.size and int(h.max()) > n:
        raise DataError(message("clipped", f"an array of integers in [0, {n}]",
                                "an entry above max_count"))
    gamma = discrete_laplace_gamma(eps)
    gen = resolve_rng(rng).generator
    if n == 0:
        return sample_discrete_laplace(gamma, h.size, rng=gen)
    out = h.astype(np.int64, copy=True)
    low = np.flatnonzero(out == 0)
    high = np.flatnonzero(out == n)
    out[low] -= sample_geometric(gamma, low.size, rng=gen)
    out[high] += sample_geometric(gamma, high.size, rng=gen)
    return out


@public_errors("noisy_profile_counts")
def noisy_profile_counts(noisy_histogram: Any, *, max_count: int, B: int) -> NDArray[np.int64]:
    """Counts of noisy values on ``t ∈ [−B .. n+B]``, position ``i = t + B``.

    Values outside the window are not counted (they only occur off the event ``E_B``). One
    vectorized pass over the ``d`` counters in chunks (bounded temporaries).

    Returns
    -------
    numpy.ndarray of int64, length ``n + 2B + 1``
    """
    n = check_int(max_count, "max_count", minimum=0)
    b = check_int(B, "B", minimum=0)
    h = integer_array(noisy_histogram, "noisy_histogram")
    P = n + 2 * b + 1
    counts = np.zeros(P + 2, dtype=np.int64)
    for start in range(0, h.size, _CHUNK):
        v = np.clip(h[start : start + _CHUNK].astype(np.int64, copy=False), -b - 1, n + b + 1)
        v += b + 1
        counts += np.bincount(v, minlength=P + 2)
    return counts[1:-1].copy()


# ----------------------------------------------------------------------------------------------
# the release: simulated intervals and the Theorem 1.1 bound


def sketch_release(
    counts: NDArray[np.int64], *, domain_size: int, max_count: int, epsilon: float, B: int,
    method: str, norm: str, confidence: float, seeded: bool,
    mechanism_params: Mapping[str, Any] | None = None,
) -> ProfileRelease:
    """The release of a Wu & Pagh reconstruction from validated counts of noisy values
    (:func:`dpfreq.profile.estimate.sketch_fields`, the post-processing, made a release)."""
    return ProfileRelease(**sketch_fields(
        counts, domain_size=domain_size, max_count=max_count, epsilon=epsilon, B=B,
        method=method, norm=norm, confidence=confidence, seeded=seeded,
        mechanism_params=mechanism_params))


@public_errors("reconstruct_profile_from_counts")
def reconstruct_profile_from_counts(
    profile_counts: Any,
    *,
    domain_size: int,
    max_count: int,
    epsilon: float,
    confidence: float = 0.95,
    norm: int | float | str = 1,
    method: str = "fft",
    B: int | None = None,
    seeded: bool = False,
    mechanism_params: Mapping[str, Any] | None = None,
) -> ProfileRelease:
    """Reconstruct the profile from the counts of noisy values on ``[−B .. n+B]``.

    Parameters
    ----------
    profile_counts : array-like of int
        Output of :func:`noisy_profile_counts` (length ``n + 2B + 1``; position ``i ↔ t = i − B``).
        Items whose noisy value fell outside the window are simply not counted.
    domain_size : int
        Public number of items ``d`` (the profile's normalizer).
    max_count : int
        Public count cap ``n``.
    epsilon : float
        ε of the sketch; the kernel uses ``α = exp(−γ)`` with ``γ = discrete_laplace_gamma(ε)``,
        exactly the noise that was drawn.
    confidence : float, default 0.95
        Level of the per-class intervals, of the band and of ``l1_bound``.
    norm : 1, 2 or "inf", default 1
        Norm of Algorithm 2's objective.
    method : {"fft", "mle"}, default "fft"
        ``"fft"``: Algorithms 2+3 of the paper. ``"mle"``: EM maximum likelihood started from
        the ``"fft"`` solution mixed with the uniform profile.
    B : int, optional
        Window parameter the counts were made with; inferred from the length when omitted. Must
        be at least ``B_min(ε)``. If below :func:`bound_parameter`, the confidence of
        ``l1_bound`` is lowered to ``1 − η − d·2α^{B+1}/(1+α)``.
    seeded : bool, default False
        Whether the sketch's noise came from a seeded (non-production) source.
    mechanism_params : Mapping, optional
        Extra parameters to record (e.g. the sketch's sampling rate).

    Returns
    -------
    ProfileRelease
        ``error`` holds per-class intervals and a simultaneous band (``kind="interval"``);
        ``l1_bound`` the Theorem 1.1 bound; ``unit`` is ``"event"``.

    Raises
    ------
    ParameterError, DataError
        On invalid parameters or counts, or a window too large for memory.

    Notes
    -----
    **Privacy.** Unit of privacy: one occurrence of one item (neighbouring histograms differ by
    1 in one coordinate). The sketch ``h + DLap(e^{−γ})`` is ε-DP; this function, the
    simulated intervals included, is post-processing of it and costs no budget, however often
    it is called.
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    n = check_int(max_count, "max_count", minimum=0)
    eps = check_epsilon(epsilon, "epsilon")
    conf = check_confidence(confidence, "confidence")
    norm_s = norm_name(norm)
    method_s = check_choice(method, "method", SKETCH_METHODS)
    if not isinstance(seeded, bool | np.bool_):
        raise ParameterError(message("seeded", "a bool", seeded))
    if mechanism_params is not None and not isinstance(mechanism_params, Mapping):
        raise ParameterError(message("mechanism_params", "a mapping or None",
                                     mechanism_params))
    counts, b = checked_sketch_counts(profile_counts, domain_size=d, max_count=n, epsilon=eps,
                                      B=B)
    return sketch_release(counts, domain_size=d, max_count=n, epsilon=eps, B=b,
                          method=method_s, norm=norm_s, confidence=conf, seeded=bool(seeded),
                          mechanism_params=mechanism_params)


@public_errors("reconstruct_profile")
def reconstruct_profile(
    noisy_histogram: Any,
    *,
    max_count: int,
    epsilon: float,
    confidence: float = 0.95,
    norm: int | float | str = 1,
    method: str = "fft",
    clipped: bool = False,
    domain_size: int | None = None,
    rng: RNGLike = None,
    seeded: bool = False,
    mechanism_params: Mapping[str, Any] | None = None,
) -> ProfileRelease:
    """Private profile from a discrete-Laplace-noised histogram (Wu & Pagh 2024).

    Pipeline: unfold if clipped, the window parameter B (the smallest admissible B for which
    ``n + 2B + 1`` is a fast FFT length, at failure probability ``(1 − confidence)/2``), the
    counts of noisy values, Algorithms 2+3 (or EM), and the release of
    :func:`reconstruct_profile_from_counts`. Cost ``O(d + P log P)`` plus the simulated
    intervals.

    Parameters
    ----------
    noisy_histogram : array-like of int
        One noisy counter per domain item: the unclipped ``h + DLap(e^{−γ})`` (any sign), or the
        clipped release ``clip(h + Z, 0, n)`` when ``clipped=True``.
    max_count : int
        Public count cap ``n``.
    epsilon : float
        ε of the sketch (the kernel uses ``γ = discrete_laplace_gamma(ε)``).
    confidence, norm, method
        As in :func:`reconstruct_profile_from_counts`.
    clipped : bool, default False
        The input is the clipped release and is unfolded first (randomized, uses ``rng``).
    domain_size : int, optional
        ``d``; defaults to (and must equal) the length of ``noisy_histogram``.
    rng : None, int or numpy.random.Generator, keyword-only
        Only used to unfold a clipped input.
    seeded : bool, default False
        Whether the sketch was noised from a seeded source; the release is also marked seeded
        when a seeded ``rng`` unfolded it.
    mechanism_params : Mapping, optional
        Extra parameters recorded in the release.

    Returns
    -------
    ProfileRelease

    Notes
    -----
    **Privacy.** Unit of privacy: one occurrence of one item; neighbouring histograms differ by
    at most 1 in one coordinate. The noisy histogram is ε-DP (discrete Laplace, Ghosh et al.
    2009, with or without clipping); everything here is post-processing, so the release is
    ε-DP and reconstructing many times from one sketch spends no further budget.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import ProfileSketch, reconstruct_profile
    >>> sketch = ProfileSketch.from_counts(np.array([0, 1, 1, 2, 3]), domain_size=200,
    ...                                    max_count=3, epsilon=2.0, rng=3)
    >>> rel = reconstruct_profile(sketch.noisy_counts(), max_count=3, epsilon=2.0,
    ...                           confidence=0.9)
    >>> rel.value.shape, rel.unit, rel.error.confidence
    ((4,), 'event', 0.9)
    """
    n = check_int(max_count, "max_count", minimum=0)
    eps = check_epsilon(epsilon, "epsilon")
    conf = check_confidence(confidence, "confidence")
    norm_s = norm_name(norm)
    check_choice(method, "method", SKETCH_METHODS)
    if not isinstance(clipped, bool | np.bool_):
        raise ParameterError(message("clipped", "a bool", clipped))
    if mechanism_params is not None and not isinstance(mechanism_params, Mapping):
        raise ParameterError(message("mechanism_params", "a mapping or None",
                                     mechanism_params))
    if clipped:
        h = check_count_array(noisy_histogram, "noisy_histogram")
        if h.size and int(h.max()) > n:
            raise DataError(message("noisy_histogram", "the clipped release: integers in "
                                    f"[0, {n}] (clipped=True)", "an entry above max_count"))
    else:
        h = integer_array(noisy_histogram, "noisy_histogram")
    if h.size == 0:
        raise DataError(message("noisy_histogram", "a non-empty array of integers",
                                "an empty array"))
    if domain_size is not None:
        d = check_int(domain_size, "domain_size", minimum=1)
        if d != h.size:
            raise DataError(message("domain_size", "the length of noisy_histogram "
                                    f"({h.size}): one noisy counter per domain item", d))
    d = h.size
    b = default_bound_parameter(d, n, eps, (1.0 - conf) / 2.0)
    check_reconstruction_memory(n, b, epsilon=eps)
    was_seeded = bool(seeded)
    if clipped:
        res = resolve_rng(rng)
        h = unfold_clipped(h, max_count=n, epsilon=eps, rng=res.generator)
        was_seeded = was_seeded or res.seeded
    counts = noisy_profile_counts(h, max_count=n, B=b)
    params = dict(mechanism_params or {})
    params["unfolded"] = bool(clipped)
    return reconstruct_profile_from_counts(
        counts, domain_size=d, max_count=n, epsilon=eps, confidence=conf, norm=norm_s,
        method=method, B=b, seeded=was_seeded, mechanism_params=params,
    )
