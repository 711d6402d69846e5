"""The one protocol every window structure implements, and the typed record of its calibration.

A structure (:mod:`dpfreq.windows.structures.base`) is the noise layout of one query family and one
k, chosen by ``method``: it is calibrated from public parameters, draws its node noise under the
release's key and answers windows as integer sums ``Σ ± (exact node count + node noise)`` of
noisy node counts, or (``measured`` structures) as a deterministic function of noisy
measurements it holds. The release
(:mod:`dpfreq.windows.state`), the plan (:mod:`dpfreq.windows.structures.chooser`,
:mod:`dpfreq.windows.plan`) and the band simulation (:mod:`dpfreq.windows.structures.bands`) read a
structure through :class:`WindowStructure` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.laws.node import NodeLaw

__all__ = [
    "Calibration",
    "CounterShape",
    "NodeSampler",
    "PerQueryShape",
    "Shape",
    "TreeShape",
    "WindowStructure",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: ``sample(start, count)``: i.i.d. node noises number ``start .. start + count − 1`` of a band
#: simulation, from a structure's exact node law
NodeSampler = Callable[[int, int], IntArray]


@dataclass(frozen=True)
class Shape:
    """Sensitivity of a structure: ``pieces`` composed sequentially, ℓ1 and ℓ2 per piece."""

    pieces: int
    l1: int
    l2: float

    @property
    def domain(self) -> int:
        """Leaves of each tree of the structure (0: no tree)."""
        return 0

    def record(self) -> dict[str, Any]:
        """The layout as the release records it (``mechanism_params``)."""
        return {"pieces": self.pieces}


@dataclass(frozen=True)
class CounterShape(Shape):
    """A layered counter over ``T`` periods (the simple counter, a ``B``-ary tree)."""

    periods: int
    levels: int
    points: int  # Δ: points one neighbour changes
    tree_nodes: int
    branching: int | None = None  # None: the simple counter (no tree parameters recorded)
    top: bool = False
    block_sizes: tuple[int, ...] = ()

    @property
    def domain(self) -> int:
        return self.periods

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"domain": self.periods, "levels": self.levels,
                               "points_per_neighbour": self.points, "pieces": self.pieces,
                               "tree_nodes": self.tree_nodes}
        if self.branching is not None:
            out.update(branching=self.branching, top_level=self.top,
                       block_sizes=list(self.block_sizes))
        return out


@dataclass(frozen=True)
class TreeShape(Shape):
    """Dyadic trees over ``leaves`` values (blocks, one tree, product trees, per start)."""

    leaves: int
    levels: int
    points: int  # Δ: points one neighbour changes
    blocks: int | None = None  # rolling-window blocks (recorded when set)
    group_size: int | None = None  # periods per group of per-start trees (recorded when set)

    @property
    def domain(self) -> int:
        return self.leaves

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"domain": self.leaves, "levels": self.levels,
                               "points_per_neighbour": self.points, "pieces": self.pieces}
        if self.blocks is not None:
            out["blocks"] = self.blocks
        if self.group_size is not None:
            out["group_size"] = self.group_size
        return out


@dataclass(frozen=True)
class PerQueryShape(Shape):
    """One noise per window: ``windows`` answers change with one neighbour."""

    windows: int

    def record(self) -> dict[str, Any]:
        return {"windows_per_unit": self.windows, "pieces": self.pieces}


@dataclass(frozen=True)
class Calibration:
    """How the budget became node noise (every field public)."""

    l1_sensitivity: int
    accounting: str  # "pure epsilon-DP", "zCDP" or an (ε, δ) calibration
    epsilon_piece: Fraction | None = None  # discrete Laplace: the budget of each pure piece
    rho_piece: float | None = None  # zCDP: ρ of each piece
    l2_sensitivity: float | None = None  # discrete Gaussian only
    sigma2: int | None = None  # discrete Gaussian only

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"l1_sensitivity": self.l1_sensitivity}
        if self.rho_piece is None:
            out.update(epsilon_piece=str(self.epsilon_piece), accounting=self.accounting)
            if self.sigma2 is not None:  # a Gaussian calibrated to (ε, δ) directly
                out.update(l2_sensitivity=self.l2_sensitivity, sigma2=self.sigma2)
            return out
        out.update(rho_piece=self.rho_piece, accounting=self.accounting)
        if self.epsilon_piece is not None:
            out["epsilon_piece"] = str(self.epsilon_piece)
        else:
            out.update(l2_sensitivity=self.l2_sensitivity, sigma2=self.sigma2)
        return out


class WindowStructure(Protocol):
    """A calibrated noise structure for one (query family, k), as its callers read it.

    ``family`` is ``"cumulative"``, ``"total"``, ``"rolling"`` (with ``width``) or ``"all"``;
    ``method`` the registered name of the structure. Queries are arrays ``t1, t2``
    (cumulative: ``t1 = 1``; rolling: ``t1 = max(1, t2−W+1)``).
    """

    family: str
    method: str
    k: int
    horizon: int
    width: int | None
    unit: str
    group_size: int
    branching: int
    top: bool
    eps: Fraction
    delta: float
    rho: float | None
    noise_kind: str
    gamma: Fraction
    sigma2: int
    law: NodeLaw
    consistent: bool
    layout: tuple[Any, ...]
    calibration: Calibration | None

    @property
    def shape(self) -> Shape:
        """Sensitivity and layout (the structure's own frozen dataclass)."""

    @property
    def domain(self) -> int:
        """Leaves of each tree (0 for per-query noise or an unusable calibration)."""

    @property
    def detail(self) -> dict[str, Any]:
        """Layout and calibration as recorded in ``mechanism_params`` (JSON-ready)."""

    @property
    def usable(self) -> bool:
        """Calibration gave usable noise (else the structure is never chosen)."""

    @property
    def node_variance(self) -> float: ...

    @property
    def n_family(self) -> int: ...

    def weights(self) -> FloatArray: ...

    def nodes(self, t1: Any, t2: Any) -> IntArray: ...

    def variance(self, t1: Any, t2: Any) -> FloatArray: ...

    def halfwidth(self, t1: Any, t2: Any, beta: float, *, exact: bool = True
                  ) -> FloatArray: ...

    def band_halfwidth(self, t1: Any, t2: Any, beta: float, *, exact: bool = True
                       ) -> FloatArray: ...

    def bias_bound(self) -> int: ...

    def family_queries(self) -> tuple[IntArray, IntArray]: ...

    def exact_window(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        """The window whose exact count an answer adds its noise to (time compression widens
        it to whole groups)."""

    def worst_windows(self) -> tuple[IntArray, IntArray]:
        """Windows containing one whose per-answer half-width is largest (all-windows
        structures)."""

    def mean_mse(self) -> float: ...

    def describe(self, name: str) -> str:
        """``name`` with the structure's public layout, for the plan's one-line reason."""

    def attach(self, key: bytes, name: Any) -> None: ...

    def noise(self, t1: Any, t2: Any) -> IntArray: ...

    @property
    def measured(self) -> bool:
        """Answers come from noisy measurements (:meth:`estimates`), not exact + noise."""

    def measure(self, exact: Any) -> None: ...

    @property
    def measurement(self) -> IntArray | None:
        """The eager noisy measurement, or None (measured lazily, or not measured)."""

    @property
    def measurement_size(self) -> int | None:
        """The length of :attr:`measurement` (public), or None."""

    def load_measurement(self, noisy: Any) -> None: ...

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]: ...

    def allowance(self, t1: Any, t2: Any) -> FloatArray: ...

    def node_cover(self, t1: IntArray, t2: IntArray
                   ) -> tuple[IntArray, IntArray, IntArray] | None:
        """Every node noise in the answers as ``(rows, ids, signs)`` (None: not such sums)."""

    def simulate_band(self, beta: float, draws: int, sample: NodeSampler) -> float | None:
        """The band multiplier from ``draws`` simulated noise vectors (None: union bound)."""
