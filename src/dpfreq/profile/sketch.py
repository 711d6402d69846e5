"""The updatable ε-DP noisy histogram of Wu & Pagh (2024) over a public domain.

:class:`ProfileSketch` holds ``h~[ℓ] = h[ℓ] + Z_ℓ`` for every item ``ℓ`` of a public domain, with
``Z_ℓ ~ DLap(e^{−γ})`` exact and i.i.d., drawn once at creation
(:mod:`dpfreq.profile.histogram_noise`) and stored *unclipped* (int64), so that the sketch
stays updatable: an update is a vector addition. Reconstructions
(:meth:`ProfileSketch.reconstruct`) and the clipped release (:meth:`ProfileSketch.clipped`) are
post-processing and cost no further budget.

Optionally the domain is sub-sampled by a keyed hash (:mod:`dpfreq.profile.domain_sampling`):
only sampled items get a counter, and the profile reconstructed is that of the sample.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_confidence,
    check_count_array,
    check_epsilon,
    check_int,
    message,
)
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.bounds import default_bound_parameter
from dpfreq.profile.checks import check_reconstruction_memory
from dpfreq.profile.domain_sampling import check_sample_rate, sample_domain
from dpfreq.profile.histogram_noise import NOISE_BLOCK, domain_noise, master_key
from dpfreq.profile.reconstruct import reconstruct_profile
from dpfreq.profile.result import ProfileRelease
from dpfreq.profile.sketch_checks import (
    check_keys,
    fits_int64,
    group_sums,
    increments,
    merge_refused,
)
from dpfreq.profile.sketch_files import DOMAIN_LIMIT, SketchState, read_sketch, write_sketch
from dpfreq.resources import check_memory
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["ProfileSketch", "sample_domain"]

# ----------------------------------------------------------------------------------------------
# the sketch


class ProfileSketch:
    """An ε-DP, updatable noisy histogram over a public domain, for profile reconstruction.

    Creating the sketch draws the noise: every counter starts at ``Z_ℓ ~ DLap(e^{−γ})`` (exact,
    ``γ = discrete_laplace_gamma(ε) <= ε``); :meth:`update` then adds raw occurrence counts.

    Parameters
    ----------
    domain_size : int, optional
        Public domain size ``d`` (``1 <= d < 2^62``); items are the integers ``0..d−1``. Give
        this or ``keys``. The counters (8 bytes each) must fit in the memory available now.
    keys : sequence of int or str, optional
        The public domain as an explicit list of distinct item keys; ``keys[i]`` has index
        ``i``. ``domain_size``, if also given, must equal ``len(keys)``.
    max_count : int
        Public count cap ``n`` (length ``n + 1`` of the reconstructed profile, clip range). The
        reconstruction's arrays of ``n + 2B + 1`` values must fit in memory.
    epsilon : float
        Privacy parameter ε in [1e-6, 1000] (pure ε-DP). No default.
    rng : None, int or numpy.random.Generator, keyword-only
        ``None``: the secure CSPRNG. A seed or generator makes the sketch reproducible and marks
        it (and its releases) ``seeded`` — for tests only.
    sample_rate : float, optional
        Rate ``ρ ∈ (0, 1]`` of hash sampling of the domain; only the sampled items get a
        counter and updates for the others are dropped. Default: no sampling.
    sample_key : bytes, optional
        Key of the sampling hash (at least 8 bytes; public, data-independent). Default: 16
        bytes from the OS (or from ``rng`` when it is seeded), drawn after the budget is
        charged (and again while a drawn key would keep no item: the sample is independent of
        the data, so this costs nothing).
    accountant : Accountant or Ledger, optional
        Charged ``(ε, 0)`` after every check (parameters, memory) has passed and before the
        noise is drawn; a refused call spends nothing.

    Attributes
    ----------
    domain_size, max_count, epsilon, gamma, seeded, sample_rate, sampled_domain_size, keys

    Notes
    -----
    **Privacy.** Unit of privacy: ``"event"`` — add or remove one occurrence of one item
    (the only relation the sketch supports: one item's rows move its counter by up to the
    cap, so ``"item"`` and ``"item_replace"`` would need noise scaled to it; for those, use
    ``release_profile`` with the direct method). Neighbouring histograms differ by 1 in one
    coordinate. The stored counters ``h + Z`` — one exact ``DLap(e^{−γ})``
    draw per counter, ``γ <= ε`` — are ε-DP (Ghosh, Roughgarden & Sundararajan 2009), however
    many updates were applied, since the noise was drawn once and updates only add the data.
    :meth:`clipped`, :meth:`noisy_counts`, :meth:`reconstruct` (any number of times, any norm,
    confidence or method) and :meth:`save` are post-processing and spend no further budget. If
    a person contributes many events, privacy is per event (``kε`` for ``k`` events). Hash
    sampling selects items by a data-independent function and keeps ε-DP.

    Updates are added **unclamped** — the sketch does not know the exact totals — so the caller
    must keep every item's total within ``max_count`` for the reconstruction to be accurate
    (privacy does not depend on it). :meth:`from_counts` clamps the counts it is given. An
    update that would take a counter beyond int64 is refused and changes nothing.

    Two independently noised sketches cannot be added (``+`` raises): the sum would carry two
    noise draws per counter while the reconstruction's kernel assumes exactly one.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import ProfileSketch
    >>> sketch = ProfileSketch(1000, max_count=5, epsilon=1.0, rng=1)
    >>> sketch.update([3, 3, 7, 42])  # one call per batch of events (item ids)
    >>> rel = sketch.reconstruct(confidence=0.9)
    >>> rel.value.shape, rel.unit, rel.method
    ((6,), 'event', 'fft')
    >>> round(float(rel.value.sum()), 6)
    1.0
    """

    __array_ufunc__ = None  # numpy must not try ``array + sketch`` element-wise

    @public_errors("ProfileSketch")
    def __init__(
        self,
        domain_size: int | None = None,
        *,
        keys: Sequence[Any] | NDArray[Any] | None = None,
        max_count: int,
        epsilon: float,
        rng: RNGLike = None,
        sample_rate: float | None = None,
        sample_key: bytes | None = None,
        accountant: BudgetAccountant | None = None,
    ) -> None:
        n = check_int(max_count, "max_count", minimum=0, maximum=DOMAIN_LIMIT)
        eps = check_epsilon(epsilon, "epsilon")
        key_arr = None if keys is None else check_keys(keys)
        d = self._domain(domain_size, key_arr)
        rho = None if sample_rate is None else check_sample_rate(sample_rate, "sample_rate")
        if sample_key is not None and (not isinstance(sample_key, bytes | bytearray)
                                       or len(sample_key) < 8):
            raise ParameterError(message("sample_key", "bytes of length >= 8", sample_key))
        acct = check_accountant(accountant)
        resolved = resolve_rng(rng)
        expected = d if rho is None else int(rho * d) + 1
        check_memory(16 * expected + 64 * NOISE_BLOCK, param="domain_size", value=d,
                     what="the sketch's counters (8 bytes per item)")
        check_reconstruction_memory(n, 0, epsilon=eps)  # n alone, before B's search
        check_reconstruction_memory(n, default_bound_parameter(expected, n, eps, 0.025),
                                    epsilon=eps)
        sample, skey = None, None
        if rho is not None and rho * d < 1:  # public: decided before any draw or spend
            raise ParameterError(message("sample_rate", "at least 1/domain_size (an "
                                         "expected sample of at least one item)", sample_rate))
        if rho is not None and sample_key is not None:  # a given key: the sample is public
            skey = bytes(sample_key)
            sample = sample_domain(d, rate=rho, key=skey)
            if sample.size == 0:
                raise ParameterError(message("sample_key", "a key whose sample keeps at "
                                             "least one of the domain items", sample_key))
        if acct is not None:
            acct.spend(eps, 0.0, label="ProfileSketch", unit="event")
        while rho is not None and (sample is None or sample.size == 0):
            # drawn after the spend; the sample is data-independent, so drawing another key
            # when one keeps no item changes nothing for privacy (Pr <= (1 − ρ)^d <= 1/e)
            skey = resolved.generator.bytes(16) if resolved.seeded else os.urandom(16)
            sample = sample_domain(d, rate=rho, key=skey)
        gamma = discrete_laplace_gamma(eps)
        size = d if sample is None else int(sample.size)
        noisy = domain_noise(master_key(resolved), size, gamma)
        self._set_state(SketchState(noisy=noisy, epsilon=eps, gamma=gamma, domain_size=d,
                                    max_count=n, seeded=resolved.seeded, keys=key_arr,
                                    sample_rate=rho, sample_key=skey, sample=sample))

    @staticmethod
    def _domain(domain_size: Any, key_arr: NDArray[Any] | None) -> int:
        if domain_size is None:
            if key_arr is None:
                raise ParameterError(message("domain_size", "given (or keys given)", None))
            return int(key_arr.size)
        d = check_int(domain_size, "domain_size", minimum=1, maximum=DOMAIN_LIMIT - 1)
        if key_arr is not None and key_arr.size != d:
            raise ParameterError(message("domain_size", f"len(keys) = {key_arr.size} "
                                         "when both are given", d))
        return d

    def _set_state(self, state: SketchState) -> None:
        self._noisy = state.noisy
        self._epsilon = state.epsilon
        self._gamma = state.gamma
        self._d = state.domain_size
        self._n = state.max_count
        self._seeded = state.seeded
        self._keys = state.keys
        self._sorter = (np.argsort(state.keys, kind="stable") if state.keys is not None
                        and state.keys.dtype.kind == "i" else None)
        self._key_index: dict[str, int] | None = None
        self._rate = state.sample_rate
        self._sample_key = state.sample_key
        self._sample = state.sample

    # -- construction from counts ----------------------------------------------------------
    @classmethod
    @public_errors("ProfileSketch.from_counts")
    def from_counts(
        cls,
        counts: Any,
        *,
        domain_size: int | None = None,
        keys: Sequence[Any] | NDArray[Any] | None = None,
        max_count: int,
        epsilon: float,
        rng: RNGLike = None,
        sample_rate: float | None = None,
        sample_key: bytes | None = None,
        accountant: BudgetAccountant | None = None,
    ) -> ProfileSketch:
        """A sketch of the per-item counts ``counts`` (index order of the domain).

        ``counts[i]`` is the count of domain item ``i`` (``keys[i]`` with explicit keys); a
        vector shorter than the domain leaves the other items at 0. Counts are clamped to
        ``max_count`` (the totals are known here; clamping is part of the mechanism and keeps
        the sensitivity at 1). The noise is drawn exactly as by the constructor, so with the
        same seed this equals a fresh sketch updated with the same (capped) counts. The counts
        are checked before the accountant is charged. Other parameters as for
        :class:`ProfileSketch`.
        """
        try:
            c = check_count_array(counts, "counts")
        except DataError:
            raise DataError(message("counts", "a 1-d array of non-negative integers",
                                    "a negative, non-integral or non-numeric entry")) from None
        d = domain_size if domain_size is not None else (None if keys is None else len(keys))
        if isinstance(d, numbers.Integral) and c.size > int(d):
            raise DataError(message("counts", "at most domain_size entries",
                                    "a longer vector"))
        sketch = cls(domain_size, keys=keys, max_count=max_count, epsilon=epsilon, rng=rng,
                     sample_rate=sample_rate, sample_key=sample_key, accountant=accountant)
        c = np.minimum(c, sketch.max_count)
        if sketch._sample is None:
            sketch._noisy[: c.size] += c
        else:
            pos = sketch._sample[sketch._sample < c.size]
            sketch._noisy[: pos.size] += c[pos]
        return sketch

    # -- properties ------------------------------------------------------------------------
    @property
    def domain_size(self) -> int:
        """Public domain size ``d`` (before sampling)."""
        return self._d

    @property
    def sampled_domain_size(self) -> int:
        """Number of counters ``d'`` (``d`` without sampling); the profile's normalizer."""
        return int(self._noisy.size)

    @property
    def max_count(self) -> int:
        """Public count cap ``n``."""
        return self._n

    @property
    def epsilon(self) -> float:
        """ε of the sketch."""
        return self._epsilon

    @property
    def gamma(self) -> Fraction:
        """The exact noise parameter ``γ = discrete_laplace_gamma(ε)`` (``α = e^{−γ}``)."""
        return self._gamma

    @property
    def seeded(self) -> bool:
        """Whether the noise came from a seeded (non-production) source."""
        return self._seeded

    @property
    def sample_rate(self) -> float | None:
        """Hash-sampling rate ρ, or None."""
        return self._rate

    @property
    def keys(self) -> NDArray[Any] | None:
        """The explicit domain keys (read-only), or None for the integer domain ``0..d−1``."""
        if self._keys is None:
            return None
        view = self._keys.view()
        view.setflags(write=False)
        return view

    def __repr__(self) -> str:
        samp = "" if self._rate is None else f", sample_rate={self._rate}, d'={self._noisy.size}"
        return (f"ProfileSketch(domain_size={self._d}, max_count={self._n}, "
                f"epsilon={self._epsilon}, seeded={self._seeded}{samp})")

    def _indexes(self, items: Any) -> NDArray[np.int64]:
        """Domain indexes of ``items``; a DataError (naming no item) for items outside it."""
        try:
            arr = np.atleast_1d(np.asarray(items))
        except (TypeError, ValueError) as exc:
            raise DataError(message("items", "a 1-d array of domain items",
                                    type(items).__name__)) from exc
        if arr.ndim != 1:
            raise DataError(message("items", "a 1-d array of domain items",
                                    f"array with {arr.ndim} dimensions"))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self._keys is None:
            if arr.dtype.kind not in "iu":
                if arr.dtype.kind == "f" and bool(np.all(arr == np.floor(arr))):
                    arr = arr.astype(np.int64)
                else:
                    raise DataError(message("items", f"integer item ids in "
                                            f"0..{self._d - 1}", f"items of dtype {arr.dtype}"))
            bad = (arr < 0) | (arr >= self._d)
            if bad.any():
                raise DataError(message("items", f"item ids in the public domain "
                                        f"0..{self._d - 1}", "items outside it"))
            return arr.astype(np.int64, copy=False)
        keys = self._keys
        if keys.dtype.kind == "i":
            ok_kind = arr.dtype.kind in "iu"
        else:
            ok_kind = arr.dtype.kind == "U" or (
                arr.dtype.kind == "O" and all(isinstance(x, str) for x in arr))
            if ok_kind:
                arr = arr.astype(str)
        if not ok_kind:
            raise DataError(message("items", "keys of the public domain",
                                    f"items of dtype {arr.dtype}"))
        if self._sorter is not None:  # integer keys
            pos = np.searchsorted(keys, arr, sorter=self._sorter)
            pos = np.minimum(pos, keys.size - 1)
            idx = self._sorter[pos]
            bad = keys[idx] != arr
        else:  # string keys: a hash map (searchsorted on numpy strings is ~10x slower)
            if self._key_index is None:
                self._key_index = {k: i for i, k in enumerate(keys.tolist())}
            get = self._key_index.get
            idx = np.fromiter((get(x, -1) for x in arr.tolist()), dtype=np.int64,
                              count=arr.size)
            bad = idx < 0
        if bad.any():
            raise DataError(message("items", "keys of the public domain",
                                    "items that are not keys of the domain"))
        return idx.astype(np.int64)

    # -- updates ---------------------------------------------------------------------------
    @public_errors("ProfileSketch.update")
    def update(self, items: Any, counts: Any = 1) -> None:
        """Add raw occurrence counts: ``h~[item] += count`` (in place; no noise, no budget).

        Parameters
        ----------
        items : item or array-like of items
            Domain items (ids in ``0..d−1``, or keys of ``keys``); repeats are summed.
        counts : int or array-like of int, default 1
            Non-negative increments below 2^52, one per item or one for all.

        Raises
        ------
        DataError
            Items outside the domain, negative or non-integer counts, a length mismatch, or an
            update that would take a counter beyond the int64 range (checked exactly). Nothing
            is changed when an error is raised; messages name no item and no count.

        Notes
        -----
        The noise was drawn once at creation, so updating is exact and free. Increments are not
        clamped; keep totals within ``max_count``. With hash sampling, increments of items
        outside the sample are dropped.
        """
        idx = self._indexes(items)
        inc = increments(counts, idx.size)
        if self._sample is not None:
            pos = np.searchsorted(self._sample, idx)
            pos_c = np.minimum(pos, self._sample.size - 1)
            keep = self._sample[pos_c] == idx
            idx, inc = pos_c[keep], inc[keep]
        if idx.size == 0:
            return
        uniq, sums = group_sums(idx, np.ascontiguousarray(inc))
        if not fits_int64(self._noisy[uniq], sums):
            raise DataError(message("counts", "increments that keep every counter within "
                                    "the int64 range (the sketch stores int64 counters); nothing "
                                    "was added", "an update that would overflow a counter"))
        self._noisy[uniq] += sums.astype(np.int64)

    @public_errors("ProfileSketch.update_from_source")
    def update_from_source(self, source: Any, *, item: str, engine: Any = None) -> None:
        """Add the per-item counts of a tabular source (one row per occurrence).

        ``source`` is anything :func:`dpfreq.engines.get_engine` accepts (CSV/Parquet path, SQL,
        DuckDB relation, mapping of columns, DataFrame); the engine computes exact per-item
        counts of column ``item``, which are then passed to :meth:`update`.
        """
        eng = get_engine(engine, source)
        ic = eng.item_counts(source, item=item)
        self.update(ic.keys, ic.counts)

    # -- releases (post-processing) --------------------------------------------------------
    def noisy_counts(self) -> NDArray[np.int64]:
        """The unclipped noisy counters ``h + Z`` (a read-only view; ε-DP)."""
        view = self._noisy.view()
        view.setflags(write=False)
        return view

    def clipped(self) -> NDArray[np.int64]:
        """The clipped release ``clip(h + Z, 0, n)`` (a new array; ε-DP)."""
        return np.clip(self._noisy, 0, self._n)

    @public_errors("ProfileSketch.reconstruct")
    def reconstruct(self, *, norm: int | float | str = 1, confidence: float = 0.95,
                    method: str = "fft") -> ProfileRelease:
        """The profile reconstructed from the unclipped counters (Algorithms 2+3 or EM).

        Free post-processing: call it as often as you like (other norms, confidence levels,
        methods); no further privacy budget is spent. Parameters as in
        :func:`dpfreq.profile.reconstruct_profile`; the release's unit is ``"event"``. With hash
        sampling the profile is that of the sampled items (normalizer ``d'``) and the intervals
        cover the privacy error only; sampling adds an error of order ``1/√d'``, stated in the
        release.
        """
        check_confidence(confidence, "confidence")
        params: dict[str, Any] = {"sketch": "ProfileSketch", "engine": "memory",
                                  "updates": "unclamped raw increments"}
        if self._rate is not None:
            params.update({"sample_rate": self._rate, "full_domain_size": self._d,
                           "sampled_domain_size": int(self._noisy.size)})
        rel = reconstruct_profile(self._noisy, max_count=self._n, epsilon=self._epsilon,
                                  confidence=confidence, norm=norm, method=method,
                                  seeded=self._seeded, mechanism_params=params)
        if self._rate is None:
            return rel
        note = (f" The profile is that of a hash sample of d' = {self._noisy.size} of the "
                f"{self._d} domain items (rate {self._rate:g}); the intervals do not include "
                "the sampling error, of order 1/sqrt(d') in every norm.")
        error = dataclasses.replace(rel.error, description=rel.error.description + note)
        return dataclasses.replace(rel, error=error)

    # -- merging is refused ----------------------------------------------------------------
    def __add__(self, other: object) -> NoReturn:
        merge_refused("addition", other, ProfileSketch)

    def __radd__(self, other: object) -> NoReturn:
        merge_refused("addition", other, ProfileSketch)

    def __iadd__(self, other: object) -> NoReturn:
        merge_refused("in-place addition", other, ProfileSketch)

    def merge(self, other: object) -> NoReturn:
        """Always refused: the merged noise (two draws per counter) would not match the kernel."""
        merge_refused("merge", other, ProfileSketch)

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the sketch to ``path`` (a versioned, checksummed :mod:`dpfreq.artifacts` file).

        Stored: the unclipped counters (int64), the keys if any, and the public parameters
        (ε, the exact noise fraction γ, ``n``, ``d``, ``d'``, ``seeded``, sampling rate and
        key). Saving is post-processing of the ε-DP counters. The checksum detects corrupted or
        edited files; it is not a signature (whoever can write the file can recompute it), so
        :meth:`load` also validates every field.
        """
        write_sketch(path, SketchState(
            noisy=self._noisy, epsilon=self._epsilon, gamma=self._gamma, domain_size=self._d,
            max_count=self._n, seeded=self._seeded, keys=self._keys, sample_rate=self._rate,
            sample_key=self._sample_key, sample=self._sample))

    @classmethod
    @public_errors("ProfileSketch.load")
    def load(cls, path: str | Path) -> ProfileSketch:
        """Read a sketch written by :meth:`save`.

        Raises
        ------
        DataError
            The file is missing, truncated or corrupted, not a ProfileSketch file, of another
            format version, fails its checksum, or has a field out of its rules (γ not the
            noise fraction of ε, sizes inconsistent, keys not distinct, a sample that does not
            match its rate and key): one line naming the file.
        """
        sketch = cls.__new__(cls)
        sketch._set_state(read_sketch(path))
        return sketch
