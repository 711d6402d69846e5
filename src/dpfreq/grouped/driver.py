"""One driver for every grouped release: the steps they share, in one order, over a small
adapter per system.

A grouped release (a profile, an anonymized histogram or window counts per group) is the
system's release run for every group, spent once. What differs between systems is small — what
the read checks, which aggregate the engine computes, how one group is released and what holds
for all groups at once — and lives in the system's :class:`GroupedAdapter`. Everything else is
here, run on :func:`dpfreq.pipeline.run_release`:

1. **plan** — :meth:`GroupedAdapter.plan`: the accounting across groups and the selection's
   plan, from public parameters only (may refuse; nothing is read or drawn);
2. **check the budget** — the call's ``(ε, δ)`` at its unit (:class:`GroupedCall`);
3. **read** — :meth:`GroupedAdapter.read`: every check of the data, on the rows before any
   bounding, with no key and no draw, so whether a call is refused is a function of the data
   and the parameters alone;
4. **spend** — once, after every check has passed;
5. **draw**, the only step that uses the random source, nothing of which may refuse: the
   release's secret (:class:`GroupSecret`, whose sub-key ranks each item's groups in the
   engine's bounding) when the system keys anything; without a public list, the private
   partition selection (:func:`dpfreq.grouped.selection.select_groups`) on what
   :meth:`GroupedAdapter.sizes` counts for the data's groups — the truncated geometric on
   each group's bounded item (or row) count, or the weighted set union
   (:mod:`dpfreq.grouped.set_union`) on its weight, the items' kept groups counted under the
   same bounding key; the plan chose which from ``selection=`` and ``selection_epsilon=``;
   the bounded aggregate of the released groups (:meth:`GroupedAdapter.aggregate`); every
   group's release (:meth:`GroupedAdapter.release`); and last, with ``capping_epsilon``, the
   dropped-fraction estimate (:mod:`dpfreq.grouped.dropped`) on the items' distinct groups
   among the released ones (:meth:`GroupedAdapter.distinct_groups`);
6. **build** — :meth:`GroupedAdapter.result`: the container of the groups' releases with its
   simultaneous statement (post-processing only).

**Privacy** (the argument each system's docstring instantiates). Fix the secret. The bounding
keeps for every item at most ``m`` of the groups it ranks over, chosen from the secret and that
item's own rows, so a neighbour (one item with all its rows at ``unit="item"``, one row at
``unit="event"`` with ``m = 1``) changes the bounded data of at most ``m`` groups, and the
set-union weights by one item's share (every other item's kept groups depend on its own rows
only). The selection is ``(ε_s, δ_s)``-DP on those bounded counts; for every fixed selected
set the releases of its groups are ``(ε_r, δ_r)``-DP by the system's accounting across groups
(:mod:`dpfreq.grouped.accounting`, or the window release's own); by adaptive sequential
composition the call is ``(ε_s + ε_r, δ_s + δ_r) = (ε, δ)``-DP for every secret, hence for the
secret drawn at random. With a public list there is no selection and ``(ε_r, δ_r) = (ε, δ)``.
With ``capping_epsilon = ε_c`` the plan accounts ``ε − ε_c`` (rounded down) as above and the
dropped fraction is ``ε_c``-DP for every fixed released set (:mod:`dpfreq.grouped.dropped`):
by basic composition the call stays ``(ε, δ)``-DP.

**max_groups_per_item="auto"** (:class:`AutoBoundSteps`): the plan step plans the adapter at
every candidate ``m = 1..M`` (``M`` at most the number of listed groups;
:mod:`dpfreq.grouped.bound_choice`; a candidate that cannot be planned is left out, public
parameters only, and the call is refused when none can); after the
spend the first draw is the noisy histogram of groups per item (``ε_c``-DP), ``m`` is chosen
from it (post-processing), and the steps above run at that ``m`` and ``ε − ε_c`` with the
dropped fraction computed from the same histogram: ``(ε, δ)`` by adaptive sequential
composition.
Group names reach the output only from the public list or the selection.

A new grouped statistic is its system's release of one group plus one adapter
(``docs/contributing.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpfreq.budget import BudgetAccountant
from dpfreq.errors import ParameterError
from dpfreq.grouped.bound_choice import (
    BoundChoice,
    candidate_bound,
    choose_bound,
    groups_histogram,
    measure_histogram,
    predicted_errors,
)
from dpfreq.grouped.dropped import (
    CappingSums,
    DroppedFraction,
    capping_bound,
    capping_sums,
    dropped_from_histogram,
    measure_dropped,
)
from dpfreq.grouped.selection import AnySelection, select_groups
from dpfreq.pipeline import Charge, Reading, run_release
from dpfreq.rng import ResolvedRNG, derive_key, new_secret_key

__all__ = ["AutoBoundSteps", "Bounding", "Candidates", "Drawn", "GroupSecret", "GroupedAdapter",
           "GroupedCall", "GroupedSteps", "run_grouped", "with_bound_choice", "with_dropped"]

PlanT = TypeVar("PlanT")
DataT = TypeVar("DataT")
AggT = TypeVar("AggT")
OutT = TypeVar("OutT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


@dataclass(frozen=True)
class GroupedCall:
    """The checked public arguments every grouped release has.

    Attributes
    ----------
    charge : dpfreq.pipeline.Charge
        What the whole call spends, ``(ε, δ)`` at its unit of privacy (``δ`` 0 when none was
        given), recorded under the public function's name (``charge.label``, also the name in
        error messages).
    group : str
        The group column.
    groups : tuple of str or None
        The public list of groups, or None: the data's groups, selected privately.
    max_groups_per_item : int or None
        ``m``, the bound on the groups one item keeps; None when nothing is bounded (one row
        lies in one group).
    capping_epsilon : float or None
        ``ε_c``, the share of ``charge.epsilon`` that measures the fraction of (item, group)
        pairs the cap dropped (:mod:`dpfreq.grouped.dropped`; the adapter's plan accounts the
        rest); None: not measured. With ``auto_bound`` it measures the histogram ``m`` is
        chosen from (:mod:`dpfreq.grouped.bound_choice`).
    confidence : float
        The confidence of that measurement's interval (the release's).
    auto_bound : bool
        ``max_groups_per_item="auto"``: ``m`` is chosen privately after the spend
        (:class:`AutoBoundSteps`; the adapter's :meth:`~GroupedAdapter.with_bound` gives the
        adapter at each candidate).
    """

    charge: Charge
    group: str
    groups: tuple[str, ...] | None
    max_groups_per_item: int | None
    capping_epsilon: float | None = None
    confidence: float = 0.95
    auto_bound: bool = False


@dataclass(frozen=True)
class GroupSecret:
    """The secret of one grouped release, drawn after the spend: from the seeded generator when
    the release is seeded (reproducible, not for production), else from the operating system.

    Every key of the release derives from it (:func:`dpfreq.rng.derive_key`): the bounding's
    rank key, and whatever the system keys per group.

    Examples
    --------
    >>> s = GroupSecret(bytes(32))
    >>> len(s.bounding_key), s.bounding_key == s.derive("group-bounding")
    (32, True)
    """

    master: bytes

    @classmethod
    def draw(cls, rng: ResolvedRNG) -> GroupSecret:
        """A fresh secret from the release's random source (secure unless seeded)."""
        return cls(rng.generator.bytes(32) if rng.seeded else new_secret_key())

    @property
    def bounding_key(self) -> bytes:
        """The key of the engine's keyed rank of (item, group)."""
        return derive_key(self.master, "group-bounding")

    def derive(self, *parts: str | int | bytes) -> bytes:
        """The sub-key of what ``parts`` names."""
        return derive_key(self.master, *parts)


