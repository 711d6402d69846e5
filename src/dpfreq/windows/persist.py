"""Validation of a saved window release (every field, before anything is built from it).

The file itself is a checksummed dpfreq artefact (:mod:`dpfreq.artifacts`); the checksum
catches corruption and casual edits, and this module checks that every field is one the
release function itself accepts and that the summaries are consistent with them. Any failure
is one :class:`~dpfreq.errors.DataError` naming the file.
"""

from __future__ import annotations

import dataclasses
import math
import zoneinfo
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpfreq._validate import check_confidence, check_delta, check_epsilon, check_unit
from dpfreq.errors import DataError, DPFreqError
from dpfreq.release import TABLE_UNITS
from dpfreq.windows.data.summaries import WindowSummaries, summary_specs
from dpfreq.windows.params import (
    MAX_HORIZON,
    WindowBuild,
    check_method,
    parse_k,
    parse_windows,
)
from dpfreq.windows.structures.chooser import make_plan

__all__ = ["ARTIFACT_KIND", "ARTIFACT_VERSION", "checked_load"]

ARTIFACT_KIND = "window-release"
#: 3: the file keeps the noisy measurements of the eagerly measured structures (the cumulative
#: counters), which a loaded release answers from; 2: the keyed node noise of small γ changed
#: (threshold tables of 2^14 entries). A release saved in another format is refused
ARTIFACT_VERSION = 3

#: the name of a stored measurement in the file's arrays (``measurement/<label>/<k>``)
MEASUREMENT = "measurement"

_BUILD_KEYS = {f.name for f in dataclasses.fields(WindowBuild)}


class _Invalid(Exception):
    """A field of the file is not valid (turned into a DataError naming the file)."""


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise _Invalid(what)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_axis(axis: Any, horizon: int) -> dict[str, Any]:
    _require(isinstance(axis, Mapping), "its time axis is not a mapping")
    kind = axis.get("kind")
    if kind == "integer":
        _require(set(axis) == {"kind", "horizon"} and axis["horizon"] == horizon,
                 "its time axis does not match its horizon")
        return dict(axis)
    keys = {"kind", "horizon", "start", "period_us", "timezone"}
    _require(kind == "timestamp" and set(axis) in (keys, keys | {"time_unit"}),
             "its time axis is neither integer nor timestamp")
    _require(axis.get("time_unit", "s") in ("s", "ms", "us", "ns"),
             "its time unit is not one of s, ms, us, ns")
    try:
        zoneinfo.ZoneInfo(axis["timezone"])
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        raise _Invalid("its time zone is not a known IANA name") from None
    _require(axis["horizon"] == horizon, "its time axis does not match its horizon")
    _require(_is_int(axis["period_us"]) and 0 < axis["period_us"] <= 1 << 62,
             "its period is not a positive duration")
    try:
        start = np.datetime64(axis["start"], "us")
    except (TypeError, ValueError):
        raise _Invalid("its start is not a timestamp") from None
    _require(not np.isnat(start), "its start is not a timestamp")
    return dict(axis)


def _check_build(build: Any) -> dict[str, Any]:
    _require(isinstance(build, Mapping) and set(build) == _BUILD_KEYS,
             "its build parameters are incomplete or unknown")
    b = dict(build)
    b["epsilon"] = check_epsilon(b["epsilon"], "epsilon")
    b["delta"] = check_delta(b["delta"], "delta")
    b["unit"] = check_unit(b["unit"], TABLE_UNITS)
    b["confidence"] = check_confidence(b["confidence"], "confidence")
    _require(_is_int(b["horizon"]) and 1 <= b["horizon"] <= MAX_HORIZON,
             "its horizon is not an integer in range")
    b["windows"] = list(parse_windows(b["windows"], b["horizon"]))
    _require(b["windows"] == list(build["windows"]), "its windows are not in canonical form")
    b["k_values"] = list(parse_k(b["k_values"]))
    _require(b["k_values"] == list(build["k_values"]), "its k_values are not in canonical form")
    b["method"] = check_method(b["method"])
    for flag in ("singleton", "seeded"):
        _require(isinstance(b[flag], bool), f"its {flag} flag is not true/false")
    _require(_is_int(b["n_dropped"]) and b["n_dropped"] >= 0, "its dropped count is invalid")
    _require(isinstance(b["source_kind"], str) and 0 < len(b["source_kind"]) <= 64,
             "its source kind is not an engine name")
    b["axis"] = _check_axis(b["axis"], b["horizon"])
    return b


