"""Sketch files: an ε-DP release on disk, integrity-checked (signed with the artefact key).

A sketch file is a :func:`dpfreq.artifacts.write_artifact` zip of kind ``crossparty-sketch``:
the header holds the public parameters, the party, what the sketch covers (period and
campaigns, :class:`~dpfreq.crossparty.coverage.Coverage`), the sketch id, ``seeded``, the
engine and a statement of the guarantee; the arrays are the reach bits (packed, 8 per byte)
and, when the measurement has them, the noisy frequency registers in the narrowest signed
integer type that holds them (a function of the noisy values alone). It carries a SHA-256
digest, or an HMAC-SHA256 signature when ``DPFREQ_ARTIFACT_KEY`` is set; a file edited after it
was written is refused in one line. Reading validates every field against its rule.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.errors import DataError, DPFreqError

__all__ = ["SKETCH_KIND", "SKETCH_VERSION", "read_sketch", "write_sketch"]

SKETCH_KIND = "crossparty-sketch"
SKETCH_VERSION = 2
_ID = re.compile(r"[0-9a-f]{32}")
_META = {"params", "party", "coverage", "sketch_id", "seeded", "engine", "statement"}
_WIDTHS = (np.int8, np.int16, np.int32, np.int64)


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` in the narrowest signed integer type that holds them all."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for dtype in _WIDTHS:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return values.astype(dtype)
    return values  # pragma: no cover - int64 holds them


def _statement(sketch: Any) -> str:
    return (f"epsilon-DP release (epsilon={sketch.epsilon:g}, delta=0) of party "
            f"{sketch.party!r} ({sketch.coverage.describe()}); unit of privacy: one user with "
            "all their impressions at that party; mechanism: randomized response on the reach bits"
            + (", discrete Laplace on the frequency registers"
               if sketch.frequency is not None else "") + ".")


def write_sketch(sketch: Any, path: str | Path) -> Path:
    """Write a :class:`~dpfreq.crossparty.PartySketch` (see the module docstring)."""
    arrays = {"reach_bits": np.packbits(np.asarray(sketch.reach_bits, dtype=np.uint8))}
    if sketch.frequency is not None:
        arrays["frequency"] = _narrow(np.asarray(sketch.frequency, dtype=np.int64))
    meta = {"params": sketch.params.to_dict(), "party": sketch.party,
            "coverage": sketch.coverage.to_dict(), "sketch_id": sketch.sketch_id,
            "seeded": bool(sketch.seeded), "engine": sketch.engine, "statement": _statement(sketch)}
    return write_artifact(path, kind=SKETCH_KIND, version=SKETCH_VERSION, meta=meta,
                          arrays=arrays)


def _bad(label: str, reason: str) -> DataError:
    return DataError(f"{label} is not a valid dpfreq {SKETCH_KIND} file: {reason}.")


def read_sketch(path: str | Path) -> dict[str, Any]:
    """The fields of a sketch written by :func:`write_sketch`, every one checked."""
    label = str(path)
    _, meta, arrays = read_artifact(path, kind=SKETCH_KIND, versions=(SKETCH_VERSION,))
    if set(meta) != _META:
        raise _bad(label, "its header has other fields than a sketch's")
    params = CrossPartyParams.from_dict(meta["params"], label=f"the parameters in {label}")
    party, sketch_id = meta["party"], meta["sketch_id"]
    if not isinstance(party, str) or not 1 <= len(party) <= 200 or not party.isprintable():
        raise _bad(label, "its party is not a name of 1 to 200 printable characters")
    if not isinstance(sketch_id, str) or not _ID.fullmatch(sketch_id):
        raise _bad(label, "its sketch id is not 32 hex digits")
    try:
        coverage = Coverage.from_dict(meta["coverage"])
    except DPFreqError as exc:
        raise _bad(label, f"its coverage is not valid ({str(exc).rstrip('.')})") from None
    if not isinstance(meta["seeded"], bool) or not isinstance(meta["engine"], str):
        raise _bad(label, "its seeded or engine field has the wrong type")
    R = params.registers
    expected = {"reach_bits", "frequency"} if params.has_frequency else {"reach_bits"}
    if set(arrays) != expected:
        raise _bad(label, "its arrays are not those its parameters call for")
    packed = arrays["reach_bits"]
    if packed.dtype != np.uint8 or packed.shape != ((R + 7) // 8,):
        raise _bad(label, f"its reach bits are not {R} packed bits")
    pad = 8 * packed.size - R  # the low bits of the last byte (packbits is big-endian)
    if pad and int(packed[-1]) & ((1 << pad) - 1):
        raise _bad(label, "its reach bits have padding bits set")
    bits = np.unpackbits(packed, count=R)
    frequency = None
    if params.has_frequency:
        frequency = arrays["frequency"]
        if frequency.dtype not in _WIDTHS or frequency.shape != (R,):
            raise _bad(label, f"its frequency registers are not {R} signed integers")
    return {"params": params, "party": party, "coverage": coverage, "sketch_id": sketch_id,
            "reach_bits": bits, "frequency": frequency,
            "seeded": meta["seeded"], "engine": meta["engine"]}