@dataclass(frozen=True)
class Bounding:
    """What the engine bounds: each item keeps at most ``max_groups_per_item`` of the groups
    ``groups`` (None: every group of the data), ranked under ``key``; ``max_groups_per_item``
    None bounds nothing."""

    groups: tuple[str, ...] | None
    max_groups_per_item: int | None
    key: bytes | None


@dataclass(frozen=True)
class Candidates:
    """The data's groups and what the selection thresholds for each, after the bounding
    (private: only the selected names are published).

    Attributes
    ----------
    names : sequence of str
        Every group of the bounded data.
    sizes : numpy.ndarray of int64
        Each group's number of units (items, or rows at ``unit="event"``) after the bounding.
    aggregate : object
        What the engine returned, for :meth:`GroupedAdapter.aggregate` to reuse (or None).
    """

    names: Sequence[str]
    sizes: NDArray[np.int64]
    aggregate: Any = None


@dataclass(frozen=True)
class Drawn(Generic[DataT, OutT]):
    """What the draw step hands to :meth:`GroupedAdapter.result`: the checked data, the
    released names (the public list, or the selected groups in name order), the groups'
    releases (the adapter's :meth:`~GroupedAdapter.release`), the secret (None when the
    system keys nothing), whether the random source was seeded, and the dropped-fraction
    estimate (None unless ``capping_epsilon`` was given)."""

    data: DataT
    names: tuple[str, ...]
    outs: OutT
    secret: GroupSecret | None
    seeded: bool
    dropped: DroppedFraction | None = None


