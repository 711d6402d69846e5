"""A saved stream's counter, rebuilt from its spec instead of planned again.

Planning compares every layout of every method for the horizon (for a horizon-free stream, for
every epoch it reaches: seconds from epoch 4 on); the choice depends on public parameters only,
so a stream saves it (:meth:`Counter.spec`, :meth:`EpochCounter.spec`: the layout's defining
parameters and the kind of node noise) and rebuilds the counter from it. The node law is
calibrated again from the layout's exact sensitivity at the structure's budget, as when it was
chosen: a spec names a layout, never a noise scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpfreq.stream.mechanisms.candidates import counter_from_spec
from dpfreq.stream.mechanisms.epochs import EpochCounter
from dpfreq.stream.mechanisms.law import Budget

__all__ = ["rebuild_counter"]


def rebuild_counter(spec: Mapping[str, Any], unit: str, budget: Budget) -> Any:
    """The counter of ``spec`` at ``unit`` and ``budget``; ValueError for a spec that does not
    name a layout of this dpfreq or does not calibrate at the budget."""
    if spec.get("layout") != "epochs":
        return counter_from_spec(spec, unit, budget)
    epochs = spec.get("epochs")
    if not isinstance(epochs, list) or not epochs:
        raise ValueError("an epochs spec lists its epochs' counters")
    known = tuple(counter_from_spec(s, unit, budget, epoch=True) for s in epochs)
    return EpochCounter(unit, budget, tuple(spec.get("methods") or ()), known)
