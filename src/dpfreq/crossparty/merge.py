"""Merging party sketches: checks, the union's sums, the estimates, the consistent release.

A merge is post-processing of the sketches: it spends nothing, draws nothing, and needs no key.
It refuses, before computing anything, sketches of different parameters (measurement, registers,
sampling, cap, ε, hash key) or coverage (period, campaigns), sketches of other parameters or
coverage than the analyst expects (when given), the same sketch twice, and two sketches of one
party (two noise draws of one log would count its users twice); reading a file refuses a
tampered one (:mod:`dpfreq.crossparty.files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_confidence, message
from dpfreq.crossparty.consistency import consistent_kplus
from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.estimate import (
    EntityEstimate,
    estimate_entity,
    kplus_distribution,
    union_error,
)
from dpfreq.crossparty.local_noise import calibrate
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.crossparty.result import CrossPartyRelease
from dpfreq.crossparty.sketch import MECHANISM, UNIT, PartySketch
from dpfreq.errors import ParameterError, public_errors

__all__ = ["check_mergeable", "merge_sketches"]

_FUNC = "merge_sketches"


def _load(sketches: Any) -> list[PartySketch]:
    if isinstance(sketches, PartySketch | str | Path) or not isinstance(sketches, Sequence):
        raise ParameterError(message("sketches", "a list of PartySketch objects or "
                                     "sketch files", type(sketches).__name__))
    out = []
    for item in sketches:
        if isinstance(item, PartySketch):
            out.append(item)
        elif isinstance(item, str | Path):
            out.append(PartySketch.load(item))
        else:
            raise ParameterError(message("sketches", "a list of PartySketch objects or "
                                         "sketch files", type(item).__name__))
    if not out:
        raise ParameterError(message("sketches", "a non-empty list", []))
    return out


def _public(sketch: PartySketch) -> dict[str, Any]:
    """What must agree across merged sketches: the parameters and the coverage, by field."""
    return {**sketch.params.to_dict(), **sketch.coverage.to_dict()}


#: what a field left unset means, in a refusal
_UNSET = {"period": "every time (no period given)",
          "campaigns": "every campaign (no list given)"}


def _shown(name: str, value: Any, coverage: Coverage | None) -> str:
    """A field's value in a refusal: a coverage's period as the sketch states it (never raw
    µs), a field left unset as what that means, a list as its items, any other value as its
    repr (never Python's None)."""
    if value is None:
        return _UNSET.get(name, "none")
    if name == "period" and coverage is not None:
        return coverage.shown(name)
    if isinstance(value, list | tuple):
        return ", ".join(repr(v) for v in value)
    return repr(value)


def check_mergeable(sketches: list[PartySketch], *, params: CrossPartyParams | None = None,
                    coverage: Coverage | None = None) -> None:
    """Refuse (one line each) differing parameters or coverage, parameters or coverage other
    than ``params``/``coverage`` (when given), a sketch twice, a party twice.

    Examples
    --------
    >>> check_mergeable([])  # nothing to compare
    """
    if not sketches:
        return
    first = _public(sketches[0])
    expected = {**({} if params is None else params.to_dict()),
                **({} if coverage is None else coverage.to_dict())}
    seen_ids: dict[str, str] = {}
    seen_parties: set[str] = set()
    for i, sketch in enumerate(sketches):
        fields = _public(sketch)
        for name, value in fields.items():
            has = _shown(name, value, sketch.coverage)
            if name in expected and value != expected[name]:
                raise ParameterError(message(
                    "sketches", f"a list of sketches of the expected parameters and coverage "
                    f"(sketch {i + 1}, party {sketch.party!r}, has {name} {has}, "
                    f"expected {_shown(name, expected[name], coverage)})",
                    f"{len(sketches)} sketches"))
            if value != first[name]:
                raise ParameterError(message(
                    "sketches", f"a list of sketches with the same parameters and coverage "
                    f"(sketch {i + 1}, party {sketch.party!r}, has {name} {has}, the first "
                    f"has {name} {_shown(name, first[name], sketches[0].coverage)})",
                    f"{len(sketches)} sketches"))
        if sketch.sketch_id in seen_ids:
            other = seen_ids[sketch.sketch_id]
            why = ("appears twice" if other == sketch.party else
                   f"is also that of party {other!r}: one seed drew both, or a file was edited")
            raise ParameterError(message(
                "sketches", "a list in which each sketch appears once (sketch id "
                f"{sketch.sketch_id} of party {sketch.party!r} {why})",
                f"{len(sketches)} sketches"))
        if sketch.party in seen_parties:
            raise ParameterError(message(
                "sketches", f"a list with one sketch per party (party {sketch.party!r} "
                "has two: its users would be counted twice)", f"{len(sketches)} sketches"))
        seen_ids[sketch.sketch_id] = sketch.party
        seen_parties.add(sketch.party)


def _union_inputs(sketches: list[PartySketch]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64] | None]:
    """``(N_j, summed frequency registers)`` of the union."""
    P = len(sketches)
    ones: NDArray[np.uint32] = np.zeros(sketches[0].params.registers, dtype=np.uint32)
    for s in sketches:
        np.add(ones, s.reach_bits, out=ones, casting="unsafe")
    hist = np.bincount(ones, minlength=P + 1).astype(np.int64)
    freqs = [s.frequency for s in sketches if s.frequency is not None]
    if len(freqs) < P:
        return hist, None
    sums: NDArray[np.int64] = np.zeros(sketches[0].params.registers, dtype=np.int64)
    for f in freqs:
        np.add(sums, f, out=sums)
    return hist, sums