class GroupedAdapter(Protocol[PlanT, DataT, AggT, OutT, ResultT_co]):
    """One system's part of a grouped release (see the module docstring for the order).

    Attributes
    ----------
    call : GroupedCall
        The checked public arguments.
    keyed : bool
        Whether the release draws a :class:`GroupSecret` (always when it bounds; a window
        release also keys each group's noise).
    """

    @property
    def call(self) -> GroupedCall:
        """The checked public arguments."""
        ...

    @property
    def keyed(self) -> bool:
        """Whether the release draws a secret."""
        ...

    def plan(self) -> PlanT:
        """The accounting across groups and every calibration, from public parameters only."""
        ...

    def selection(self, plan: PlanT) -> AnySelection | None:
        """The selection's plan (None with a public list)."""
        ...

    def read(self, plan: PlanT) -> Reading[DataT]:
        """Read the source and check the data, with no key and no draw (the last refusal)."""
        ...

    def sizes(self, plan: PlanT, data: DataT, bounding: Bounding,
              selection: AnySelection) -> Candidates:
        """What ``selection`` thresholds for every group of the bounded data (its item or row
        count), counted after the spend under ``bounding.key``."""
        ...

    def aggregate(self, plan: PlanT, data: DataT, bounding: Bounding,
                  counted: Candidates | None) -> AggT:
        """The exact bounded aggregate of the released groups ``bounding.groups`` (``counted``:
        what :meth:`sizes` returned, under a selection)."""
        ...

    def distinct_groups(self, plan: PlanT, data: DataT, names: tuple[str, ...] | None) -> Any:
        """The engine's count-of-counts of each item's number of distinct groups among
        ``names`` (None: every group of the data; ``per_item="distinct_groups"``, unbounded),
        for the dropped fraction and the histogram of ``max_groups_per_item="auto"``."""
        ...

    def with_bound(self, m: int) -> GroupedAdapter[PlanT, DataT, AggT, OutT, ResultT_co]:
        """The same adapter at the fixed bound ``m`` (for ``max_groups_per_item="auto"``)."""
        ...

    def noise_variance(self, plan: PlanT) -> float:
        """One group's predicted noise variance of its reach (its items) under ``plan``
        (public parameters only; for ``max_groups_per_item="auto"``)."""
        ...

    def release(self, plan: PlanT, aggregate: AggT, names: tuple[str, ...],
                secret: GroupSecret | None, rng: ResolvedRNG) -> OutT:
        """Every released group's noisy measurement (the only hook given the random source)."""
        ...

    def result(self, plan: PlanT, drawn: Drawn[DataT, OutT]) -> ResultT_co:
        """The grouped release and its simultaneous statement (post-processing only)."""
        ...


