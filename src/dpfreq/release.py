"""The common base of every release (DESIGN.md §7).

A release carries the estimate, the privacy parameters spent, the mechanism and its parameters,
whether the random source was seeded (not for production), and an error statement. Subclasses
(one per system) are frozen, keyword-only dataclasses that add their own fields and a ``plot``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["ErrorStatement", "Release", "to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """Convert numpy arrays/scalars, fractions, dataclasses and mappings to JSON-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.name.startswith("_")}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, Fraction):
        return f"{obj.numerator}/{obj.denominator}"
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return str(obj)
        return obj
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


@dataclass(frozen=True, kw_only=True)
class ErrorStatement:
    """How far the estimate may be from the truth.

    Attributes
    ----------
    kind : str
        ``"bound"`` (a high-probability bound from a theorem), ``"ci"`` (a confidence interval
        from the exact noise variance), ``"sd"`` (standard deviation only), or ``"scale"`` (the
        expected size of the added noise in the stated metric, where the theorem has no explicit
        constants — an order of magnitude, not a guarantee).
    confidence : float or None
        Probability with which the bound / interval holds (e.g. ``1 - 2η``); ``None`` for "sd"
        and "scale".
    value : float or numpy.ndarray
        The bound (or interval half-width, or standard deviation), per estimate or overall.
    description : str
        One sentence a person can read: which norm or query, which theorem, simultaneous or per
        query.
    """

    kind: str
    confidence: float | None
    value: Any
    description: str


@dataclass(frozen=True, kw_only=True)
class Release:
    """Base class of dpfreq releases.

    Attributes
    ----------
    value : Any
        The released estimate (numpy arrays for vectors).
    epsilon, delta : float
        Privacy parameters the release spent (as given by the caller; the exact fraction used
        for noise is in ``mechanism_params``).
    mechanism : str
        Name of the mechanism (e.g. ``"wu-pagh-fft"``).
    mechanism_params : Mapping
        Every parameter needed to reproduce the analysis (fractions as ``"s/t"`` in JSON).
    seeded : bool
        True when a seed or user generator was used: reproducible, **not for production**.
    error : ErrorStatement
        The error bound or confidence statement.
    """

    value: Any
    epsilon: float
    delta: float = 0.0
    mechanism: str
    mechanism_params: Mapping[str, Any] = field(default_factory=dict)
    seeded: bool
    error: ErrorStatement

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of every field, with ``type`` naming the release class."""
        out = {"type": type(self).__name__}
        out.update(to_jsonable(self))
        return out

    def to_json(self, **kwargs: Any) -> str:
        """The release as JSON text (keyword arguments go to :func:`json.dumps`)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    def plot(self, ax: Any = None) -> Any:  # pragma: no cover - overridden
        """Draw the release with its error band on a matplotlib axes (subclasses implement)."""
        raise NotImplementedError(f"{type(self).__name__} has no plot")