def _bit_histogram(sketch: PartySketch) -> NDArray[np.int64]:
    """``(N_0, N_1)`` of one party's bits."""
    ones = int(np.count_nonzero(sketch.reach_bits))
    return np.array([sketch.params.registers - ones, ones], dtype=np.int64)


def _entity(hist: NDArray[np.int64], sums: NDArray[Any] | None, parties: int,
            sketch: PartySketch, z: float) -> EntityEstimate:
    params, noise = sketch.params, sketch.noise
    return estimate_entity(hist, sums, parties=parties, q=noise.keep_probability,
                           alpha=noise.frequency_alpha, max_frequency=params.max_frequency,
                           registers=params.registers, rate=float(params.sampling_rate), z=z)


#: the noise laws a merged sketch's intervals come from (its error statement)
_NOISE = ("the exact noise laws (randomized response on the reach bits, discrete Laplace on the "
          "frequency registers)")


@public_errors(_FUNC)
def merge_sketches(sketches: Sequence[PartySketch | str | Path], *,
                   confidence: float = 0.95, params: CrossPartyParams | None = None,
                   coverage: Coverage | None = None) -> CrossPartyRelease:
    """Merge party sketches into deduplicated reach, k+ reach and frequency, with intervals.

    Parameters
    ----------
    sketches : list of PartySketch or sketch files
        One sketch per party of the same measurement (any subset of the parties).
    confidence : float, default 0.95
        Confidence level of the intervals, in (0, 1).
    params : CrossPartyParams, optional
        The parameters the analyst expects (the measurement's parameters file): a sketch of
        others is refused, naming the field. None: the sketches need only agree.
    coverage : Coverage, optional
        The period and campaigns the analyst expects, checked in the same way.

    Returns
    -------
    CrossPartyRelease
        The union's k+ reach (``value``), its frequency distribution, each party's k+ reach,
        all consistent with each other, and the intervals.

    Raises
    ------
    ParameterError
        Sketches of different parameters or coverage, or of others than ``params`` and
        ``coverage``, the same sketch twice, two sketches of one party.
    DataError
        A sketch file that is missing, tampered with or unreadable.

    Notes
    -----
    **Privacy.** Post-processing of ε-DP sketches: it spends nothing and draws nothing. Each
    party's users are protected at the party's ``params.epsilon`` (unit ``"item"``: a user with
    all their impressions at that party); a person present at ``j`` of the merged parties is
    protected at ``j·epsilon`` across them. The estimators (reach from the bits, classes by the
    inverse noise filter, users by inverting the compound Poisson law) are in
    ``docs/theory/crossparty.md``.

    Examples
    --------
    >>> import math
    >>> from dpfreq.crossparty import CrossPartyParams, build_sketch, key_fingerprint
    >>> key = bytes(32)
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=4096, sampling_start=0, sampling_width=1,
    ...     max_frequency=2, epsilon_reach=math.log(3), epsilon_frequency=None,
    ...     hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    >>> a = build_sketch({"u": np.arange(0, 1500)}, user="u", party="a", params=params,
    ...                  key=key, rng=1)
    >>> b = build_sketch({"u": np.arange(1000, 2500)}, user="u", party="b", params=params,
    ...                  key=key, rng=2)
    >>> rel = merge_sketches([a, b], confidence=0.95)
    >>> rel.parties, bool(rel.reach >= rel.party_kplus_reach[:, 0].max())
    (('a', 'b'), True)
    >>> merge_sketches([a, a], confidence=0.95)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.ParameterError: sketches of merge_sketches must be a list in which each sketch ...
    """
    conf = check_confidence(confidence, "confidence")
    if params is not None and not isinstance(params, CrossPartyParams):
        raise ParameterError(message("params", "None or a CrossPartyParams",
                                     type(params).__name__))
    if coverage is not None and not isinstance(coverage, Coverage):
        raise ParameterError(message("coverage", "None or a Coverage",
                                     type(coverage).__name__))
    loaded = _load(sketches)
    check_mergeable(loaded, params=params, coverage=coverage)
    z = NormalDist().inv_cdf((1.0 + conf) / 2.0)
    hist, sums = _union_inputs(loaded)
    union = _entity(hist, sums, len(loaded), loaded[0], z)
    parts = [_entity(_bit_histogram(s), s.frequency, 1, s, z) for s in loaded]
    u, p = consistent_kplus(union.kplus, union.kplus_sd, np.vstack([e.kplus for e in parts]),
                            np.vstack([e.kplus_sd for e in parts]))
    params = loaded[0].params  # every sketch's (checked above)
    mech = {"params": params.to_dict(), "coverage": loaded[0].coverage.to_dict(),
            "noise": calibrate(params).describe(),
            "parties": [s.party for s in loaded], "sketch_ids": [s.sketch_id for s in loaded],
            "engines": [s.engine for s in loaded], "confidence": conf,
            "sampling_rate": float(params.sampling_rate),
            "relation": f"a user with all their impressions at one party; a person at j of "
                        f"the {len(loaded)} parties is protected at j*epsilon"}
    return CrossPartyRelease(
        value=u, epsilon=params.epsilon, delta=0.0, unit=UNIT, mechanism=MECHANISM,
        mechanism_params=mech, seeded=any(s.seeded for s in loaded),
        error=union_error(union, conf, _NOISE),
        parties=tuple(s.party for s in loaded), max_frequency=params.max_frequency,
        frequency=None if union.frequency is None else kplus_distribution(u),
        frequency_lower=union.frequency_lower, frequency_upper=union.frequency_upper,
        party_kplus_reach=p, party_lower=np.vstack([e.kplus_lower for e in parts]),
        party_upper=np.vstack([e.kplus_upper for e in parts]), raw_kplus_reach=union.kplus,
        raw_party_kplus_reach=np.vstack([e.kplus for e in parts]))
