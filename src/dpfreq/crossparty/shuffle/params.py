"""The public parameters of one shuffled cross-party measurement (noise added once).

A shuffled measurement fixes what a local-noise measurement fixes about the register space —
the measurement's name, ``R``, the VID sampling interval, the cap ``K``, the keyed hash and the
fingerprint of the parties' hash key (:class:`~dpfreq.crossparty.CrossPartyParams`) — and,
instead of per-party ε's, the guarantee of the whole measurement: ``epsilon`` and ``delta``
for one user with all their impressions at every party. It fixes what every party counts —
the measurement period and the campaigns (:class:`~dpfreq.crossparty.Coverage`): a party's
shares count only those rows of its log, so the workers never add up shares of different
periods or campaigns. It also names the participating
parties (in a fixed order: party ``i`` sends its seed share to worker ``i mod 2``), whether
each party's own figures are measured beside the union's (``per_party``: one more noisy
histogram per party, the budget split evenly over all of them), and the deadline after which
the workers measure whoever has uploaded.

Nothing here comes from data and nothing has a default. The file is public and sealed with a
plain SHA-256 digest (:func:`dpfreq.artifacts.seal_json`, never signed); :attr:`param_id` is
that digest: every share and every worker output names it, and one made for other parameters
is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Self

from dpfreq._validate import check_delta, check_epsilon, check_int, message
from dpfreq.budget import exact_fraction
from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.params import CrossPartyParams, RegisterSpaceFields
from dpfreq.errors import ParameterError, public_errors

__all__ = ["EXAMPLE_ONE_PARTY", "EXAMPLE_TWO_PARTIES", "MAX_PARTIES", "RING_BITS", "ShuffleParams",
           "parse_deadline"]

#: Additive shares live in the integers modulo ``2^RING_BITS``.
RING_BITS = 32
#: Most parties of one measurement (``P·K`` stays far below ``2^32``).
MAX_PARTIES = 1000
#: Docstring examples' parameters (fill_doc fragments): one party ``tv``, 4 registers in 0..2.
EXAMPLE_ONE_PARTY = """>>> from dpfreq.crossparty import Coverage
>>> params = ShuffleParams(
...     measurement="m", registers=4, sampling_start=0, sampling_width=1,
...     max_frequency=2, epsilon=1.0, delta=1e-9, parties=["tv"], per_party=False,
...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
...     key_id="0" * 32)"""
#: Two parties ``tv`` and ``web``, 8 registers in 0..3, the union only.
EXAMPLE_TWO_PARTIES = """>>> from dpfreq.crossparty import Coverage
>>> params = ShuffleParams(
...     measurement="m", registers=8, sampling_start=0, sampling_width=1,
...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
...     per_party=False, coverage=Coverage(), deadline="2030-01-01",
...     hash="sha256-prefix/v1", key_id="0" * 32)"""
_KIND = "crossparty-shuffle-params"
_VERSION = 2  # 2: the coverage (period, campaigns)
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FIELDS = ("measurement", "registers", "sampling_start", "sampling_width", "max_frequency",
           "epsilon", "delta", "parties", "per_party", "coverage", "deadline", "hash", "key_id")


def parse_deadline(value: Any, param: str) -> str:
    """An ISO date (midnight UTC) or timestamp (UTC unless it has an offset) as the ISO text
    of that instant in UTC; a datetime is taken the same way.

    Examples
    --------
    >>> parse_deadline("2030-01-02T03:04:05+01:00", "deadline")
    '2030-01-02T02:04:05+00:00'
    """
    rule = "an ISO date or timestamp (UTC unless it has an offset)"
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ParameterError(message(param, rule, value)) from None
    else:
        raise ParameterError(message(param, rule, value))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat()


def _parties(value: Any) -> tuple[str, ...]:
    rule = (f"a list of 1 to {MAX_PARTIES} distinct party names (1 to 200 printable "
            "characters each)")
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ParameterError(message("parties", rule, value))
    names = tuple(value)
    if (not 1 <= len(names) <= MAX_PARTIES or len(set(names)) != len(names)
            or not all(isinstance(p, str) and 1 <= len(p) <= 200 and p.isprintable()
                       for p in names)):
        raise ParameterError(message("parties", rule,
                                     value if len(names) <= 8 else f"{len(names)} names"))
    return names


@dataclass(frozen=True, kw_only=True)
class ShuffleParams(RegisterSpaceFields):
    """The public parameters of a cross-party measurement through the two-worker shuffle.

    Parameters
    ----------
    measurement : str
        The measurement's id (1–64 characters: lower-case letters, digits, ``_``, ``-``);
        used in the services' URLs.
    registers : int
        Number of registers ``R`` of the virtual-ID space, ``1 <= R <= 2^30``.
    sampling_start, sampling_width : float, Fraction or str
        The VID sampling interval, as in :class:`~dpfreq.crossparty.CrossPartyParams`.
    max_frequency : int
        The cap ``K`` of each party's register values (``1 <= K <= 1000``); the union's
        frequencies are reported as ``1..K−1`` and ``K+``.
    epsilon : float
        ε of the whole measurement (every noisy histogram together).
    delta : float
        δ of the whole measurement, in ``(0, 1e-3]`` (the dummy-register noise is truncated:
        it cannot be pure ε-DP).
    parties : list of str
        The participating parties, distinct, in a fixed order (party ``i`` sends its seed
        share to worker ``i mod 2``).
    per_party : bool
        Whether each party's own reach and frequency are measured beside the union's (one
        noisy histogram per party more; the budget is split evenly over ``1 + P``
        histograms).
    coverage : Coverage
        What every party counts: the measurement period (with its unit) and the campaigns
        (:class:`~dpfreq.crossparty.Coverage`; ``Coverage()``: every row of each log). A
        party's shares count only those rows (:func:`~dpfreq.crossparty.shuffle.share_log`
        applies it), and the release states it.
    deadline : str or datetime
        After this instant the workers measure the parties that have uploaded (the others
        are named in the release as missing); an ISO timestamp, UTC unless it has an offset.
    hash : str
        ``"sha256-prefix/v1"`` (:mod:`dpfreq.crossparty.vid`).
    key_id : str
        Fingerprint of the parties' hash key (:func:`dpfreq.crossparty.key_fingerprint`).

    Attributes
    ----------
    histograms : int
        Number of noisy histograms: 1 (the union), plus one per party with ``per_party``.
    param_id : str
        SHA-256 of the sealed parameters: shares and outputs name it.

    Raises
    ------
    ParameterError
        If a field breaks its rule (one line naming it).

    Notes
    -----
    **Privacy.** The measurement is ``(epsilon, delta)``-DP for one user with all their
    impressions at every party (add or remove every row of one user, wherever they are), by
    basic composition of ``histograms`` noisy histograms at ``(epsilon, delta) / histograms``
    each (:mod:`dpfreq.crossparty.shuffle.dummies`), against an aggregator that sees them
    and anyone reading the release; each worker's dummies alone give that guarantee.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="spring", registers=4096, sampling_start=0, sampling_width=1,
    ...     max_frequency=4, epsilon=1.0, delta=1e-9, parties=["tv", "web", "app"],
    ...     per_party=False, coverage=Coverage(period=(0, 30), period_unit="integer"),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    >>> params.histograms, params.deadline, len(params.param_id)
    (1, '2030-01-01T00:00:00+00:00', 64)
    >>> params.coverage.describe()
    'period [0, 30) of the time column'
    >>> ShuffleParams.from_json(params.to_json()) == params
    True
    """

    KIND = _KIND
    VERSION = _VERSION
    FIELDS = _FIELDS
    WHAT = "shuffle parameters"

    epsilon: float
    delta: float
    parties: tuple[str, ...]
    per_party: bool
    coverage: Coverage
    deadline: str
    hash: str
    key_id: str

    @public_errors("ShuffleParams")
    def __post_init__(self) -> None:
        if not isinstance(self.measurement, str) or not _NAME.fullmatch(self.measurement):
            raise ParameterError(message("measurement", "an id of 1 to 64 characters: "
                                         "lower-case letters, digits, _ and -",
                                         self.measurement))
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        # the same rules, named as this class's fields (the outermost public call names them)
        space = self.register_space()
        for name in ("registers", "sampling_start", "sampling_width", "max_frequency"):
            object.__setattr__(self, name, getattr(space, name))
        delta = check_delta(self.delta, "delta")
        if delta <= 0:
            raise ParameterError(message("delta", "a number in (0, 1e-3] (the dummy "
                                         "registers' noise is truncated, so delta > 0)",
                                         self.delta))
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "parties", _parties(self.parties))
        if not isinstance(self.per_party, bool):
            raise ParameterError(message("per_party", "True or False", self.per_party))
        if not isinstance(self.coverage, Coverage):
            raise ParameterError(message("coverage", "a Coverage (the period and campaigns "
                                         "every party counts; Coverage(): every row)",
                                         type(self.coverage).__name__))
        object.__setattr__(self, "deadline", parse_deadline(self.deadline, "deadline"))
        check_int(len(self.parties) * self.max_frequency, "parties",
                  maximum=MAX_PARTIES * 1000)

    # -- derived ---------------------------------------------------------------------------
    @property
    def histograms(self) -> int:
        """1 (the union) plus one per party when ``per_party``."""
        return 1 + (len(self.parties) if self.per_party else 0)

    @property
    def histogram_budget(self) -> tuple[Fraction, Fraction]:
        """``(ε, δ)`` of each histogram: the measurement's divided by :attr:`histograms`
        (exact fractions of the floats given)."""
        m = self.histograms
        return exact_fraction(self.epsilon) / m, exact_fraction(self.delta) / m

    @property
    def deadline_at(self) -> datetime:
        """The deadline as an aware datetime (UTC)."""
        return datetime.fromisoformat(self.deadline)

    @property
    def sampling_rate(self) -> Fraction:
        """The exact probability that a user is sampled."""
        return self.register_space().sampling_rate

    def register_space(self) -> CrossPartyParams:
        """The register space as :class:`~dpfreq.crossparty.CrossPartyParams`, for computing
        a party's register frequencies (which reads only ``R``, the sampling interval,
        ``K``, the hash and the key's fingerprint; it carries this measurement's ε as its
        reach ε and no frequency ε). The parameters' own check builds it too, after checking
        ε: the register space has :class:`~dpfreq.crossparty.CrossPartyParams`'s rules."""
        return CrossPartyParams(
            measurement=self.measurement, registers=self.registers,
            sampling_start=self.sampling_start, sampling_width=self.sampling_width,
            max_frequency=self.max_frequency, epsilon_reach=self.epsilon,
            epsilon_frequency=None,
            hash=self.hash, key_id=self.key_id)

    @public_errors("ShuffleParams")
    def party_index(self, party: str) -> int:
        """The index of ``party`` in :attr:`parties` (ParameterError if it is not one)."""
        try:
            return self.parties.index(party)
        except ValueError:
            raise ParameterError(message("party", "one of the measurement's parties",
                                         party)) from None

    def entities(self) -> tuple[tuple[int, ...], ...]:
        """The parties (indices) of each histogram: the union first, then each party alone
        when ``per_party``."""
        union = tuple(range(len(self.parties)))
        return (union,) + (tuple((i,) for i in union) if self.per_party else ())

    # -- files -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (fractions as ``"s/t"``, parties as a list)."""
        out = super().to_dict()
        out["parties"] = list(self.parties)
        out["coverage"] = self.coverage.to_dict()
        return out

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> Self:
        """The parameters of :meth:`to_dict`'s fields (the coverage read back as a
        :class:`~dpfreq.crossparty.Coverage`)."""
        return cls(**{**fields, "coverage": Coverage.from_dict(fields["coverage"])})

    @property
    def param_id(self) -> str:
        """The SHA-256 digest of the sealed parameters (hex)."""
        return str(json.loads(self.to_json())["sha256"])

