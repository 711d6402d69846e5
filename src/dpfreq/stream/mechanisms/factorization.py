"""The (damped) square-root factorization, online: each period adds one row of ``u = R x + z``.

The offline factorization (:mod:`dpfreq.windows.layouts.factorization`) measures
``u = R x + z`` with ``R`` the lower-triangular Toeplitz matrix of the integers ``c_j`` (the
scaled coefficients of ``(1 − λx)^{−a}``, the shape chosen for ``T`` from public parameters)
and publishes ``L u`` with ``L = A R^{−1}``, also lower-triangular. Lower triangular means
row ``t`` of ``R x`` reads ``x_1 … x_t`` only, and row ``t`` of ``L u`` reads ``u_1 … u_t``
only: at the end of period ``t`` the stream measures

    ``u_t = Σ_{j<t} c_j x_{t−j} + z_t``      (exact integers; ``z_t`` keyed node ``t − 1``)

and publishes ``prefix_answer`` of ``u_1 … u_t`` — the same function, of the same integers, with
the same keyed noise as the offline release: the online answers equal the offline ones bit for
bit. The node law is the discrete Gaussian at the exact ℓ2 sensitivity of ``R x``
(:func:`~dpfreq.windows.layouts.factorization.sensitivity`); the noise of answer ``t`` is
``Σ_{m<t} e_m z_{t−m}``, variance ``Var(z)·Σ_{m<t} e_m²``, σ²-sub-Gaussian.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.layouts.factorization import (
    ALLOWANCE,
    MAX_HORIZON,
    coefficients,
    factor_shape,
    prefix_coefficients,
    sensitivity,
)

__all__ = ["MAX_HORIZON", "FactorizationLayout"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


class FactorizationLayout:
    """The online (damped) square-root factorization over ``T <= 8192`` periods (one row per
    period, keyed node id ``t − 1``), its coefficients shaped for a unit whose points may move
    (``moves``: ``event``, ``item_replace``) or not (``item``), as the offline release's."""

    name = "factorization"

    def __init__(self, horizon: int, moves: bool) -> None:
        if not 1 <= horizon <= MAX_HORIZON:
            raise ValueError(f"the factorization needs 1 <= horizon <= {MAX_HORIZON}")
        self.horizon, self.moves = horizon, moves
        self.coefficients = coefficients(horizon, moves)
        e = prefix_coefficients(horizon, moves)
        self._e = e
        self.factors: FloatArray = np.cumsum(e * e)

    def sensitivity(self, unit: str) -> tuple[int, int]:
        """Exact ``(ℓ1, ℓ2²)`` of ``R x``
        (:func:`~dpfreq.windows.layouts.factorization.sensitivity`)."""
        return sensitivity(self.horizon, "item" if unit == "item" else "event", self.moves)

    def rows_through(self, t: int) -> int:
        return t

    def row_ids(self, t: int) -> IntArray:
        return np.array([t - 1], dtype=np.int64)

    def row_values(self, prefix: IntArray, t: int) -> IntArray:
        """``Σ_{j<t} c_j x_{t−j}`` per group, exact (``c_j <= 2^16``; checked below 2^46 points)."""
        x = np.diff(prefix[:, :t + 1], axis=1)
        if x.size and int(prefix[:, t].max(initial=0)) >= 1 << 46:
            raise OverflowError("the factorization counts at most 2^46 points")
        out: IntArray = (x[:, ::-1] @ self.coefficients[:t])[:, None]
        return out

    def answer(self, noisy: IntArray, t: int) -> NDArray[Any]:
        """:func:`~dpfreq.windows.layouts.factorization.prefix_answer` of each group's
        ``u_1 … u_t``: the products ``e_m·u_{t−m}`` in float64, summed by numpy's pairwise
        summation along each group's contiguous row of ``t`` terms — the routine of
        ``prefix_answer`` (the same bits; the tests compare them)."""
        terms = self._e[:t] * noisy[:, t - 1::-1].astype(np.float64)
        out: NDArray[Any] = terms.sum(axis=1)
        return out

    def allowance(self, noisy: IntArray, t: int) -> FloatArray:
        """The floating-point allowance of :data:`~dpfreq.windows.layouts.factorization.ALLOWANCE`,
        from the measurement (as the offline intervals add it)."""
        out: FloatArray = ALLOWANCE * self.answer(np.abs(noisy), t)
        return out

    def factor(self, t: int) -> float:
        """``Σ_{m<t} e_m²``: the answer's variance over the node variance."""
        return float(self.factors[t - 1])

    def describe(self) -> str:
        a, damping = factor_shape(self.horizon, self.moves)
        return (f"online damped square-root factorization over {self.horizon} periods "
                f"(coefficients of (1 - lambda x)^-a, a={a:g}, lambda=1-{damping:.4g})")

    def record(self) -> dict[str, Any]:
        a, damping = factor_shape(self.horizon, self.moves)
        return {"layout": "damped square-root factorization", "horizon": self.horizon,
                "factor_scale": int(self.coefficients[0]), "exponent": a,
                "damping": damping}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this layout (:func:`~dpfreq.stream.mechanisms.saved.rebuild_counter`)."""
        return {"layout": "factorization", "horizon": self.horizon, "moves": self.moves}
