"""Saved profile releases: the noisy measurement and the public parameters, sealed, and the
release rebuilt from them on load.

A :class:`~dpfreq.profile.ProfileRelease` is saved as sealed JSON text
(:func:`dpfreq.artifacts.seal_json`, kind ``"ProfileRelease"``; signed with HMAC-SHA256 when
``DPFREQ_ARTIFACT_KEY`` is set) holding only what the release was computed from: its noisy
measurement — the noisy count-of-counts ``y[0..n]`` of the direct method, or the counts of
noisy values on ``t = −B..n+B`` of the Wu & Pagh sketch — and its public parameters (ε exactly
as spent, unit, method, ``d``, ``n``, confidence, norm, ``B``, ``seeded`` and the public
context of ``mechanism_params`` as ``[name, value]`` pairs, in order: engine, why, ...).

Loading checks the seal and every field, then **recomputes** the estimate, its intervals, band
and bounds from the measurement by the same post-processing the release ran
(:meth:`~dpfreq.profile.ProfileRelease.from_measurement`: the fields of
:func:`~dpfreq.profile.direct_release.direct_fields` or
:func:`~dpfreq.profile.estimate.sketch_fields`). The loaded release is
therefore equal to the saved one bit for bit, and no edit of a published number survives a
load: the file holds none, only the measurement they are a function of.

The file holds nothing secret (the measurement is published with the release), so it can be
shared like the release itself; sign it when its readers must know it is unedited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq._validate import check_int, message
from dpfreq.artifacts import open_json, read_text_file, seal_json
from dpfreq.errors import DataError, DPFreqError, ParameterError
from dpfreq.release import to_jsonable

__all__ = ["KIND", "VERSION", "invalid", "read_saved", "read_saved_text", "saved_json",
           "write_saved"]

KIND = "ProfileRelease"
VERSION = 1
_FIELDS = ("epsilon", "unit", "method", "domain_size", "max_count", "confidence", "norm", "B",
           "seeded", "mechanism_params", "measurement")
#: entries of ``mechanism_params`` that are the measurement itself (stored once, as such)
_MEASURED = ("noisy_count_of_counts",)


def _measurement(rel: Any) -> list[int]:
    """The integer noisy measurement the release's published numbers are computed from."""
    if rel.method == "direct":
        return [int(v) for v in np.asarray(rel.mechanism_params["noisy_count_of_counts"])]
    f = np.asarray(rel.noisy_profile, dtype=np.float64)
    counts = np.rint(f * rel.domain_size).astype(np.int64)
    if not np.array_equal(counts.astype(np.float64) / rel.domain_size, f):  # pragma: no cover
        raise ParameterError(message("release", "a release whose noisy counts are whole numbers "
                                     "of items (d < 2**53)", "another release"))
    return [int(v) for v in counts]


def saved_json(rel: Any) -> str:
    """Sealed JSON text of a :class:`~dpfreq.profile.ProfileRelease`'s noisy measurement and
    public parameters (signed when ``DPFREQ_ARTIFACT_KEY`` is set)."""
    if "group" in rel.mechanism_params:
        raise ParameterError(message(
            "release", "an ungrouped profile release (one group's release of a grouped "
            "profile states coverage the saved form does not hold; save the grouped release's "
            "JSON instead)", f"the release of group {rel.mechanism_params['group']!r}"))
    context = {k: v for k, v in rel.mechanism_params.items() if k not in _MEASURED}
    payload = {"epsilon": float(rel.epsilon), "unit": rel.unit, "method": rel.method,
               "domain_size": int(rel.domain_size), "max_count": int(rel.max_count),
               "confidence": float(rel.error.confidence or 0.0), "norm": rel.norm,
               "B": int(rel.B), "seeded": bool(rel.seeded),
               "mechanism_params": [[k, to_jsonable(v)] for k, v in context.items()],
               "measurement": _measurement(rel)}
    return seal_json(payload, kind=KIND, version=VERSION)


def write_saved(rel: Any, path: str | Path) -> Path:
    """Write :func:`saved_json` to ``path`` (replaced if it exists, through a temporary file
    beside it, so a crash never leaves half a file under the final name)."""
    out = Path(path)
    text = saved_json(rel)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def _direct_measurement(values: list[Any], d: int, n: int, B: int,
                        derive_zero: bool) -> np.ndarray:
    """The noisy count-of-counts ``y[0..n]``, checked (with class 0 derived: summing to d)."""
    if len(values) != n + 1 or B != 0 or not all(
            isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63 for v in values):
        raise ParameterError(message("measurement", f"n + 1 = {n + 1} integers (the noisy "
                                     "count-of-counts) with B = 0", "another value"))
    if derive_zero and sum(values) != d:
        raise ParameterError(message("measurement", "a count-of-counts summing to d (class "
                                     "0 is d minus the noised classes)", "another sum"))
    return np.asarray(values, dtype=np.int64)


