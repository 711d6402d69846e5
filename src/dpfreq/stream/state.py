"""The saved state of a reach stream: a directory with a manifest and one per-item file.

``STATE/stream.dpfreq`` is an integrity-checked artefact (:mod:`dpfreq.artifacts`: SHA-256, or
HMAC-SHA256 when ``DPFREQ_ARTIFACT_KEY`` is set) holding the public parameters and plan (with
the spec of its counter, so that opening a stream never plans again:
:mod:`dpfreq.stream.mechanisms.saved`; a horizon-free stream's grows by each epoch it reaches), the
secret noise key, the exact per-period increments of every (group, k) structure (private: the
counters need them to measure rows that close later), the **noisy measurements** of every
structure (integers: every published number is computed from them alone), the interval and
band half-widths of every closed period at the stream's confidence (public functions of the
plan, saved so that they are computed once: :func:`dpfreq.stream.publish.widths_through`),
the periods closed so far and a private digest of each one's events (compared with a re-sent
period: :mod:`dpfreq.stream.resend`), with ``capping_epsilon`` the two
dropped-fraction counters' spec and record (as planned at creation, compared when opened, like
the reach counter's), exact increments, noisy rows and half-widths
(:mod:`dpfreq.stream.capping`; alike, under their own sub-key), and the name and digest of the
per-item file of the current generation (``items-<gen>.npz``, ``items-<gen>.parquet``, or on
Spark the directory ``items-<gen>.parquet/`` of part files, digested as a whole:
:mod:`dpfreq.stream.items.files`).

An append writes the next generation's per-item file under a new name, then the manifest
(written to a temporary name and renamed: atomic), then removes the previous per-item file (or
directory). A
crash before the rename leaves the previous manifest pointing at the previous, untouched
per-item file; a crash after it leaves the new state, whose answers a re-sent append returns.
The directory holds the secret key and exact counts: protect it like the raw data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.errors import DataError
from dpfreq.stream.items.files import check_digest
from dpfreq.stream.params import StreamParams

__all__ = ["MANIFEST", "StreamState", "load_state", "manifest_of", "save_state",
           "saved_identity"]

MANIFEST = "stream.dpfreq"
_KIND = "reach-stream"
_VERSION = 4  # 2: the counter spec and the saved half-widths; 3: the capping counters;
# 4: a digest per period (was: per append)

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class StreamState:
    """Everything a stream keeps between appends (see the module docstring)."""

    params: StreamParams
    seeded: bool
    key: bytes
    plan: dict[str, Any] = field(default_factory=dict)
    counter: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    items_file: str | None = None
    items_digest: str | None = None
    key_kind: str | None = None
    last: int = 0
    digests: tuple[str, ...] = ()
    exact: IntArray = field(default_factory=lambda: np.zeros((0, 0, 0), dtype=np.int64))
    noisy: IntArray = field(default_factory=lambda: np.zeros((0, 0, 0), dtype=np.int64))
    widths: FloatArray = field(default_factory=lambda: np.zeros((2, 0), dtype=np.float64))
    n_late_dropped: int = 0
    n_bounded_out: int = 0
    n_pairs: int = 0
    cap_counter: dict[str, Any] = field(default_factory=dict)
    cap_record: dict[str, Any] = field(default_factory=dict)
    cap_exact: IntArray = field(default_factory=lambda: np.zeros((1, 2, 0), dtype=np.int64))
    cap_noisy: IntArray = field(default_factory=lambda: np.zeros((2, 1, 0), dtype=np.int64))
    cap_widths: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))

    def advanced(self, **changes: Any) -> StreamState:
        """A copy with the fields of the next generation."""
        return replace(self, **changes)


def save_state(path: Path, state: StreamState) -> None:
    """Write the manifest atomically (temporary name, then rename)."""
    meta = {"params": state.params.to_dict(), "plan": state.plan, "counter": state.counter,
            "seeded": state.seeded,
            "generation": state.generation, "items_file": state.items_file,
            "items_digest": state.items_digest, "key_kind": state.key_kind,
            "last": state.last, "n_late_dropped": state.n_late_dropped,
            "n_bounded_out": state.n_bounded_out, "n_pairs": state.n_pairs,
            "cap_counter": state.cap_counter, "cap_record": state.cap_record,
            "digests": list(state.digests)}
    write_artifact(path / MANIFEST, kind=_KIND, version=_VERSION, meta=meta,
                   arrays={"key": np.frombuffer(state.key, dtype=np.uint8),
                           "exact": state.exact, "noisy": state.noisy,
                           "widths": state.widths, "cap_exact": state.cap_exact,
                           "cap_noisy": state.cap_noisy, "cap_widths": state.cap_widths})


def _bad(path: Path, why: str) -> DataError:
    return DataError(f"{path} is not a valid reach stream: {why}.")


def manifest_of(path: Path) -> Path:
    """The manifest file of the stream in ``path``; a directory without one is refused."""
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise DataError(f"{path} holds no reach stream (no {MANIFEST}); create one first.")
    return manifest


def load_state(path: Path) -> StreamState:
    """Read and check a stream's manifest and its per-item file's digest."""
    manifest = manifest_of(path)
    _, meta, arrays = read_artifact(manifest, kind=_KIND, versions=(_VERSION,))
    try:
        params = StreamParams.from_dict(dict(meta["params"]))
        state = StreamState(
            params=params, seeded=bool(meta["seeded"]), key=arrays["key"].tobytes(),
            plan=dict(meta["plan"]), counter=dict(meta["counter"]),
            generation=int(meta["generation"]), items_file=meta["items_file"],
            items_digest=meta["items_digest"], key_kind=meta["key_kind"],
            last=int(meta["last"]), digests=tuple(map(str, meta["digests"])),
            exact=arrays["exact"].astype(np.int64),
            noisy=arrays["noisy"].astype(np.int64),
            widths=arrays["widths"].astype(np.float64),
            n_late_dropped=int(meta["n_late_dropped"]),
            n_bounded_out=int(meta["n_bounded_out"]), n_pairs=int(meta["n_pairs"]),
            cap_counter=dict(meta["cap_counter"]), cap_record=dict(meta["cap_record"]),
            cap_exact=arrays["cap_exact"].astype(np.int64),
            cap_noisy=arrays["cap_noisy"].astype(np.int64),
            cap_widths=arrays["cap_widths"].astype(np.float64))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, f"its manifest has a missing or malformed field ({exc})") from None
    measured = state.params.capping_epsilon is not None
    if len(state.key) < 16 or len(state.digests) != state.last or state.exact.ndim != 3 or (
            state.noisy.ndim != 3) or (
            state.widths.shape != (2, state.last)) or state.cap_exact.ndim != 3 or (
            state.cap_noisy.ndim != 3) or state.cap_widths.shape != (
            (state.last,) if measured else (0,)) or measured != bool(state.cap_counter):
        raise _bad(path, "its key or arrays do not have the expected shape")
    if state.items_file is not None:
        check_digest(path / state.items_file, str(state.items_digest), str(path))
    return state


def saved_identity(path: Path) -> tuple[int, bytes]:
    """``(generation, key)`` of the manifest saved in ``path`` now (checked like
    :func:`load_state` checks it; the per-item file is not read)."""
    _, meta, arrays = read_artifact(manifest_of(path), kind=_KIND, versions=(_VERSION,))
    try:
        return int(meta["generation"]), arrays["key"].tobytes()
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, f"its manifest has a missing or malformed field ({exc})") from None
