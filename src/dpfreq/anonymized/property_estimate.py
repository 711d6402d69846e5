"""The result type of a symmetric-property estimate, and the helpers that build its statement."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfreq._docstrings import PLOT_SECTIONS, fill_doc
from dpfreq.release import ErrorStatement, Release

__all__ = ["PropertyEstimate", "clamp", "entropy_total_term", "no_statement", "with_total"]


@dataclass(frozen=True, kw_only=True, repr=False)
class PropertyEstimate(Release):
    """A symmetric-property estimate from an anonymized histogram.

    ``value`` is a float. From a release it is ε-DP by post-processing (``epsilon`` and ``delta``
    are the release's: nothing further is spent); from an exact histogram it is the non-private
    reference (``private=False``, ``epsilon=inf``).

    Attributes
    ----------
    property_name : str
        Which property (``"entropy"``, ``"support-size"``, ...).
    sample_size : int
        The ``n`` in ``f(r, n)``: the release's ``N`` (a DP estimate), or ``Σ r φ_r`` for exact
        input.
    lipschitz_constant : float
        ``L`` with respect to the sorted-ℓ1 distance at ``sample_size``, for histograms with
        counts ``≤ max_count`` (``nan`` for non-linear estimators without one).
    max_count : int
        The ``R`` used for ``lipschitz_constant``: ``max(sample_size, largest count of H)``.
    private : bool
        True when computed from a DP release; False for the exact, non-private reference.
    raw_value : float
        The estimator's value before clamping to ``value_range``.
    clamped : bool
        True when the raw value lay outside the quantity's range and was moved into it (then
        ``value`` is the nearest end of that range; clamping only moves it toward any target
        inside the range, so the error statement holds for ``value``).
    value_range : tuple of float
        The range the quantity can take (e.g. ``(0, t·N)`` for unseen species). From a
        release, the range its target lies in whenever the error statement holds (``[0, ln B]``
        for the entropy, ``B`` the top of the total's interval): the published interval is
        ``value ± error.value`` cut to it (``table()``'s ``lower``/``upper``), and a statement
        covering all of it says so (``error.vacuous``).
    parameters : Mapping
        The estimator's parameters (``domain_size``, ``extrapolation_ratio``, ``order``...).

    Examples
    --------
    >>> from dpfreq.anonymized import estimate_support_size
    >>> est = estimate_support_size({1: 4, 8: 1, 9: 1})  # exact input: non-private reference
    >>> est.value, est.private, est.clamped
    (6.0, False, False)
    """

    property_name: str
    sample_size: int
    lipschitz_constant: float
    max_count: int
    private: bool
    raw_value: float
    clamped: bool
    value_range: tuple[float, float]
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def _summary(self) -> list[tuple[str, str]]:
        clamped = ", clamped to its range" if self.clamped else ""
        private = "" if self.private else ", NOT private (exact input)"
        return [("property", f"{self.property_name} from a sample of {self.sample_size:,}"
                             f"{clamped}{private}")]

    def __float__(self) -> float:
        return float(self.value)

    def table(self) -> dict[str, Any]:
        """One row: the property, its value, and ``lower``/``upper``, the published interval
        ``value ± bound`` cut to ``value_range`` (all of it for an infinite bound; NaN when
        there is no error statement or no value)."""
        half = float(np.max(self.error.value)) if self.error.kind == "bound" else math.nan
        lo, hi = self.value_range
        known = not (math.isnan(half) or math.isnan(self.value))
        lower = max(self.value - half, lo) if known else math.nan
        upper = min(self.value + half, hi) if known else math.nan
        return {"property": np.array([self.property_name]), "value": np.array([self.value]),
                "lower": np.array([lower]), "upper": np.array([upper]),
                "clamped": np.array([self.clamped])}

    @fill_doc(plot=PLOT_SECTIONS)
    def plot(self, ax: Any = None) -> Any:
        """The estimate as a point with its error bound (when finite) as an error bar.

        [[plot]]
        """
        from dpfreq.plotting import new_axes, privacy_title

        ax = new_axes(ax, figsize=(4.0, 4.0))
        row = self.table()
        lower, upper = float(row["lower"][0]), float(row["upper"][0])
        if math.isfinite(lower) and math.isfinite(upper):
            yerr = [[self.value - lower], [upper - self.value]]
            label = (f"{self.error.kind}, confidence {self.error.confidence:g}"
                     if self.error.confidence is not None else self.error.kind)
            ax.errorbar([0], [self.value], yerr=yerr, fmt="o", capsize=6, label=label)
            ax.legend(loc="best")
        else:
            ax.plot([0], [self.value], "o", label="estimate (no finite error bound)")
            ax.legend(loc="best")
        ax.set_xticks([0], [self.property_name])
        ax.set_xlabel("estimate from the release (post-processing)" if self.private
                      else "estimate from the exact histogram")
        ax.set_ylabel(self.property_name)
        ax.set_title(privacy_title(self.property_name, epsilon=self.epsilon, unit=self.unit,
                                   confidence=self.error.confidence, interval="bound")
                     if self.private else f"{self.property_name}: not private")
        return ax


def no_statement(description: str) -> ErrorStatement:
    """An honest "no error statement": kind ``"sd"`` with an unknown (NaN) value."""
    return ErrorStatement(kind="sd", confidence=None, value=math.nan, description=description)


def clamp(value: float, value_range: tuple[float, float]) -> float:
    """``value`` moved into ``value_range`` (NaN stays NaN)."""
    lo, hi = value_range
    return value if math.isnan(value) else min(max(value, lo), hi)


def entropy_total_term(n_estimate: int, interval: tuple[int, int], miller_madow: bool) -> float:
    """``max |Ĥ_N(h) − Ĥ_n(h)|`` over totals ``n`` in ``interval`` and histograms ``h`` of
    total ``n``: the error of using ``N`` for ``n`` in the plug-in entropy.

    With ``S = Σ φ_r r ln r ∈ [0, n ln n]``, ``Ĥ_N(h) − Ĥ_n(h) = (n/N) ln N − ln n −
    S (1/N − 1/n)`` is linear in ``S``, so its extremes are ``(n/N) ln N − ln n`` (``S = 0``)
    and ``(n/N) ln(N/n)`` (``S = n ln n``); Miller–Madow adds at most ``|n − N| / (2N)``.

    The maximum over the interval is exact (a grid could miss it): on each side of ``N`` every
    piece ``±a(n) + |n − N|/(2N)`` (the linear part only for Miller–Madow) is convex or
    concave, so its maximum lies at an end of the side or at the concave piece's stationary
    point — ``N/ln N`` and ``N/e`` (``N/(ln N ± 1/2)`` and ``N e^{−3/2}`` with the linear
    part) — evaluated at the integers either side (the totals are integers): the exact maximum.
    """
    big_n = float(max(n_estimate, 1))
    lo, hi = max(interval[0], 1), max(interval[1], 1)
    log_n = math.log(big_n)
    stationary = [big_n / math.e, big_n * math.exp(-1.5)]
    stationary += [big_n / x for x in (log_n, log_n + 0.5, log_n - 0.5) if x > 0]
    ends = [float(f(x)) for x in stationary for f in (math.floor, math.ceil)]
    n = np.array([float(lo), float(hi), big_n, *ends], dtype=np.float64)
    n = n[(n >= lo) & (n <= hi)]
    term = np.maximum(np.abs(n / big_n * math.log(big_n) - np.log(n)),
                      np.abs(n / big_n * np.log(big_n / n)))
    if miller_madow:
        term = term + np.abs(n - big_n) / (2.0 * big_n)
    return float(term.max())


def with_total(base: ErrorStatement, n: int, interval: tuple[int, int],
                miller_madow: bool) -> ErrorStatement:
    """The entropy statement against the plug-in at the *true* total: ``base`` plus
    :func:`entropy_total_term`, holding when both the ℓ1 bound and the total's interval hold
    (union bound: confidence ``2c − 1``)."""
    if base.kind != "bound" or base.confidence is None:
        return base
    term = entropy_total_term(n, interval, miller_madow)
    conf = round(max(2.0 * base.confidence - 1.0, 0.0), 12)
    return ErrorStatement(kind="bound", confidence=conf, value=base.value + term,
                          vacuous=base.vacuous, description=(
        f"|raw estimate − plug-in entropy of the true histogram| <= {base.value + term:.6g} "
        f"with probability about {conf:g}: L × B = {base.value:.6g} for the histogram (as for "
        f"every property) plus {term:.6g} for using N instead of the true total, over the "
        f"total's interval {list(interval)} (union bound of the two statements). "
        f"{base.description}"))
