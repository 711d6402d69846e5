"""The plan of a measurement: which parties are measured, and which histograms.

Worker 0 fixes the plan once the deadline has passed (or every party has uploaded to both
workers): a party is **included** when both workers hold a share of the same upload (the same
share id); any other party is **missing**, with the reason — no share by the deadline, or its
two shares came from different uploads or reached one worker only. The measured **entities**
are the union of the included parties and, with ``per_party``, each included party alone;
entity ``e`` holds register values ``0..V_e`` with ``V_e = K·(its number of parties)``.
The plan is public (party names and random share ids) and goes to the other worker and, in
each output's header, to the aggregator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpfreq._docstrings import fill_doc
from dpfreq.crossparty.shuffle.params import EXAMPLE_TWO_PARTIES, ShuffleParams
from dpfreq.errors import DataError

__all__ = ["MISSING_REASONS", "Plan", "make_plan"]

#: Why a declared party is not measured.
MISSING_REASONS = {
    "none": "no share reached either worker by the deadline",
    "one": "only one worker received a share by the deadline",
    "mismatch": "the two workers hold shares of different uploads",
}


@dataclass(frozen=True)
class Plan:
    """The parties and histograms of one measurement.

    Attributes
    ----------
    included : tuple of (str, str)
        ``(party, share id)`` of each included party, in the parameters' order.
    missing : tuple of (str, str)
        ``(party, reason key of MISSING_REASONS)`` of each declared party not measured.
    entities : tuple of (int, tuple of int)
        ``(entity number, indices of its included parties)`` of each measured histogram: 0
        is the union; ``i + 1`` is party ``i`` alone.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web", "app"],
    ...     per_party=True,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> plan = make_plan(params, {"tv": "a" * 32, "app": "b" * 32}, {"tv": "a" * 32})
    >>> plan.entities, plan.missing
    (((0, (0,)), (1, (0,))), (('web', 'none'), ('app', 'one')))
    >>> plan.values(params)
    [3, 3]
    """

    included: tuple[tuple[str, str], ...]
    missing: tuple[tuple[str, str], ...]
    entities: tuple[tuple[int, tuple[int, ...]], ...]

    def values(self, params: ShuffleParams) -> list[int]:
        """``V_e``, the largest register value of each measured entity."""
        return [params.max_frequency * len(parties) for _, parties in self.entities]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"included": [list(p) for p in self.included],
                "missing": [list(p) for p in self.missing],
                "entities": [[e, list(ps)] for e, ps in self.entities]}

    @classmethod
    def from_dict(cls, data: Any, params: ShuffleParams, *, label: str = "the plan") -> Plan:
        """Read :meth:`to_dict`, checked against ``params`` (DataError when malformed or
        inconsistent: it must be the plan :func:`make_plan` makes for its own parties)."""
        try:
            included = {str(p): str(s) for p, s in data["included"]}
            missing = tuple((str(p), str(r)) for p, r in data["missing"])
            entities = tuple((int(e), tuple(int(i) for i in ps)) for e, ps in data["entities"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{label} is malformed.") from None
        expected = make_plan(params, included, included)
        if (expected.included != tuple(included.items()) or expected.entities != entities
                or {p for p, _ in missing} != {p for p, _ in expected.missing}
                or any(r not in MISSING_REASONS for _, r in missing)):
            raise DataError(f"{label} does not fit the measurement's parameters.")
        return cls(included=expected.included, missing=missing, entities=entities)


@fill_doc(two_parties=EXAMPLE_TWO_PARTIES)
def make_plan(params: ShuffleParams, first: Mapping[str, str], second: Mapping[str, str]
              ) -> Plan:
    """The plan from the shares each worker holds (``party -> share id``; worker 0's first).

    Examples
    --------
    [[two_parties]]
    >>> make_plan(params, {"tv": "1" * 32, "web": "2" * 32},
    ...           {"tv": "1" * 32, "web": "3" * 32}).missing
    (('web', 'mismatch'),)
    """
    included: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    for party in params.parties:
        a, b = first.get(party), second.get(party)
        if a is not None and a == b:
            included.append((party, a))
        else:
            reason = "none" if a is None and b is None else (
                "one" if a is None or b is None else "mismatch")
            missing.append((party, reason))
    names = {p for p, _ in included}
    entities = []
    for e, parties in enumerate(params.entities()):
        kept = tuple(i for i in parties if params.parties[i] in names)
        if kept:
            entities.append((e, kept))
    return Plan(included=tuple(included), missing=tuple(missing), entities=tuple(entities))