@dataclass(frozen=True)
class GroupedSteps(Generic[PlanT, DataT, AggT, OutT, ResultT_co]):
    """The pipeline steps (:mod:`dpfreq.pipeline`) of one grouped release over an adapter."""

    adapter: GroupedAdapter[PlanT, DataT, AggT, OutT, ResultT_co]

    def plan(self) -> PlanT:
        return self.adapter.plan()

    def charge(self, plan: PlanT) -> Charge:
        return self.adapter.call.charge

    def read(self, plan: PlanT) -> Reading[DataT]:
        return self.adapter.read(plan)

    def draw(self, plan: PlanT, data: DataT, rng: ResolvedRNG) -> Drawn[DataT, OutT]:
        """After the spend: the secret, the selection, the bounded aggregate, the releases and
        last, with ``capping_epsilon``, the dropped fraction."""
        a, call = self.adapter, self.adapter.call
        m = call.max_groups_per_item
        drawn = draw_releases(a, plan, data, rng)
        if call.capping_epsilon is None or m is None:
            return drawn
        names = drawn.names  # the last draw
        sums = (capping_sums(a.distinct_groups(plan, data, names), m, capping_bound(m))
                if names else CappingSums(0, 0))
        return dataclasses.replace(drawn, dropped=measure_dropped(
            sums, epsilon=call.capping_epsilon, m=m, confidence=call.confidence,
            generator=rng.generator))

    def build(self, plan: PlanT, noisy: Drawn[DataT, OutT]) -> ResultT_co:
        result = self.adapter.result(plan, noisy)
        if noisy.dropped is None:
            return result
        out: ResultT_co = with_dropped(result, noisy.dropped)
        return out


def draw_releases(a: GroupedAdapter[PlanT, DataT, AggT, OutT, Any], plan: PlanT, data: DataT,
                  rng: ResolvedRNG) -> Drawn[DataT, OutT]:
    """The secret, the selection, the bounded aggregate and the releases at ``a``'s bound."""
    call = a.call
    m = call.max_groups_per_item
    secret = GroupSecret.draw(rng) if a.keyed else None
    key = None if secret is None or m is None else secret.bounding_key
    names, counted = call.groups, None
    selection = a.selection(plan)
    if selection is not None:
        counted = a.sizes(plan, data, Bounding(None, m, key), selection)
        sizes = np.asarray(counted.sizes, dtype=np.int64)
        present = sizes >= 1
        names = select_groups([g for g, k in zip(counted.names, present, strict=True) if k],
                              sizes[present], selection, rng.generator)
    assert names is not None
    aggregate = a.aggregate(plan, data, Bounding(names, m, key), counted)
    outs = a.release(plan, aggregate, names, secret, rng)
    return Drawn(data, names, outs, secret, rng.seeded)


@dataclass(frozen=True)
class _Candidates(Generic[PlanT]):
    """The plan of every candidate bound of ``max_groups_per_item="auto"`` (public)."""

    plans: dict[int, PlanT]


@dataclass(frozen=True)
class _Chosen(Generic[DataT, OutT]):
    """The draw of an ``"auto"`` call: the chosen bound, how, and the draw at it."""

    choice: BoundChoice
    drawn: Drawn[DataT, OutT]


