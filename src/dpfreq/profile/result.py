"""The release type of a private profile (Wu & Pagh reconstruction, spec §1 and §9.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq.release import Release

__all__ = ["ProfileRelease"]


@dataclass(frozen=True, kw_only=True)
class ProfileRelease(Release):
    """A private profile ``r[0..n]`` with its high-probability error bound.

    ``value`` is ``r`` (float64, entries in ``[0, 1]``, summing to 1): ``r[t]`` estimates the
    fraction of the ``domain_size`` items whose count is exactly ``t`` (``t = 0..max_count``).

    Attributes
    ----------
    domain_size : int
        ``d``, the public number of items (the normalizer of the profile).
    max_count : int
        ``n``, the public count cap (output length ``n + 1``).
    B : int
        Bound parameter of the truncated noise kernel (spec §4).
    norm : str
        ``"1"``, ``"2"`` or ``"inf"``: the norm the reconstruction optimizes and ``error`` bounds.
    eta : float
        Failure probability η of the bound (the bound holds with probability ``error.confidence``).
    method : str
        ``"fft"`` (Algorithms 2+3 of the paper) or ``"mle"`` (EM maximum likelihood).
    noisy_profile : numpy.ndarray
        ``f~[t] = |{ℓ : h~[ℓ] = t}| / d`` for ``t = -B .. n+B`` (diagnostics and plots).
    """

    domain_size: int
    max_count: int
    B: int
    norm: str
    eta: float
    method: str
    noisy_profile: np.ndarray

    def profile(self) -> np.ndarray:
        """The estimated profile ``r[0..n]`` (alias of ``value``)."""
        return np.asarray(self.value)

    @property
    def counts_axis(self) -> np.ndarray:
        """The counts ``t = 0..n`` the entries of :meth:`profile` refer to."""
        return np.arange(self.max_count + 1)

    def plot(self, ax: Any = None, *, truth: Any = None) -> Any:
        """Draw the estimate with its error band, and optionally the true profile beside it.

        The band is ``r[t] ± error.value`` clipped to ``[0, 1]``: every entry of the error vector
        is bounded by its ℓ1, ℓ2 and ℓ∞ norm alike, so the band is valid for any ``norm``.

        Parameters
        ----------
        ax : matplotlib axes, optional
            Where to draw; a new Agg figure when omitted.
        truth : array-like, optional
            The true profile ``f[0..n]`` (for simulations and demos only).

        Returns
        -------
        matplotlib axes
        """
        from dpfreq.plotting import new_axes, plot_band

        ax = new_axes(ax)
        t = self.counts_axis
        r = self.profile()
        bound = float(np.asarray(self.error.value, dtype=np.float64).max())
        conf = self.error.confidence
        band_label = (f"error bound (ℓ{self.norm}, prob. ≥ {conf:.3g})" if conf is not None
                      else "error bound")
        plot_band(ax, t, r, np.clip(r - bound, 0.0, 1.0), np.clip(r + bound, 0.0, 1.0),
                  label=f"private profile ({self.method})", band_label=band_label,
                  drawstyle="steps-mid")
        if truth is not None:
            f = np.asarray(truth, dtype=np.float64)
            ax.plot(np.arange(f.size), f, "k.", label="true profile", markersize=4)
        ax.set_xlabel("count t")
        ax.set_ylabel("fraction of items with count t")
        ax.set_title(f"Private profile: d={self.domain_size}, n={self.max_count}, "
                     f"ε={self.epsilon:g}")
        ax.legend(loc="best")
        return ax
