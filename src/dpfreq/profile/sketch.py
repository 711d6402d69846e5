"""The updatable ε-DP noisy histogram of Wu & Pagh (spec ``profile_reconstruction.md`` §1.1–§1.2).

:class:`ProfileSketch` holds ``h~[ℓ] = h[ℓ] + Z_ℓ`` for every item ``ℓ`` of a public domain, with
``Z_ℓ ~ DLap(e^{−γ})`` exact and i.i.d., drawn once at creation and stored *unclipped* (int64),
so that the sketch stays updatable (``U`` = vector addition, Definition 5.1 of the paper).
Reconstructions (:meth:`ProfileSketch.reconstruct`) and the clipped release
(:meth:`ProfileSketch.clipped`) are post-processing and cost no further budget.

Optionally the domain is sub-sampled by a keyed hash (spec §1.2): only items ``ℓ`` with
``g(ℓ) < ρ`` get a counter, ``g`` a public, data-independent keyed 64-bit mixing function of the
item's domain index. The profile reconstructed is then that of the sample.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_count_array,
    check_epsilon,
    check_int,
    check_positive_float,
    message,
)
from dpfreq.budget import Accountant
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.profile.result import ProfileRelease
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["ProfileSketch", "sample_domain"]

_KIND = "dpfreq.ProfileSketch"
_VERSION = 1
_HASH_CHUNK = 1 << 22
_MASK = (1 << 64) - 1
_SHOW = 5  # unknown items named in an error message


# ----------------------------------------------------------------------------------------------
# §1.2 keyed hash sampling of the domain


def _key_words(key: bytes) -> tuple[np.uint64, np.uint64]:
    digest = hashlib.sha256(b"dpfreq.ProfileSketch.sample|" + bytes(key)).digest()
    return (np.uint64(int.from_bytes(digest[:8], "little")),
            np.uint64(int.from_bytes(digest[8:16], "little")))


def _fmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finalizer (a bijection of uint64 with full avalanche), in place."""
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


def _rate_threshold(rate: float) -> int:
    """``⌊ρ · 2^64⌋`` computed exactly from the binary value of ρ."""
    return math.floor(Fraction(rate) * (1 << 64))