@dataclass(frozen=True)
class AutoBoundSteps(Generic[PlanT, DataT, AggT, OutT, ResultT_co]):
    """The pipeline steps of a grouped release with ``max_groups_per_item="auto"`` (module
    docstring; :mod:`dpfreq.grouped.bound_choice`)."""

    adapter: GroupedAdapter[PlanT, DataT, AggT, OutT, ResultT_co]

    def plan(self) -> _Candidates[PlanT]:
        """Every candidate's plan; the call is refused (the last candidate's refusal) when no
        candidate can be planned. Public parameters only, so the candidates are too."""
        plans: dict[int, PlanT] = {}
        refusal: ParameterError | None = None
        for m in range(1, candidate_bound(self.adapter.call.groups) + 1):
            try:
                plans[m] = self.adapter.with_bound(m).plan()
            except ParameterError as exc:
                refusal = exc
        if not plans:
            assert refusal is not None
            raise refusal
        return _Candidates(plans)

    def charge(self, plan: _Candidates[PlanT]) -> Charge:
        return self.adapter.call.charge

    def read(self, plan: _Candidates[PlanT]) -> Reading[DataT]:
        m = min(plan.plans)
        return self.adapter.with_bound(m).read(plan.plans[m])

    def draw(self, plan: _Candidates[PlanT], data: DataT,
             rng: ResolvedRNG) -> _Chosen[DataT, OutT]:
        """After the spend: the noisy histogram (the first draw), the choice of ``m`` from it,
        then the fixed-``m`` draw and the dropped fraction from the same histogram."""
        a, call = self.adapter, self.adapter.call
        assert call.capping_epsilon is not None
        first = min(plan.plans)
        hist = groups_histogram(a.distinct_groups(plan.plans[first], data, call.groups),
                                candidate_bound(call.groups))
        noisy, gamma = measure_histogram(hist, call.capping_epsilon, rng.generator)
        bound = {m: a.with_bound(m) for m in plan.plans}
        variances = {m: bound[m].noise_variance(p) for m, p in plan.plans.items()}
        n_groups = None if call.groups is None else len(call.groups)
        errors = predicted_errors(noisy, gamma, variances, n_groups)
        m = choose_bound(errors)
        drawn = draw_releases(bound[m], plan.plans[m], data, rng)
        dropped = dropped_from_histogram(noisy, gamma, epsilon=call.capping_epsilon, m=m,
                                         confidence=call.confidence)
        choice = BoundChoice(m, call.capping_epsilon, float(gamma),
                             tuple(int(x) for x in noisy), errors, n_groups)
        return _Chosen(choice, dataclasses.replace(drawn, dropped=dropped))

    def build(self, plan: _Candidates[PlanT], noisy: _Chosen[DataT, OutT]) -> ResultT_co:
        m = noisy.choice.chosen
        assert noisy.drawn.dropped is not None
        result = self.adapter.with_bound(m).result(plan.plans[m], noisy.drawn)
        out: ResultT_co = with_bound_choice(with_dropped(result, noisy.drawn.dropped),
                                            noisy.choice)
        return out


def with_dropped(result: Any, dropped: DroppedFraction) -> Any:
    """A grouped release (a frozen dataclass) carrying its dropped-fraction estimate, its
    ``mechanism_params["capping"]`` saying how ε was shared."""
    return dataclasses.replace(result, dropped_fraction=dropped, mechanism_params={
        **result.mechanism_params, "capping": dropped.split})


def with_bound_choice(result: Any, choice: BoundChoice) -> Any:
    """A grouped release carrying how ``max_groups_per_item="auto"`` chose its bound
    (``mechanism_params["bound_choice"]``: ``m``, ``ε_c``, the noisy histogram, the predicted
    errors and why)."""
    return dataclasses.replace(result, mechanism_params={
        **result.mechanism_params, "bound_choice": choice.to_dict()})


def run_grouped(adapter: GroupedAdapter[PlanT, DataT, AggT, OutT, ResultT_co], *,
                accountant: BudgetAccountant | None, rng: Any) -> ResultT_co:
    """Run one grouped release (module docstring); ``rng`` as the public function took it, or
    already resolved.

    Examples
    --------
    A toy grouped statistic: each group's number of rows plus exact discrete Laplace noise at
    ``unit="event"`` (one row lies in one group: parallel composition, the whole ε per group).

    >>> from dpfreq.noise import sample_discrete_laplace
    >>> class RowCounts:
    ...     keyed = False
    ...     def __init__(self, rows, groups):
    ...         self.rows = rows
    ...         charge = Charge(1.0, 0.0, "event", "row_counts")
    ...         self.call = GroupedCall(charge, "g", groups, None)
    ...     def plan(self): return None
    ...     def selection(self, plan): return None
    ...     def read(self, plan): return Reading(self.rows)
    ...     def aggregate(self, plan, rows, bounding, counted):
    ...         return [rows.count(g) for g in bounding.groups]
    ...     def release(self, plan, counts, names, secret, rng):
    ...         z = sample_discrete_laplace(1, len(counts), rng=rng.generator)
    ...         return {g: int(c + e) for g, c, e in zip(names, counts, z)}
    ...     def result(self, plan, drawn): return drawn.outs
    >>> out = run_grouped(RowCounts(["a", "b", "a"], ("a", "b", "c")), accountant=None, rng=0)
    >>> sorted(out)
    ['a', 'b', 'c']
    """
    steps: Any = (AutoBoundSteps(adapter) if adapter.call.auto_bound
                  else GroupedSteps(adapter))
    return run_release(steps, accountant=accountant, rng=rng)
