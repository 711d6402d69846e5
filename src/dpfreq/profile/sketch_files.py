"""The saved form of a :class:`~dpfreq.profile.ProfileSketch` (versioned and checksummed).

The file is a :mod:`dpfreq.artifacts` archive of kind ``"ProfileSketch"``: the unclipped
int64 counters, the explicit domain keys if any (integers as int64; strings as UTF-8 bytes
plus end offsets) and the public parameters. Reading checks the container, the format version
and the SHA-256 digest, then every field: ε in range and γ its exact noise fraction, sizes
consistent with each other and with the arrays, distinct keys, and a hash sample that matches
its rate and key. Any failure is one :class:`~dpfreq.errors.DataError` naming the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_epsilon
from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.errors import DataError, DPFreqError
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.domain_sampling import sample_domain

__all__ = ["DOMAIN_LIMIT", "SketchState", "read_sketch", "write_sketch"]

KIND = "ProfileSketch"
VERSION = 1
DOMAIN_LIMIT = 2**62
_META_KEYS = {"epsilon", "gamma", "domain_size", "max_count", "sampled_domain_size", "seeded",
              "keys", "sample_rate", "sample_key"}


@dataclass(frozen=True)
class SketchState:
    """Everything a sketch holds: counters, public parameters, keys and hash sample."""

    noisy: NDArray[np.int64]
    epsilon: float
    gamma: Fraction
    domain_size: int
    max_count: int
    seeded: bool
    keys: NDArray[Any] | None
    sample_rate: float | None
    sample_key: bytes | None
    sample: NDArray[np.int64] | None


def _key_arrays(keys: NDArray[Any] | None) -> dict[str, NDArray[Any]]:
    if keys is None:
        return {}
    if keys.dtype.kind == "i":
        return {"keys": keys.astype("<i8", copy=False)}
    encoded = [k.encode("utf-8") for k in keys.tolist()]
    offsets = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return {"keys_utf8": data, "keys_ends": offsets}


def write_sketch(path: str | Path, state: SketchState) -> None:
    """Write ``state`` to ``path`` (the exact name is used)."""
    meta = {
        "epsilon": state.epsilon, "gamma": str(state.gamma), "domain_size": state.domain_size,
        "max_count": state.max_count, "sampled_domain_size": int(state.noisy.size),
        "seeded": state.seeded,
        "keys": None if state.keys is None else ("int" if state.keys.dtype.kind == "i"
                                                 else "str"),
        "sample_rate": state.sample_rate,
        "sample_key": None if state.sample_key is None else state.sample_key.hex(),
    }
    arrays = {"noisy": state.noisy.astype("<i8", copy=False), **_key_arrays(state.keys)}
    write_artifact(path, kind=KIND, version=VERSION, meta=meta, arrays=arrays)


def _int(meta: dict[str, Any], name: str, lo: int, hi: int) -> int:
    value = meta.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} is not an integer in [{lo}, {hi}]")
    return value


def _decode_keys(kind: Any, arrays: dict[str, NDArray[Any]], d: int) -> NDArray[Any] | None:
    names = set(arrays) - {"noisy"}
    if kind is None:
        if names:
            raise ValueError("it holds keys its parameters do not declare")
        return None
    if kind == "int":
        if names != {"keys"} or arrays["keys"].dtype != np.dtype("<i8"):
            raise ValueError("its integer keys are missing or mistyped")
        keys = arrays["keys"].astype(np.int64)
    elif kind == "str":
        if names != {"keys_utf8", "keys_ends"}:
            raise ValueError("its string keys are missing")
        data, ends = arrays["keys_utf8"], arrays["keys_ends"]
        if (data.dtype != np.uint8 or ends.dtype != np.dtype("<i8") or ends.ndim != 1
                or ends.size != d or (ends.size and (ends[-1] != data.size
                                                     or np.any(np.diff(ends) < 0)
                                                     or ends[0] < 0))):
            raise ValueError("its string keys are malformed")
        raw = data.tobytes()
        starts = np.concatenate(([0], ends[:-1]))
        keys = np.array([raw[s:e].decode("utf-8") for s, e in zip(starts.tolist(),
                                                                  ends.tolist(), strict=True)])
    else:
        raise ValueError("its key type is neither 'int' nor 'str'")
    if keys.ndim != 1 or keys.size != d or np.unique(keys).size != d:
        raise ValueError(f"its keys are not {d} distinct values")
    return keys


def _sample(meta: dict[str, Any], d: int, d_s: int) -> tuple[float | None, bytes | None,
                                                              NDArray[np.int64] | None]:
    rate, key_hex = meta.get("sample_rate"), meta.get("sample_key")
    if rate is None:
        if key_hex is not None or d_s != d:
            raise ValueError("its sampling parameters are inconsistent")
        return None, None, None
    if (not isinstance(rate, float) or not 0.0 < rate <= 1.0 or not isinstance(key_hex, str)
            or len(key_hex) < 16):
        raise ValueError("its sampling parameters are invalid")
    key = bytes.fromhex(key_hex)
    sample = sample_domain(d, rate=rate, key=key)
    if sample.size != d_s:
        raise ValueError("its sample does not match its rate and key")
    return rate, key, sample


def _state(meta: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> SketchState:
    if set(meta) != _META_KEYS:
        raise ValueError("its parameters are not those of a ProfileSketch")
    eps = check_epsilon(meta["epsilon"], "epsilon")
    gamma = Fraction(str(meta["gamma"]))
    if gamma != discrete_laplace_gamma(eps):
        raise ValueError("its gamma is not the noise fraction of its epsilon")
    d = _int(meta, "domain_size", 1, DOMAIN_LIMIT - 1)
    n = _int(meta, "max_count", 0, DOMAIN_LIMIT)
    d_s = _int(meta, "sampled_domain_size", 1, d)
    if not isinstance(meta["seeded"], bool):
        raise ValueError("seeded is not true or false")
    noisy = arrays.get("noisy")
    if noisy is None or noisy.ndim != 1 or noisy.dtype != np.dtype("<i8") or noisy.size != d_s:
        raise ValueError(f"its counters are not {d_s} int64 values")
    keys = _decode_keys(meta["keys"], arrays, d)
    rate, key, sample = _sample(meta, d, d_s)
    if rate is not None and not math.isfinite(rate):  # pragma: no cover - excluded above
        raise ValueError("its sampling rate is not finite")
    return SketchState(noisy=np.array(noisy, dtype=np.int64), epsilon=eps, gamma=gamma,
                       domain_size=d, max_count=n, seeded=meta["seeded"], keys=keys,
                       sample_rate=rate, sample_key=key, sample=sample)


def read_sketch(path: str | Path) -> SketchState:
    """Read and validate a file written by :func:`write_sketch`.

    Raises
    ------
    DataError
        Missing, truncated, corrupted or edited file, another kind or version, or any field
        out of its rules: one line naming the file.
    """
    _, meta, arrays = read_artifact(path, kind=KIND, versions=(VERSION,))
    try:
        return _state(meta, arrays)
    except (ValueError, TypeError, KeyError, ZeroDivisionError, UnicodeDecodeError,
            DPFreqError) as exc:
        reason = str(exc).rstrip(".") if not isinstance(exc, KeyError) else "a field is missing"
        raise DataError(f"{path} is not a valid dpfreq {KIND} file: {reason}.") from None