def sample_domain(domain_size: int, *, rate: float, key: bytes) -> NDArray[np.int64]:
    """The sorted domain indexes ``ℓ ∈ 0..d−1`` kept by hash sampling at rate ρ (spec §1.2).

    ``g(ℓ) = fmix64(fmix64(ℓ·φ + k0) ^ k1) / 2^64`` with ``(k0, k1)`` derived from ``key`` by
    SHA-256 and ``φ`` the 64-bit golden-ratio constant; ``ℓ`` is kept iff ``g(ℓ) < ρ``. The
    mixing is a keyed bijection of 64-bit words, so ``|S|`` is close to ``ρd`` and ``S`` looks
    uniform for any fixed key. ``S`` depends only on ``(d, ρ, key)``, never on data, so sampling
    leaves the sketch ε-DP whatever the key; the key needs no secrecy for privacy.
    """
    func = "sample_domain"
    d = check_int(domain_size, "domain_size", func, minimum=1)
    rho = check_positive_float(rate, "rate", func)
    if rho > 1.0:
        raise ParameterError(message("rate", func, "a number in (0, 1]", rate))
    if not isinstance(key, bytes | bytearray) or len(key) < 8:
        raise ParameterError(message("key", func, "at least 8 bytes", key))
    if rho == 1.0:
        return np.arange(d, dtype=np.int64)
    k0, k1 = _key_words(bytes(key))
    thr = np.uint64(_rate_threshold(rho))
    parts = []
    with np.errstate(over="ignore"):
        for start in range(0, d, _HASH_CHUNK):
            idx = np.arange(start, min(d, start + _HASH_CHUNK), dtype=np.uint64)
            x = idx * np.uint64(0x9E3779B97F4A7C15)
            x += k0
            x = _fmix64(x)
            x ^= k1
            x = _fmix64(x)
            parts.append(idx[x < thr].astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# helpers


def _merge_refused(op: str, other: object) -> NoReturn:
    if not isinstance(other, ProfileSketch):
        raise ParameterError(
            f"{op} of ProfileSketch and {type(other).__name__} is not defined: add occurrence "
            "counts with update(items, counts) (the noise stays the one drawn at creation)."
        )
    raise ParameterError(
        f"{op} of ProfileSketch is refused: two independently noised sketches cannot be added. "
        "The sum would carry two discrete Laplace draws per item (noise law DLap * DLap, twice "
        "the variance), while the reconstruction's kernel assumes exactly one DLap(e^-γ) per "
        "counter, so the profile and its error bound would be wrong (spec §13.12). Use one "
        "sketch and update() it with all the data instead."
    )


def _check_keys(keys: Any, func: str) -> NDArray[Any]:
    rule = "a non-empty 1-d sequence of distinct integers or strings"
    if not isinstance(keys, np.ndarray) and isinstance(keys, Sequence):
        ints = all(isinstance(k, numbers.Integral) and not isinstance(k, bool | np.bool_)
                   for k in keys)
        if not ints and not all(isinstance(k, str) for k in keys):
            kinds = sorted({type(k).__name__ for k in keys})
            raise ParameterError(message("keys", func, rule, f"keys of types {kinds}"))
    try:
        arr = np.asarray(keys)
    except (TypeError, ValueError) as exc:
        raise ParameterError(message("keys", func, rule, type(keys).__name__)) from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(message("keys", func, rule, f"array of shape {arr.shape}"))
    if arr.dtype.kind in "iu":
        if arr.dtype == np.uint64 and arr.max() > np.iinfo(np.int64).max:
            raise ParameterError(message("keys", func, rule, "integers beyond the int64 range"))
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "U":
        pass
    elif arr.dtype.kind == "O" and all(isinstance(k, str) for k in arr):
        arr = arr.astype(str)
    else:
        raise ParameterError(message("keys", func, rule, f"keys of dtype {arr.dtype}"))
    uniq, counts = np.unique(arr, return_counts=True)
    if uniq.size != arr.size:
        dup = [x.item() for x in uniq[counts > 1][:_SHOW]]
        raise ParameterError(message("keys", func, rule, f"duplicates such as {dup}"))
    return arr


def _digest(meta: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> str:
    h = hashlib.sha256()
    body = {k: v for k, v in meta.items() if k != "checksum"}
    h.update(json.dumps(body, sort_keys=True).encode("utf-8"))
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        h.update(f"|{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# the sketch


class ProfileSketch:
    """An ε-DP, updatable noisy histogram over a public domain, for profile reconstruction.

    Creating the sketch draws the noise: every counter starts at ``Z_ℓ ~ DLap(e^{−γ})`` (exact,
    ``γ = discrete_laplace_gamma(ε) ≤ ε``); :meth:`update` then adds raw occurrence counts.

    Parameters
    ----------
    domain_size : int, optional
        Public domain size ``d``; items are the integers ``0..d−1``. Give this or ``keys``.
    keys : sequence of int or str, optional
        The public domain as an explicit list of distinct item keys; ``keys[i]`` has index
        ``i``. ``domain_size``, if also given, must equal ``len(keys)``.
    max_count : int
        Public count cap ``n`` (length ``n + 1`` of the reconstructed profile, clip range).
    epsilon : float
        Privacy parameter ε > 0 (pure ε-DP). No default.
    rng : None, int or numpy.random.Generator, keyword-only
        ``None``: the secure CSPRNG. A seed or generator makes the sketch reproducible and marks
        it (and its releases) ``seeded`` — for tests only.
    sample_rate : float, optional
        Rate ``ρ ∈ (0, 1]`` of hash sampling of the domain (spec §1.2); only the sampled items
        get a counter and updates for the others are dropped. Default: no sampling.
    sample_key : bytes, optional
        Key of the sampling hash (at least 8 bytes; public, data-independent). Default: 16
        bytes from the OS (or from ``rng`` when it is seeded).
    accountant : Accountant, optional
        Charged ``(ε, 0)`` after validation and before any noise is drawn.

    Attributes
    ----------
    domain_size, max_count, epsilon, gamma, seeded, sample_rate, sampled_domain_size

    Notes
    -----
    **Privacy.** Unit of privacy: one occurrence (event) of one item. Neighbouring histograms
    differ by 1 in one coordinate (spec §1). The stored counters ``h + Z`` — one exact
    ``DLap(e^{−γ})`` draw per counter, ``γ ≤ ε`` — are ε-DP (Ghosh, Roughgarden & Sundararajan
    2009), however many updates were applied, since the noise was drawn once and updates only
    add the data. :meth:`clipped`, :meth:`noisy_counts`, :meth:`reconstruct` (any number of
    times, any norm, η or method) and :meth:`save` are post-processing and spend no further
    budget. If a person contributes many events, privacy is per event (``kε`` for ``k``
    events). Hash sampling selects items by a data-independent function and keeps ε-DP.

    Updates are added **unclamped** — the sketch does not know the exact totals — so the caller
    must keep every item's total within ``max_count`` for the reconstruction to be accurate
    (privacy does not depend on it). :meth:`from_counts` clamps the counts it is given.

    Two independently noised sketches cannot be added (``+`` raises): see spec §13.12.
    """

    __array_ufunc__ = None  # numpy must not try ``array + sketch`` element-wise

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
        accountant: Accountant | None = None,
    ) -> None:
        func = "ProfileSketch"
        n = check_int(max_count, "max_count", func, minimum=0)
        eps = check_epsilon(epsilon, "epsilon", func)
        key_arr = None if keys is None else _check_keys(keys, func)
        if domain_size is None and key_arr is None:
            raise ParameterError(message("domain_size", func, "given (or keys given)", None))
        if domain_size is not None:
            d = check_int(domain_size, "domain_size", func, minimum=1)
            if key_arr is not None and key_arr.size != d:
                raise ParameterError(message("domain_size", func,
                                             f"len(keys) = {key_arr.size} when both are given",
                                             d))
        else:
            assert key_arr is not None
            d = int(key_arr.size)
        rho: float | None = None
        if sample_rate is not None:
            rho = check_positive_float(sample_rate, "sample_rate", func)
            if rho > 1.0:
                raise ParameterError(message("sample_rate", func, "a number in (0, 1]",
                                             sample_rate))
        if sample_key is not None and (not isinstance(sample_key, bytes | bytearray)
                                       or len(sample_key) < 8):
            raise ParameterError(message("sample_key", func, "bytes of length >= 8", sample_key))
        resolved = resolve_rng(rng, func)
        if accountant is not None:
            if not isinstance(accountant, Accountant):
                raise ParameterError(message("accountant", func, "an Accountant or None",
                                             type(accountant).__name__))
            accountant.spend(eps, 0.0, label=func)
        gen = resolved.generator
        sample = None
        skey: bytes | None = None
        if rho is not None:
            if sample_key is not None:
                skey = bytes(sample_key)
            else:
                skey = gen.bytes(16) if resolved.seeded else os.urandom(16)
            sample = sample_domain(d, rate=rho, key=skey)
            if sample.size == 0:
                raise ParameterError(message("sample_rate", func, "large enough to keep at least "
                                             f"one of the {d} domain items", sample_rate))
        gamma = discrete_laplace_gamma(eps)
        size = d if sample is None else int(sample.size)
        noisy = sample_discrete_laplace(gamma, size, rng=gen)
        self._set_state(noisy=noisy, epsilon=eps, gamma=gamma, domain_size=d, max_count=n,
                        seeded=resolved.seeded, keys=key_arr, sample_rate=rho,
                        sample_key=skey, sample=sample)

    def _set_state(self, *, noisy: NDArray[np.int64], epsilon: float, gamma: Fraction,
                   domain_size: int, max_count: int, seeded: bool, keys: NDArray[Any] | None,
                   sample_rate: float | None, sample_key: bytes | None,
                   sample: NDArray[np.int64] | None) -> None:
        self._noisy = noisy
        self._epsilon = epsilon
        self._gamma = gamma
        self._d = domain_size
        self._n = max_count
        self._seeded = seeded
        self._keys = keys
        self._sorter = (np.argsort(keys, kind="stable") if keys is not None
                        and keys.dtype.kind == "i" else None)
        self._key_index: dict[str, int] | None = None
        self._rate = sample_rate
        self._sample_key = sample_key
        self._sample = sample

    # -- construction from counts ----------------------------------------------------------
    @classmethod
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
        accountant: Accountant | None = None,
    ) -> ProfileSketch:
        """A sketch of the per-item counts ``counts`` (index order of the domain).

        ``counts[i]`` is the count of domain item ``i`` (``keys[i]`` with explicit keys); a
        vector shorter than the domain leaves the other items at 0. Counts are clamped to
        ``max_count`` (the totals are known here; clamping is part of the mechanism and keeps
        the sensitivity at 1). The noise is drawn exactly as by the constructor, so with the
        same seed this equals a fresh sketch updated with the same (capped) counts. Other
        parameters as for :class:`ProfileSketch`.
        """
        func = "ProfileSketch.from_counts"
        c = check_count_array(counts, "counts", func)
        sketch = cls(domain_size, keys=keys, max_count=max_count, epsilon=epsilon, rng=rng,
                     sample_rate=sample_rate, sample_key=sample_key, accountant=accountant)
        if c.size > sketch.domain_size:
            raise DataError(message("counts", func, f"at most domain_size = "
                                    f"{sketch.domain_size} entries", f"{c.size} entries"))
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

    # -- item lookup -----------------------------------------------------------------------
    def _indexes(self, items: Any, func: str) -> NDArray[np.int64]:
        """Domain indexes of ``items``; DataError naming unknown items."""
        try:
            arr = np.atleast_1d(np.asarray(items))
        except (TypeError, ValueError) as exc:
            raise DataError(message("items", func, "a 1-d array of domain items",
                                    type(items).__name__)) from exc
        if arr.ndim != 1:
            raise DataError(message("items", func, "a 1-d array of domain items",
                                    f"array with {arr.ndim} dimensions"))
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self._keys is None:
            if arr.dtype.kind not in "iu":
                if arr.dtype.kind == "f" and bool(np.all(arr == np.floor(arr))):
                    arr = arr.astype(np.int64)
                else:
                    raise DataError(message("items", func, f"integer item ids in "
                                            f"0..{self._d - 1}", f"items of dtype {arr.dtype}"))
            bad = (arr < 0) | (arr >= self._d)
            if bad.any():
                shown = [x.item() for x in np.unique(arr[bad])[:_SHOW]]
                raise DataError(message("items", func, f"item ids in the public domain "
                                        f"0..{self._d - 1}", f"{int(bad.sum())} unknown "
                                        f"item(s), e.g. {shown}"))
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
            shown = [x.item() if isinstance(x, np.generic) else x for x in arr[:_SHOW]]
            raise DataError(message("items", func, "keys of the public domain", f"items of "
                                    f"dtype {arr.dtype} such as {shown}"))
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
            shown = [x.item() for x in np.unique(arr[bad])[:_SHOW]]
            raise DataError(message("items", func, "keys of the public domain",
                                    f"{int(bad.sum())} unknown item(s), e.g. {shown}"))
        return idx.astype(np.int64)

    # -- updates ---------------------------------------------------------------------------
    def update(self, items: Any, counts: Any = 1) -> None:
        """Add raw occurrence counts: ``h~[item] += count`` (in place; no noise, no budget).

        Parameters
        ----------
        items : item or array-like of items
            Domain items (ids in ``0..d−1``, or keys of ``keys``); repeats are summed.
        counts : int or array-like of int, default 1
            Non-negative increments, one per item or one for all.

        Raises
        ------
        DataError
            Unknown items (some are named), negative or non-integer counts, length mismatch.
            Nothing is changed when an error is raised.

        Notes
        -----
        The sketch is updatable (spec §1.1): the noise was drawn once at creation, so updating
        is exact and free. Increments are not clamped; keep totals within ``max_count``.
        With hash sampling, increments of items outside the sample are dropped.
        """
        func = "ProfileSketch.update"
        idx = self._indexes(items, func)
        if np.ndim(counts) == 0:
            c = check_count_array(np.atleast_1d(np.asarray(counts)), "counts", func)
            inc = np.broadcast_to(c, idx.shape)
        else:
            inc = check_count_array(counts, "counts", func)
            if inc.size != idx.size:
                raise DataError(message("counts", func, f"a scalar or {idx.size} counts "
                                        "(one per item)", f"{inc.size} counts"))
        if inc.size and int(inc.max()) >= 1 << 52:
            raise DataError(message("counts", func, "increments below 2^52",
                                    f"entry {int(inc.max())}"))
        if self._sample is not None:
            pos = np.searchsorted(self._sample, idx)
            pos_c = np.minimum(pos, self._sample.size - 1)
            keep = self._sample[pos_c] == idx
            idx, inc = pos_c[keep], inc[keep]
        np.add.at(self._noisy, idx, inc)

    def update_from_source(self, source: Any, *, item: str, engine: str | None = None) -> None:
        """Add the per-item counts of a tabular source (one row per occurrence).

        ``source`` is anything :func:`dpfreq.engines.get_engine` accepts (CSV/Parquet path, SQL,
        DuckDB relation, mapping of columns, Spark DataFrame); the engine computes exact
        per-item counts of column ``item``, which are then passed to :meth:`update`.
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
        """The clipped release ``clip(h + Z, 0, n)`` of spec §1.1 (a new array; ε-DP)."""
        return np.clip(self._noisy, 0, self._n)

    def reconstruct(self, *, norm: int | float | str = 1, eta: float = 0.05,
                    method: str = "fft") -> ProfileRelease:
        """The profile reconstructed from the unclipped counters (Algorithms 2+3 or EM).

        Free post-processing: call it as often as you like (other norms, η, methods); no
        further privacy budget is spent. Parameters as in
        :func:`dpfreq.profile.reconstruct_profile`. With hash sampling the profile is that of
        the sampled items (normalizer ``d'``) and the error bound covers the privacy error
        only; sampling adds an error of order ``1/√d'`` (spec §1.2), stated in the release.
        """
        from dpfreq.profile.reconstruct import reconstruct_profile

        params: dict[str, Any] = {"sketch": "ProfileSketch", "engine": "memory",
                                  "updates": "unclamped raw increments"}
        if self._rate is not None:
            params.update({"sample_rate": self._rate, "full_domain_size": self._d,
                           "sampled_domain_size": int(self._noisy.size)})
        rel = reconstruct_profile(self._noisy, max_count=self._n, epsilon=self._epsilon,
                                  eta=eta, norm=norm, method=method, seeded=self._seeded,
                                  mechanism_params=params)
        if self._rate is None:
            return rel
        note = (f" The profile is that of a hash sample of d' = {self._noisy.size} of the "
                f"{self._d} domain items (rate {self._rate:g}); the bound does not include the "
                "sampling error, of order 1/sqrt(d') in every norm (spec §1.2).")
        error = dataclasses.replace(rel.error, description=rel.error.description + note)
        return dataclasses.replace(rel, error=error)

    # -- merging is refused ----------------------------------------------------------------
    def __add__(self, other: object) -> NoReturn:
        _merge_refused("addition", other)

    def __radd__(self, other: object) -> NoReturn:
        _merge_refused("addition", other)

    def __iadd__(self, other: object) -> NoReturn:
        _merge_refused("in-place addition", other)

    def merge(self, other: object) -> NoReturn:
        """Always refused: see spec §13.12 (the merged noise would not match the kernel)."""
        _merge_refused("merge", other)

    # -- persistence -----------------------------------------------------------------------
    def _arrays(self) -> dict[str, NDArray[Any]]:
        arrays: dict[str, NDArray[Any]] = {"noisy": self._noisy.astype("<i8", copy=False)}
        if self._keys is not None:
            arrays["keys"] = (self._keys.astype("<i8", copy=False) if self._keys.dtype.kind == "i"
                              else self._keys)
        return arrays

    def _meta(self) -> dict[str, Any]:
        return {
            "kind": _KIND, "version": _VERSION, "epsilon": self._epsilon,
            "gamma": str(self._gamma), "domain_size": self._d, "max_count": self._n,
            "sampled_domain_size": int(self._noisy.size), "seeded": self._seeded,
            "keys": None if self._keys is None else ("int" if self._keys.dtype.kind == "i"
                                                     else "str"),
            "sample_rate": self._rate,
            "sample_key": None if self._sample_key is None else self._sample_key.hex(),
        }

    def save(self, path: str | Path) -> None:
        """Write the sketch to ``path`` (NumPy ``.npz``, no pickles; the exact name is used).

        Stored: the unclipped counters (int64), the keys if any, and JSON metadata (format
        version, ε, the exact ε fraction γ used for the noise, ``n``, ``d``, ``d'``, ``seeded``,
        sampling rate and key) with a SHA-256 checksum over metadata and arrays. Saving is
        post-processing of the ε-DP counters. The checksum detects corrupted or edited files;
        it is not a signature (whoever can write the file can recompute it).
        """
        meta = self._meta()
        arrays = self._arrays()
        meta["checksum"] = _digest(meta, arrays)
        with open(Path(path), "wb") as fh:
            payload: dict[str, Any] = {"meta": np.array(json.dumps(meta, sort_keys=True))}
            payload.update(arrays)
            np.savez(fh, **payload)

    @classmethod
    def load(cls, path: str | Path) -> ProfileSketch:
        """Read a sketch written by :meth:`save`, refusing missing or inconsistent metadata.

        Raises
        ------
        DataError
            The file is missing, not a ProfileSketch file, of an unknown version, has missing
            or inconsistent metadata (e.g. γ not the fraction of ε, lengths not matching ``d``),
            or its checksum does not match (metadata or counters modified after saving).
        """
        func = "ProfileSketch.load"
        p = Path(path)
        where = f"path of {func}: {str(path)!r}"
        if not p.is_file():
            raise DataError(f"{where} is not a file.")
        try:
            with np.load(p, allow_pickle=False) as npz:
                files = {name: npz[name] for name in npz.files}
        except (OSError, ValueError, EOFError) as exc:
            raise DataError(f"{where} is not a ProfileSketch file ({exc}).") from exc
        if "meta" not in files or "noisy" not in files:
            raise DataError(f"{where} is not a ProfileSketch file (no metadata or counters).")
        try:
            meta = json.loads(str(files.pop("meta")))
            if not isinstance(meta, dict) or meta.get("kind") != _KIND:
                raise ValueError("not a ProfileSketch file")
            if meta.get("version") != _VERSION:
                raise ValueError(f"unknown format version {meta.get('version')!r}")
            eps = check_epsilon(meta["epsilon"], "epsilon", func)
            gamma = Fraction(str(meta["gamma"]))
            d = check_int(meta["domain_size"], "domain_size", func, minimum=1)
            n = check_int(meta["max_count"], "max_count", func, minimum=0)
            d_s = check_int(meta["sampled_domain_size"], "sampled_domain_size", func, minimum=1)
            seeded = meta["seeded"]
            if not isinstance(seeded, bool):
                raise ValueError("seeded is not a bool")
            key_kind = meta["keys"]
            rate = meta["sample_rate"]
            skey_hex = meta["sample_key"]
            checksum = meta["checksum"]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise DataError(f"{where} has missing or invalid metadata ({exc}).") from exc
        if checksum != _digest(meta, files):
            raise DataError(f"{where} fails its checksum: the metadata or the counters were "
                            "modified after saving; refusing to load it.")
        problems = []
        if gamma != discrete_laplace_gamma(eps):
            problems.append(f"gamma {gamma} is not the noise fraction of epsilon {eps}")
        noisy = files["noisy"]
        if noisy.ndim != 1 or noisy.dtype != np.dtype("<i8") or noisy.size != d_s:
            problems.append(f"counters are not {d_s} int64 values")
        keys = files.get("keys")
        if (key_kind is None) != (keys is None) or key_kind not in (None, "int", "str"):
            problems.append("keys and their metadata disagree")
        elif keys is not None:
            if keys.ndim != 1 or keys.size != d or np.unique(keys).size != d:
                problems.append(f"keys are not {d} distinct values")
            elif (key_kind == "int") != (keys.dtype.kind == "i"):
                problems.append("keys and their metadata disagree")
        sample = None
        skey = None
        if rate is None:
            if skey_hex is not None or d_s != d:
                problems.append("sampling metadata inconsistent")
        else:
            try:
                skey = bytes.fromhex(str(skey_hex))
                sample = sample_domain(d, rate=rate, key=skey)
            except (ValueError, ParameterError) as exc:
                problems.append(f"invalid sampling parameters ({exc})")
            else:
                if sample.size != d_s:
                    problems.append("the sample does not match its rate and key")
        if problems:
            raise DataError(f"{where} has inconsistent metadata: " + "; ".join(problems) + ".")
        sketch = cls.__new__(cls)
        sketch._set_state(noisy=np.array(noisy, dtype=np.int64), epsilon=eps, gamma=gamma,
                          domain_size=d, max_count=n, seeded=seeded,
                          keys=None if keys is None else
                          (keys.astype(np.int64) if key_kind == "int" else keys),
                          sample_rate=None if rate is None else float(rate),
                          sample_key=skey, sample=sample)
        return sketch
