"""The release of a shuffled measurement: the cross-party release, plus what it was made from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.result import CrossPartyRelease
from dpfreq.crossparty.shuffle.plan import MISSING_REASONS

__all__ = ["RELATION", "ShuffleRelease"]

#: The neighbouring relation of a shuffled measurement, in words.
RELATION = ("add or remove one user with all their impressions at every party (item = one "
            "user; rows = their impressions wherever they are)")


@dataclass(frozen=True, kw_only=True, repr=False)
class ShuffleRelease(CrossPartyRelease):
    """Reach and frequency of the union (and of each party) from the shuffled noisy histograms.

    The fields of :class:`~dpfreq.crossparty.CrossPartyRelease` (``parties`` are the included
    parties; the per-party arrays have no rows without ``per_party``), and:

    Attributes
    ----------
    histograms : tuple of numpy.ndarray
        The noisy histograms the aggregator reconstructed (union first, then each included
        party with ``per_party``): everything published is computed from them.
    missing : tuple of (str, str)
        Declared parties not measured, with the reason.

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle import ShuffleParams, simulate_shuffle
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=4096, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
    ...     per_party=False,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> regs = np.random.default_rng(0).poisson(0.2, (2, 4096)).clip(0, 3)
    >>> rel = simulate_shuffle(regs, params=params, confidence=0.9, rng=1)
    >>> rel.mechanism, rel.unit, len(rel.histograms), rel.missing
    ('crossparty-shuffle', 'item', 1, ())
    """

    histograms: tuple[Any, ...] = ()
    missing: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        views = []
        for h in self.histograms:
            view = np.asarray(h).view()
            view.flags.writeable = False
            views.append(view)
        object.__setattr__(self, "histograms", tuple(views))

    @property
    def relation(self) -> str:
        """The neighbouring relation protected, in words."""
        return RELATION

    def _summary(self) -> list[tuple[str, str]]:
        rows = super()._summary()
        rows[1] = ("histograms", f"{len(self.histograms)} (noise added once, by the workers)")
        rows.insert(1, ("covers", Coverage.from_dict(self.mechanism_params["coverage"])
                        .describe()))
        if self.missing:
            rows.append(("missing", "; ".join(f"{p}: {MISSING_REASONS.get(r, r)}"
                                              for p, r in self.missing)))
        return rows
