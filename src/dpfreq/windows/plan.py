"""Choosing the noise structure of every (window family, k) from public parameters only.

For each family (cumulative, rolling width W, all windows) and each k, every admissible
strategy of :mod:`dpfreq.windows.strategy` is calibrated to the per-structure budget and the one
with the smallest predicted mean squared error is kept (or the caller's forced choice). With
δ > 0 a second plan under zCDP accounting is built and the better of the two is used. Nothing
here looks at the data, so the whole plan (and every refusal it makes) happens before any
budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpfreq._validate import check_choice, message
from dpfreq.errors import ParameterError
from dpfreq.noise import epsilon_to_fraction
from dpfreq.windows.strategy import BRANCHINGS, STRATEGIES, Structure, build_structure

__all__ = ["RELATIONS", "Plan", "family_label", "make_plan", "zcdp_rho"]

_FUNC = "release_window_counts"

#: the neighbouring relation of each unit of privacy, in words (``mechanism_params``)
RELATIONS = {
    "event": "add or remove one event (one row)",
    "item": "add or remove one item together with all its events",
    "item_replace": "replace one item's events by any other events (cumulative structures "
                    "at their exact sensitivity, the others at twice the item sensitivity)",
}


def family_label(family: str, width: int | None) -> str:
    """``"cumulative"``, ``"all"`` or ``"fixed(W=…)"``: the name of a query family."""
    return f"fixed(W={width})" if family == "fixed" else family


@dataclass(frozen=True)
class Plan:
    """Calibrated structures per ``(family label, k)`` and how the choice was made."""

    structures: dict[tuple[str, int], Structure]
    record: dict[str, Any]
    accounting: str
    epsilon_per_structure: Fraction
    delta_per_structure: float


def _candidates(family: str, unit: str, singleton: bool) -> list[str]:
    out = []
    for s in STRATEGIES[family]:
        if unit != "event" and s in ("single", "tree2d"):
            continue  # unbounded per-item point count at item level
        if s == "compressed" and not (unit != "event" and singleton):
            continue
        out.append(s)
    return out


def _best_group_size(k: int, horizon: int, eps: Fraction, delta: float,
                     rho: float | None = None, noise_kind: str = "laplace") -> tuple[int, float]:
    best = (1, float("inf"))
    sizes = np.unique(np.concatenate((np.arange(1, min(horizon, 64) + 1),
                                      np.geomspace(1, horizon, 60).astype(np.int64))))
    for g in sizes:
        s = build_structure("all", "compressed", k, horizon, "item", eps, delta,
                            group_size=int(g), rho=rho, noise_kind=noise_kind)
        if not _usable(s):
            continue
        mse = s.mean_mse()
        if mse < best[1]:
            best = (int(g), mse)
    return best


def _best_tree(k: int, horizon: int, unit: str, eps: Fraction, delta: float,
               rho: float | None, noise_kind: str,
               layouts: dict[str, float] | None = None) -> Structure | None:
    """The cumulative tree whose branching factor ``B`` and top level (a root block over all
    periods, or none) predict the least error for ``T`` (each layout once); ``layouts``
    receives every layout's predicted RMSE."""
    best: Structure | None = None
    seen: set[tuple[int, ...]] = set()
    for b in BRANCHINGS:
        for top in (False, True):
            s = build_structure("cumulative", "tree", k, horizon, unit, eps, delta, rho=rho,
                                noise_kind=noise_kind, branching=b, top=top)
            sizes = tuple(s.detail.get("block_sizes", ()))
            if sizes in seen or not _usable(s):
                continue
            seen.add(sizes)
            if layouts is not None:
                layouts[f"B={b}{', root' if top else ''}"] = float(np.sqrt(s.mean_mse()))
            if best is None or s.mean_mse() < best.mean_mse():
                best = s
    return best


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ρ with ``ρ + 2√(ρ ln(1/δ)) <= ε`` (ρ-zCDP ⇒ (ε, δ)-DP, Bun–Steinke 2016)."""
    log_term = math.log(1.0 / delta)
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def _forced(strategy: Any, w: Any, label: str, cands: list[str]) -> str | None:
    """The caller's strategy for this family (checked against the admissible ones), or None."""
    if strategy == "auto":
        return None
    forced = strategy.get(w, strategy.get(label))
    if forced is None or forced == "auto":
        return None
    return check_choice(forced, f"strategy for {label}", _FUNC, cands)


def _usable(s: Structure) -> bool:
    """Calibration gave usable noise: γ > 0 (Laplace) or a representable σ² (Gaussian)."""
    if s.noise_kind == "gaussian":
        return 0 < s.sigma2 < 1 << 60
    return s.gamma > 0