def _check_summaries(meta: Any, arrays: Mapping[str, np.ndarray],
                     build: dict[str, Any]) -> WindowSummaries:
    specs = summary_specs(build["windows"], build["k_values"])
    _require(isinstance(meta, Mapping) and meta.get("horizon") == build["horizon"]
             and meta.get("specs") == [s.to_json() for s in specs],
             "its summaries do not match its parameters")
    names = ("summary_slots", "summary_keys", "summary_weights")
    _require(set(names) <= set(arrays), "its summary arrays are missing")
    slots, keys, weights = (arrays[n] for n in names)
    for arr in (slots, keys, weights):
        _require(arr.dtype == np.int64 and arr.ndim == 1 and arr.size == slots.size,
                 "its summary arrays have inconsistent types or shapes")
    summaries = WindowSummaries(build["horizon"], specs, slots, keys, weights)
    _require(summaries.entries_valid(), "its summaries are out of range")
    if build["singleton"]:
        _require(summaries.singleton, "it declares a singleton log its summaries contradict")
    return summaries


def measurement_name(label: str, k: int) -> str:
    """The array name of the stored measurement of structure ``(label, k)``."""
    return f"{MEASUREMENT}/{label}/{k}"


def _check_measurements(arrays: Mapping[str, np.ndarray], build: WindowBuild
                        ) -> dict[tuple[str, int], np.ndarray]:
    """The stored measurements, one per eagerly measured structure of the saved plan, each
    the integer vector of the size that structure measures (none at all: the state measures
    again from the key and the summaries, as a grouped file's groups do)."""
    plan = make_plan(build.plan_request())
    want = {measurement_name(label, k): ((label, k), s.measurement_size)
            for (label, k), s in plan.structures.items() if s.measurement_size is not None}
    extra = set(arrays) - {"summary_slots", "summary_keys", "summary_weights"}
    if not extra:
        return {}
    _require(extra == set(want), "its stored measurements do not match its plan")
    out = {}
    for name, (key, size) in want.items():
        arr = arrays[name]
        _require(arr.dtype == np.int64 and arr.ndim == 1 and arr.size == size,
                 "its stored measurements have the wrong type or shape")
        out[key] = np.asarray(arr)
    return out


def checked_load(label: str, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
                 ) -> tuple[WindowSummaries, bytes, WindowBuild,
                            dict[tuple[str, int], np.ndarray]]:
    """``(summaries, key, build parameters, stored measurements)`` of a saved release, every
    field checked.

    Raises
    ------
    DataError
        Naming ``label``, when any field is missing, of the wrong type or out of range, or the
        plan of the saved parameters cannot be built.
    """
    try:
        _require(set(meta) == {"build", "key", "summaries"}, "its fields are incomplete")
        key_hex = meta["key"]
        _require(isinstance(key_hex, str) and len(key_hex) == 64, "its key is not 32 bytes")
        try:
            key = bytes.fromhex(key_hex)
        except ValueError:
            raise _Invalid("its key is not hexadecimal") from None
        build = _check_build(meta["build"])
        summaries = _check_summaries(meta["summaries"], arrays, build)
        _require(math.isfinite(build["epsilon"]), "its epsilon is not finite")
        measurements = _check_measurements(arrays, WindowBuild.from_dict(build))
    except _Invalid as exc:
        raise DataError(f"{label} is not a valid dpfreq window release file: {exc}.") from None
    except (DPFreqError, ValueError, TypeError, KeyError) as exc:
        reason = str(exc).rstrip(".") or type(exc).__name__
        raise DataError(f"{label} is not a valid dpfreq window release file: {reason}.") \
            from None
    return summaries, key, WindowBuild.from_dict(build), measurements
