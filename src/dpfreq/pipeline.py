"""One release pipeline: the order in which every central release does its work.

A central release (a profile, an anonymized histogram, window counts, and their grouped
variants) runs the same steps, each given by the system as a :class:`ReleaseSteps`:

1. **validate** — the caller checks every argument into a frozen parameter object and builds
   the steps from it (nothing here sees a raw argument);
2. **plan** — :meth:`ReleaseSteps.plan`: every check on public parameters (memory, noise
   calibration); it reads nothing and draws nothing;
3. **check the budget** — :meth:`ReleaseSteps.charge` names the (ε, δ) and unit;
   the accountant refuses an unaffordable call before the source is read;
4. **read** — :meth:`ReleaseSteps.read` reads the source and makes every check on the data,
   deterministically: it draws nothing (a grouped release checks the rows before any
   bounding, with no key), so whether a call is refused is a function of the data and the
   parameters alone;
5. **spend** — the accountant is charged once, after every check has passed;
6. **draw** — :meth:`ReleaseSteps.draw`, the only step that uses the random source (a grouped
   release draws its secret bounding key here, selects its groups privately and runs its
   bounded query); nothing random runs before the spend;
7. **build** — :meth:`ReleaseSteps.build` turns the noisy values into the result object.

:func:`run_release` runs them in that order; :class:`BudgetGate` is the budget part on its
own, and refuses a spend that was not checked first or is made twice. A step after the spend
must not refuse anything: every check that can fail belongs to ``plan`` or ``read``, so a spent
budget always buys a release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from dpfreq.accounting.losses import PrivacyLoss
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.rng import ResolvedRNG, RNGLike, resolve_rng

__all__ = ["BudgetGate", "Charge", "Reading", "ReleaseSteps", "run_release"]

PlanT = TypeVar("PlanT")
DataT = TypeVar("DataT")
NoisyT = TypeVar("NoisyT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


@dataclass(frozen=True)
class Charge:
    """What a release costs: ``(epsilon, delta)`` at ``unit``, recorded under ``label`` (the
    release function's name); ``loss``, when the release knows it, is its privacy loss as an
    object (:mod:`dpfreq.accounting`), which lets a tight accountant charge less than the
    (ε, δ) it implies."""

    epsilon: float
    delta: float
    unit: str
    label: str
    loss: PrivacyLoss | None = None

    def loss_kwargs(self) -> dict[str, Any]:
        """``{"loss": loss}`` when known (an accountant without ``loss=`` still works)."""
        return {} if self.loss is None else {"loss": self.loss}


@dataclass(frozen=True)
class Reading(Generic[DataT]):
    """The checked data of a release and, when the release records it with the spend, the
    name of the engine that read it (``None``: the accountant's own default)."""

    data: DataT
    source: str | None = None


class ReleaseSteps(Protocol[PlanT, DataT, NoisyT, ResultT_co]):
    """The steps of one release, run in order by :func:`run_release`."""

    def plan(self) -> PlanT:
        """Every check and calibration on public parameters; reads and draws nothing."""
        ...

    def charge(self, plan: PlanT) -> Charge:
        """The (ε, δ) and unit the release spends."""
        ...

    def read(self, plan: PlanT) -> Reading[DataT]:
        """Read the source and check the data (the last step allowed to refuse)."""
        ...

    def draw(self, plan: PlanT, data: DataT, rng: ResolvedRNG) -> NoisyT:
        """Draw the noise (the only step that uses ``rng``)."""
        ...

    def build(self, plan: PlanT, noisy: NoisyT) -> ResultT_co:
        """The result object of the noisy values (post-processing only)."""
        ...


class BudgetGate:
    """The budget steps of one release: :meth:`check` before the source is read, :meth:`spend`
    once after every check has passed.

    Parameters
    ----------
    accountant : BudgetAccountant or None
        The checked ``accountant=`` argument (``None``: nothing is checked or recorded).
    charge : Charge
        What the release costs.

    Examples
    --------
    >>> from dpfreq.budget import Accountant, PrivacyBudget
    >>> acct = Accountant(PrivacyBudget(1.0))
    >>> gate = BudgetGate(acct, Charge(0.5, 0.0, "item", "release_profile"))
    >>> gate.check()
    >>> gate.spend()
    >>> acct.spent
    PrivacyBudget(epsilon=0.5, delta=0.0)
    """

    def __init__(self, accountant: BudgetAccountant | None, charge: Charge) -> None:
        self.accountant = accountant
        self.charge = charge
        self._state = "new"

    def check(self) -> None:
        """Refuse (BudgetExceededError) a call the accountant cannot afford; spends nothing."""
        if self._state != "new":
            raise RuntimeError(f"the budget of {self.charge.label} was already checked")
        c = self.charge
        if self.accountant is not None:
            self.accountant.check(c.epsilon, c.delta, unit=c.unit, **c.loss_kwargs())
        self._state = "checked"

    def spend(self, source: str | None = None) -> None:
        """Charge the accountant once (``source``: the engine, when the release records it)."""
        if self._state != "checked":
            raise RuntimeError(f"the budget of {self.charge.label} must be checked once before "
                               "it is spent once")
        c = self.charge
        if self.accountant is not None:
            self.accountant.spend(c.epsilon, c.delta, label=c.label, unit=c.unit,
                                  source=source, **c.loss_kwargs())
        self._state = "spent"


def run_release(steps: ReleaseSteps[PlanT, DataT, NoisyT, ResultT_co], *,
                accountant: BudgetAccountant | None,
                rng: RNGLike | ResolvedRNG) -> ResultT_co:
    """Run a release's steps in the pipeline's order (see the module docstring).

    ``accountant`` and ``rng`` are checked first (a ParameterError names the public call; an ``rng``
    already resolved by the caller, for steps that hold it, is used as is); nothing is spent
    before :meth:`ReleaseSteps.read` has returned, and the noise is drawn after the spend.

    Examples
    --------
    >>> from dpfreq.budget import Accountant, PrivacyBudget
    >>> class Count:
    ...     def plan(self): return None
    ...     def charge(self, plan): return Charge(1.0, 0.0, "event", "count")
    ...     def read(self, plan): return Reading(3)
    ...     def draw(self, plan, data, rng): return data + int(rng.generator.integers(0, 1))
    ...     def build(self, plan, noisy): return {"count": noisy}
    >>> acct = Accountant(PrivacyBudget(1.0))
    >>> run_release(Count(), accountant=acct, rng=0), acct.spent
    ({'count': 3}, PrivacyBudget(epsilon=1.0, delta=0.0))
    """
    acct = check_accountant(accountant)
    resolved = rng if isinstance(rng, ResolvedRNG) else resolve_rng(rng)
    plan = steps.plan()
    gate = BudgetGate(acct, steps.charge(plan))
    gate.check()
    reading = steps.read(plan)
    gate.spend(reading.source)
    noisy = steps.draw(plan, reading.data, resolved)
    return steps.build(plan, noisy)