def _choose(families: tuple[Any, ...], ks: tuple[int, ...], horizon: int, unit: str,
            eps_s: Fraction, delta_s: float, strategy: Any, singleton: bool,
            rho_s: float | None = None
            ) -> tuple[dict[tuple[str, int], Structure], dict[str, Any]]:
    chosen: dict[tuple[str, int], Structure] = {}
    record: dict[str, Any] = {}
    kinds = ("laplace",) if rho_s is None else ("laplace", "gaussian")
    for w in families:
        family = "fixed" if not isinstance(w, str) else w
        width = None if isinstance(w, str) else int(w)
        label = family_label(family, width)
        cands = _candidates(family, unit, singleton)
        forced = _forced(strategy, w, label, cands)
        for k in ks:
            preds: dict[str, float] = {}
            structs: dict[str, Structure] = {}
            layouts: dict[str, float] = {}
            for c in cands if forced is None else [forced]:
                for kind in kinds:
                    g = 1
                    if c == "compressed":
                        g, _ = _best_group_size(k, horizon, eps_s, delta_s, rho_s, kind)
                    if family == "cumulative" and c == "tree":
                        best = _best_tree(k, horizon, unit, eps_s, delta_s, rho_s, kind,
                                          layouts if kind == "laplace" else None)
                        if best is None:
                            continue
                        s = best
                    else:
                        s = build_structure(family, c, k, horizon, unit, eps_s, delta_s,
                                            width, g, rho=rho_s, noise_kind=kind)
                    if not _usable(s):
                        continue
                    name = c if rho_s is None else f"{c}/{kind}"
                    structs[name] = s
                    preds[name] = float(np.sqrt(s.mean_mse()))
            if not preds:
                raise ParameterError(message(
                    "epsilon", _FUNC, "large enough to give every structure representable "
                    "noise (raise epsilon, or release fewer k_values/windows or a shorter "
                    "horizon)", float(eps_s) * len(families) * len(ks)))
            pick = min(preds, key=lambda c: preds[c])
            chosen[(label, k)] = structs[pick]
            record[f"{label}, k={k}"] = {
                "strategy": structs[pick].strategy, "noise": structs[pick].noise_kind,
                "predicted_rmse": preds, "gamma": str(structs[pick].gamma),
                "detail": structs[pick].detail,
                "chosen_by": "auto (smallest predicted mean squared error, public parameters "
                             "only)" if forced is None else "caller",
                "why": _why(pick, preds, structs[pick])}
            if layouts:
                record[f"{label}, k={k}"]["tree_layouts_rmse"] = layouts
    return chosen, record


def _why(pick: str, preds: dict[str, float], s: Structure) -> str:
    """One sentence: the chosen structure's predicted RMSE against the next best."""
    name = pick
    if s.strategy == "tree" and s.family == "cumulative":
        name = f"{pick} (B={s.branching}, blocks {s.detail['block_sizes']})"
    others = sorted((v, c) for c, v in preds.items() if c != pick)
    if not others:
        return f"{name}: the only admissible structure (predicted RMSE {preds[pick]:.4g})"
    v, c = others[0]
    return (f"{name}: predicted RMSE {preds[pick]:.4g} over the family's windows, against "
            f"{v:.4g} for the next best ({c}), from public parameters only")


def make_plan(windows: tuple[Any, ...], ks: tuple[int, ...], horizon: int, unit: str,
              epsilon: float, delta: float, strategy: Any, singleton: bool) -> Plan:
    """Calibrate every structure (public parameters only; raises ParameterError on a bad
    forced strategy or a budget too small to calibrate)."""
    n_struct = len(windows) * len(ks)
    eps_s = epsilon_to_fraction(epsilon) / n_struct
    delta_s = delta / n_struct
    if eps_s <= 0:
        raise ParameterError(message("epsilon", _FUNC, f"large enough to split over {n_struct} "
                                     "structures", epsilon))
    strat = strategy if not isinstance(strategy, Mapping) else {
        (int(k) if str(k).isdigit() else k): v for k, v in strategy.items()}
    chosen, record = _choose(windows, ks, horizon, unit, eps_s, delta_s, strat, singleton)
    accounting = ("pure epsilon-DP: basic composition over structures (advanced composition "
                  "over item-level blocks/starts when delta > 0)")
    rho = zcdp_rho(epsilon, delta) if delta > 0 else 0.0
    if rho > 0:
        # alternative plan: zCDP accounting, ρ split equally, discrete Laplace or Gaussian each
        try:
            z_chosen, z_record = _choose(windows, ks, horizon, unit, eps_s, delta_s, strat,
                                         singleton, rho_s=rho / n_struct)
        except ParameterError:  # ρ too small to calibrate (δ near 0): the pure plan stands
            return Plan(chosen, record, accounting, eps_s, delta_s)

        def score(ch: dict[tuple[str, int], Structure]) -> float:
            return float(sum(math.log(s.mean_mse()) for s in ch.values()))

        if score(z_chosen) < score(chosen):
            chosen, record = z_chosen, z_record
            accounting = (f"zCDP: rho={rho:.6g} from (epsilon, delta) by "
                          "epsilon = rho + 2 sqrt(rho ln(1/delta)), split equally over "
                          "structures; pure pieces count as epsilon^2/2-zCDP")
    return Plan(chosen, record, accounting, eps_s, delta_s)
