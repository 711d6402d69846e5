"""Data-independent choice of method and budget split (placeholder, rule measured below)."""

from __future__ import annotations

__all__ = ["choose", "paper_split", "tuned_split"]


def paper_split(epsilon: float) -> tuple[float, float, float]:
    """The paper's ε/3 each."""
    return (epsilon / 3, epsilon / 3, epsilon / 3)


def tuned_split(epsilon: float) -> tuple[float, float, float]:
    """Placeholder."""
    return paper_split(epsilon)


def choose(epsilon: float) -> tuple[str, tuple[float, float, float]]:
    """Placeholder."""
    return "privhist", paper_split(epsilon)
