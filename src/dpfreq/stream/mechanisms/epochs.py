"""A horizon-free counter: geometric epochs, each a bounded counter at the whole budget.

A stream declared without a horizon cuts time into **epochs**: epoch ``j`` holds the
``L_j = 16·4^j`` periods after the ones before it (16, 64, 256, 1024, … periods; epoch ``j``
starts at period ``s_j = 1 + 16·(4^j − 1)/3``). Each epoch runs a bounded counter over its own
periods (the best one for ``L_j``, chosen as ``auto`` chooses: :mod:`~dpfreq.stream.mechanisms.
candidates`), and the answer at period ``t`` of epoch ``J`` is

    ``Σ_{j<J} (answer of epoch j at its last period) + answer of epoch J at t − s_J + 1``.

**Privacy: parallel composition.** An item's point (the period of its k-th occurrence) lies in
one period, hence in one epoch: at ``unit="item"`` a neighbour changes one epoch by one point,
so every epoch gets the structure's **whole** budget. At ``"event"`` and ``"item_replace"`` a
point may move from one epoch to another, changing each by one point: every epoch is calibrated
at ``max(ℓ_event, 2·ℓ_item)`` of its layout, so a move inside an epoch costs at most the budget
and a move across two costs at most half of it in each. Epoch ``j`` draws its node noise under
its own structure name (tree index ``j``): independent keyed sub-keys.

**Error as a function of t.** The noise of the answer at ``t`` in epoch ``J`` is the sum of the
independent noises of ``J`` closed epochs' totals and the current epoch's answer:

    ``Var(t) = Σ_{j<J} V_j(L_j) + V_J(t − s_J + 1)``,

``J = ⌊log_4(3(t − 1)/16 + 1)⌋``, with ``V_j`` the exact variance of epoch ``j``'s counter —
``O(log_B³ t / ε²)`` under pure accounting with trees (``J = O(log t)`` totals of
``O(log_B² L_j)`` each), ``O(log³ t / ρ)`` under zCDP. :meth:`EpochCounter.variance` computes
it exactly; the intervals use the certified law of the sum
(:func:`~dpfreq.stream.mechanisms.counter.sum_halfwidth`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.stream.mechanisms.candidates import BOUNDED_METHODS, best_counters
from dpfreq.stream.mechanisms.counter import Counter, Part
from dpfreq.stream.mechanisms.law import Budget, NodeLaw

__all__ = ["EPOCH_GROWTH", "FIRST_EPOCH", "EpochCounter", "epoch_of"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: periods of the first epoch, and the factor by which each epoch is longer than the last
FIRST_EPOCH = 16
EPOCH_GROWTH = 4


def epoch_start(j: int) -> int:
    """First period of epoch ``j`` (1-based)."""
    return 1 + FIRST_EPOCH * (EPOCH_GROWTH**j - 1) // (EPOCH_GROWTH - 1)


def epoch_of(t: int) -> int:
    """The epoch holding period ``t`` (exact integer arithmetic)."""
    j = 0
    while epoch_start(j + 1) <= t:
        j += 1
    return j


def epoch_length(j: int) -> int:
    return FIRST_EPOCH * EPOCH_GROWTH**j


class EpochCounter:
    """The horizon-free counter of the module docstring (``horizon`` is None).

    Parameters
    ----------
    unit : str
        The unit of privacy (sets each epoch's sensitivity).
    budget : Budget
        The structure's budget; every epoch gets all of it (parallel composition).
    methods : tuple of str
        The bounded methods an epoch may use (``auto``: all of them).
    known : sequence of Counter, optional
        The counters of epochs ``0, 1, …`` chosen before (a saved stream's:
        :meth:`spec`); later epochs are chosen when first needed. Choosing an epoch's counter
        compares every layout for its length, which grows fourfold per epoch (seconds from
        epoch 4 on): a stream saves the ones it chose and never chooses one twice.
    """

    name = "epochs"
    horizon = None

    def __init__(self, unit: str, budget: Budget, methods: tuple[str, ...] = BOUNDED_METHODS,
                 known: tuple[Counter, ...] = ()) -> None:
        self.unit, self.budget, self.methods = unit, budget, methods
        self._epochs: dict[int, Counter] = dict(enumerate(known))
        self.epoch(0)  # the first epoch must calibrate (else the budget is too small)

    def spec(self) -> dict[str, Any]:
        """The methods and the counter of every epoch chosen so far: what rebuilds this
        counter without choosing them again (public)."""
        return {"layout": "epochs", "methods": list(self.methods),
                "epochs": [self._epochs[j].spec() for j in range(len(self._epochs))]}

    def epoch(self, j: int) -> Counter:
        """The bounded counter of epoch ``j`` (public; the best for its length, chosen once:
        epochs are chosen in order, so the known ones are ``0 … j``)."""
        for i in range(len(self._epochs), j):  # the epochs before j first: specs stay in order
            self.epoch(i)
        if j not in self._epochs:
            found = best_counters(epoch_length(j), self.unit, self.budget, self.methods, True)
            if not found:
                raise ValueError("no method calibrates at this budget")
            self._epochs[j] = min(found, key=lambda c: c[2])[1]
        return self._epochs[j]

    @property
    def law(self) -> NodeLaw:
        """The node law of the first epoch (each epoch records its own)."""
        return self.epoch(0).law

    def _offsets(self, j: int) -> int:
        """Rows measured before epoch ``j``."""
        return sum(self.epoch(i).rows_through(epoch_length(i)) for i in range(j))

    def rows_through(self, t: int) -> int:
        j = epoch_of(t)
        return self._offsets(j) + self.epoch(j).rows_through(t - epoch_start(j) + 1)

    def rows(self, t: int) -> list[tuple[int, NodeLaw, IntArray]]:
        j = epoch_of(t)
        [(_, law, ids)] = self.epoch(j).rows(t - epoch_start(j) + 1)
        return [(j, law, ids)]

    def row_values(self, prefix: IntArray, t: int) -> IntArray:
        j = epoch_of(t)
        s = epoch_start(j)
        local = prefix[:, s - 1:] - prefix[:, s - 1:s]
        return self.epoch(j).row_values(local, t - s + 1)

    def _split(self, noisy: IntArray, j: int) -> IntArray:
        lo = self._offsets(j)
        out: IntArray = noisy[:, lo:lo + self.epoch(j).rows_through(epoch_length(j))]
        return out

    def answer(self, noisy: IntArray, t: int) -> NDArray[Any]:
        """Closed epochs' last answers plus the current epoch's answer (measurement only)."""
        j = epoch_of(t)
        total: NDArray[Any] = self.epoch(j).answer(self._split(noisy, j), t - epoch_start(j) + 1)
        for i in range(j):
            total = total + self.epoch(i).answer(self._split(noisy, i), epoch_length(i))
        return total

    def allowance(self, noisy: IntArray, t: int) -> FloatArray:
        j = epoch_of(t)
        out = self.epoch(j).allowance(self._split(noisy, j), t - epoch_start(j) + 1)
        for i in range(j):
            out = out + self.epoch(i).allowance(self._split(noisy, i), epoch_length(i))
        return out

    def parts(self, t: int) -> list[Part]:
        j = epoch_of(t)
        out = [p for i in range(j) for p in self.epoch(i).parts(epoch_length(i))]
        return out + self.epoch(j).parts(t - epoch_start(j) + 1)

    def variance(self, t: int) -> float:
        """Exact variance of the answer's noise at ``t`` (module docstring)."""
        return sum(p.variance for p in self.parts(t))

    def mean_variance(self, horizon: int) -> float:
        return float(np.mean([self.variance(t) for t in range(1, horizon + 1)]))

    def describe(self) -> str:
        first = self.epoch(0).describe()
        return (f"geometric epochs of {FIRST_EPOCH}·{EPOCH_GROWTH}^j periods, each at the whole "
                f"budget (parallel composition); first epoch: {first}")

    def record(self) -> dict[str, Any]:
        return {"layout": "geometric epochs", "first_epoch": FIRST_EPOCH,
                "growth": EPOCH_GROWTH, "epochs": "each the best bounded counter for its "
                "length at the whole budget", "first_epochs": [
                    {"periods": epoch_length(j), **self.epoch(j).record()} for j in range(3)]}
