"""The release type of a cross-party merge: reach, k+ reach and frequency, union and per party."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq.release import RELATIONS, Release

__all__ = ["RELATION", "CrossPartyRelease"]

#: The neighbouring relation of merged local-noise sketches, in words.
RELATION = (f"{RELATIONS['item']} (item = one user; rows = their impressions at one party; a "
            "person at j of the merged parties is protected at j*epsilon)")


@dataclass(frozen=True, kw_only=True, repr=False)
class CrossPartyRelease(Release):
    """Deduplicated reach and frequency of merged party sketches, with intervals.

    ``value`` is the union's k+ reach for ``k = 1..K`` (``value[0]`` is the reach; length 1
    for reach-only sketches), after the consistency step
    (:mod:`dpfreq.crossparty.consistency`). ``error`` holds its per-estimate intervals
    (``lower``/``upper``), each holding with probability about ``error.confidence`` (normal
    intervals: see :mod:`dpfreq.crossparty.estimate`); the intervals are those of the raw
    estimates, before the consistency step.

    Attributes
    ----------
    parties : tuple of str
        The merged parties, in the order given.
    max_frequency : int
        ``K``.
    frequency, frequency_lower, frequency_upper : numpy.ndarray or None
        The union's frequency distribution among reached users (fractions for ``1..K−1`` and
        ``K+``, consistent with ``value``) and the raw estimate's intervals; None for reach-only
        sketches.
    party_kplus_reach, party_lower, party_upper : numpy.ndarray
        Each party's k+ reach (``P × len(value)``), consistent with the union's, and the raw
        intervals.
    raw_kplus_reach, raw_party_kplus_reach : numpy.ndarray
        The estimates before the consistency step.

    Examples
    --------
    >>> import math
    >>> from dpfreq.crossparty import (CrossPartyParams, build_sketch, key_fingerprint,
    ...                                merge_sketches)
    >>> key = bytes(32)
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=4096, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon_reach=math.log(3), epsilon_frequency=4.0,
    ...     hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    >>> log = {"user": np.repeat(np.arange(1000), 2)}
    >>> rel = merge_sketches([build_sketch(log, user="user", party="a", params=params,
    ...                                    key=key, rng=5)], confidence=0.9)
    >>> rel.value.shape, rel.frequency.shape, rel.parties
    ((3,), (3,), ('a',))
    >>> sorted(rel.table())
    ['entity', 'k', 'lower', 'reach', 'upper']
    """

    parties: tuple[str, ...]
    max_frequency: int
    frequency: Any = None
    frequency_lower: Any = None
    frequency_upper: Any = None
    party_kplus_reach: Any = None
    party_lower: Any = None
    party_upper: Any = None
    raw_kplus_reach: Any = None
    raw_party_kplus_reach: Any = None

    _count_columns = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("frequency", "frequency_lower", "frequency_upper", "party_kplus_reach",
                     "party_lower", "party_upper", "raw_kplus_reach", "raw_party_kplus_reach"):
            arr = getattr(self, name)
            if isinstance(arr, np.ndarray):
                view = arr.view()
                view.flags.writeable = False
                object.__setattr__(self, name, view)

    @property
    def relation(self) -> str:
        """The neighbouring relation protected, in words (per party: see :data:`RELATION`)."""
        return RELATION

    @property
    def reach(self) -> float:
        """The union's deduplicated reach (``value[0]``)."""
        return float(self.value[0])

    def _summary(self) -> list[tuple[str, str]]:
        kind = "reach and frequency" if self.frequency is not None else "reach only"
        return [("parties", ", ".join(self.parties)), ("sketches", kind),
                ("reach", f"{self.reach:,.0f} [{float(self.error.lower[0]):,.0f}, "
                          f"{float(self.error.upper[0]):,.0f}]")]

    def table(self) -> dict[str, Any]:
        """Tidy columns, one row per (entity, k): ``entity`` ("union" or a party), ``k``,
        ``reach`` (k+ reach, consistent), ``lower``/``upper`` (raw intervals)."""
        ks = np.arange(1, len(self.value) + 1)
        entity: list[str] = []
        k: list[int] = []
        reach: list[float] = []
        lower: list[float] = []
        upper: list[float] = []
        rows = [("union", self.value, self.error.lower, self.error.upper)]
        rows += [(p, self.party_kplus_reach[i], self.party_lower[i], self.party_upper[i])
                 for i, p in enumerate(self.parties)]
        for name, val, lo, hi in rows:
            entity += [name] * len(ks)
            k += ks.tolist()
            reach += np.asarray(val, dtype=np.float64).tolist()
            lower += np.asarray(lo, dtype=np.float64).tolist()
            upper += np.asarray(hi, dtype=np.float64).tolist()
        return {"entity": entity, "k": k, "reach": reach, "lower": lower, "upper": upper}

    def plot(self, ax: Any = None) -> Any:
        """Draw the k+ reach of the union and of each party with their intervals."""
        from dpfreq.plotting import new_axes

        ax = new_axes(ax)
        ks = np.arange(1, len(self.value) + 1)
        rows = [("union", self.value, self.error.lower, self.error.upper)]
        rows += [(p, self.party_kplus_reach[i], self.party_lower[i], self.party_upper[i])
                 for i, p in enumerate(self.parties)]
        width = 0.8 / len(rows)
        for i, (name, val, lo, hi) in enumerate(rows):
            val = np.asarray(val, dtype=np.float64)
            with np.errstate(invalid="ignore"):  # inf − inf where registers look saturated
                err = np.vstack([val - lo, hi - val])
            err = np.where(np.isfinite(err), np.clip(err, 0, None), 0.0)
            height = np.where(np.isfinite(val), val, 0.0)  # no bar where there is no estimate
            ax.bar(ks + (i - (len(rows) - 1) / 2) * width, height, width, yerr=err, label=name,
                   capsize=2)
        ax.set_xlabel("k (reached at least k times)")
        ax.set_ylabel("users")
        ax.set_xticks(ks)
        ax.legend(fontsize="small")
        ax.set_title(f"k+ reach ({self.error.confidence:.3g} intervals)")
        return ax