def _arguments(p: dict[str, Any]) -> dict[str, Any]:
    """The arguments of :meth:`~dpfreq.profile.ProfileRelease.from_measurement` of a payload,
    every field checked."""
    from dpfreq.profile.direct import direct_layout
    from dpfreq.profile.estimate import checked_sketch_counts
    from dpfreq.profile.plan import check_profile_parameters

    pairs = p["mechanism_params"]  # [name, value] pairs: JSON keeps their order
    if not isinstance(pairs, list) or not all(
            isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in pairs):
        raise ParameterError(message("mechanism_params", "a list of [name, value] pairs",
                                     "another value"))
    if not isinstance(p["seeded"], bool):
        raise ParameterError(message("seeded", "true or false", p["seeded"]))
    if p["norm"] not in ("1", "2", "inf"):
        raise ParameterError(message("norm", "one of '1', '2', 'inf'", p["norm"]))
    if p["method"] not in ("direct", "fft", "mle"):
        raise ParameterError(message("method", "one of 'direct', 'fft', 'mle'", p["method"]))
    par = check_profile_parameters(p["domain_size"], p["max_count"], p["epsilon"], p["unit"],
                                   p["confidence"], p["method"])
    B = check_int(p["B"], "B", minimum=0)
    if not isinstance(p["measurement"], list):
        raise ParameterError(message("measurement", "a list of integers", "another value"))
    d, n, eps = par.domain_size, par.max_count, par.epsilon
    if par.method == "direct":
        y = _direct_measurement(p["measurement"], d, n, B,
                                direct_layout(par.unit, eps, n).derive_zero)
    else:
        y, B = checked_sketch_counts(p["measurement"], domain_size=d, max_count=n,
                                     epsilon=eps, B=B)
    return {"measurement": y, "method": par.method, "domain_size": d, "max_count": n,
            "epsilon": eps, "unit": par.unit, "confidence": par.confidence, "norm": p["norm"],
            "B": B, "seeded": p["seeded"], "mechanism_params": dict(pairs)}


def read_saved_text(text: str | bytes, *, label: str = "the text") -> dict[str, Any]:
    """The checked arguments of :meth:`~dpfreq.profile.ProfileRelease.from_measurement` held by
    text written by :func:`saved_json`.

    Any failure — not JSON, another kind or version, a seal that does not match (or a signed
    text without its key, an unsigned one while ``DPFREQ_ARTIFACT_KEY`` is set), a field out
    of its range — is one :class:`~dpfreq.errors.DataError` naming ``label``.
    """
    try:
        _, payload = open_json(text, kind=KIND, versions=(VERSION,), label=label)
    except DataError:
        if _is_release_json(text):
            raise DataError(
                f"{label} is the JSON of a profile release (--json, to_json()), which holds no "
                "seal and cannot be loaded: save the release with ProfileRelease.save or "
                "`dpfreq profile --save FILE`.") from None
        raise
    if set(payload) != set(_FIELDS):
        raise invalid(label, f"its fields are not {', '.join(_FIELDS)}")
    try:
        return _arguments(payload)
    except (DPFreqError, ValueError, TypeError, OverflowError) as exc:
        raise invalid(label, exc) from None


def invalid(label: str, reason: str | BaseException) -> DataError:
    """The one-line error of a saved release ``label`` that cannot be loaded."""
    if isinstance(reason, BaseException):
        reason = (str(reason).rstrip(".") if isinstance(reason, DPFreqError)
                  else type(reason).__name__)
    return DataError(f"{label} is not a valid dpfreq {KIND} file: {reason}.")


def _is_release_json(text: str | bytes) -> bool:
    try:
        obj = json.loads(text)
    except (ValueError, TypeError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and obj.get("type") == "ProfileRelease"


def read_saved(path: str | Path) -> dict[str, Any]:
    """:func:`read_saved_text` of the file ``path`` (missing or unreadable: one DataError)."""
    return read_saved_text(read_text_file(path, "a saved profile release"), label=str(path))
