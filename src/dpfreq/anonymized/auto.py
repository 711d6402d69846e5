"""Budget-split presets and the data-independent ``method="auto"`` rule.

Every function here maps ε (a public parameter) to a plan; none of them sees the data, so the
choice itself leaks nothing.

The rule: ``auto`` runs tuned PrivHist at every ε — ``(0.05ε, 0.95ε, 0)`` on the low-privacy
branch with a non-increasing fit of the noisy large counts (post-processing of the vector the
privacy proof protects), and below ε = :data:`HIGH_PRIVACY_BELOW` the high-privacy branch at
``(0.05ε, 0.05ε, 0.9ε)``. Why: in seeded measurements on Zipf data it beat the paper's split
(ε/3 each) and Hay et al. at every ε and size tried; the measurements, and the command that
re-runs them (``benchmarks/bench_anonymized.py``), are in ``docs/choosing.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "HIGH_PRIVACY_BELOW",
    "Plan",
    "choose",
    "hay_split",
    "paper_split",
    "plan_for",
    "tuned_low_privacy_branch",
    "tuned_split",
    "why",
]

#: ``privhist-tuned`` uses the high-privacy branch (H1–H6) only for ε below this.
HIGH_PRIVACY_BELOW = 0.01
_N_SHARE = 0.05  # share of ε spent on N by the tuned presets


@dataclass(frozen=True)
class Plan:
    """What to run: the method, the absolute split ``(ε1, ε2, ε3)`` and the PrivHist branch."""

    method: str
    split: tuple[float, float, float]
    low_privacy_branch: bool | None  # None for Hay
    isotonic_large: bool = False


def paper_split(epsilon: float) -> tuple[float, float, float]:
    """The paper's preset: ε/3 each (ε3 unused in the low-privacy branch, ε > 1)."""
    return (epsilon / 3.0, epsilon / 3.0, epsilon / 3.0)


def hay_split(epsilon: float) -> tuple[float, float, float]:
    """Hay et al. default : ε/3 for N, 2ε/3 on counts."""
    return (epsilon / 3.0, 2.0 * epsilon / 3.0, 0.0)


def tuned_low_privacy_branch(epsilon: float) -> bool:
    """``privhist-tuned`` runs the low-privacy branch iff ``ε >= HIGH_PRIVACY_BELOW``."""
    return epsilon >= HIGH_PRIVACY_BELOW


def tuned_split(epsilon: float) -> tuple[float, float, float]:
    """The measured preset (module docstring): ``(0.05ε, 0.95ε, 0)`` for the low-privacy branch
    (with ``isotonic_large``), ``(0.05ε, 0.05ε, 0.9ε)`` for the high-privacy branch
    (ε < :data:`HIGH_PRIVACY_BELOW`)."""
    e1 = _N_SHARE * epsilon
    if tuned_low_privacy_branch(epsilon):
        return (e1, epsilon - e1, 0.0)
    return (e1, _N_SHARE * epsilon, epsilon - 2.0 * e1)


def plan_for(method: str, epsilon: float,
             split: tuple[float, float, float] | None = None) -> Plan:
    """The plan of a named method (``split`` overrides the preset, already validated)."""
    if method == "auto":
        return choose(epsilon)
    if method == "privhist":
        return Plan("privhist", split or paper_split(epsilon), epsilon > 1.0)
    if method == "privhist-tuned":
        return Plan("privhist-tuned", split or tuned_split(epsilon),
                    tuned_low_privacy_branch(epsilon), isotonic_large=True)
    return Plan("hay", split or hay_split(epsilon), None)


def choose(epsilon: float) -> Plan:
    """``method="auto"``: tuned PrivHist at every ε (see the module docstring for why).

    Depends on ε only — never on the data.
    """
    return Plan("privhist-tuned", tuned_split(epsilon), tuned_low_privacy_branch(epsilon),
                isotonic_large=True)


def why(epsilon: float) -> str:
    """One sentence saying why ``method="auto"`` chose its plan at this ε (public only)."""
    branch = ("low-privacy branch with an isotonic fit of the large counts"
              if tuned_low_privacy_branch(epsilon) else
              f"high-privacy (smoothed) branch, since epsilon < {HIGH_PRIVACY_BELOW:g}")
    return (f"tuned PrivHist ({branch}; split 5 % of epsilon on the total): in seeded "
            "measurements on Zipf data it beat the paper's split and Hay et al. at every "
            "epsilon and size tried; the choice depends on epsilon only, never on the data")
