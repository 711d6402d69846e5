"""Composition: what sequences of releases cost under dpfreq's rules, against dp_accounting.

Prints, at δ = 1e-6 (one run, no timed asserts):

1. The issue's sequences of discrete Laplace releases (365 × ε₀ = 0.05, 100 × 0.1, 30 × 0.5):
   the sum (basic composition); the **adaptive filter** — the smallest total ε at which a
   ``"tight"`` accountant admits every release one after another
   (:func:`dpfreq.accounting.required_epsilon`, δ split half for the Rényi conversion); the
   **declared plan** — the certified ε of the batch fixed in advance
   (:func:`dpfreq.accounting.declared_epsilon`, exact PLD); and the baselines measured in the
   same run: Google's ``dp_accounting`` PLD accountant on the same discrete Laplace sequence
   (pessimistic estimate, its default grid) and its RDP accountant (randomized response with
   the same ε₀ — the discrete Laplace pair of sensitivity 1 — over its default orders).
2. Sequences of discrete Gaussian releases (scalar, sensitivity 1): declared plan against
   ``dp_accounting``'s PLD.
3. A month of the grouped and windows releases of ``benchmarks/bench_grouped.py`` (20
   campaigns, ``max_groups_per_item = 5``, ``unit="item"``): every day a grouped total-reach
   release and a cumulative-reach release with δ > 0, every week a grouped profile; each
   release's charge is what its plan says it spends (``plan_*(...)``, the zCDP loss when the
   plan composes in zCDP).
4. The cost of the bookkeeping: 365 spends through an in-memory accountant and through a
   SQLite ledger (ratio against the basic rule in the same run).

Usage: python benchmarks/bench_accounting.py [--quick]   (quick: skips the ledger timing)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpfreq.accounting import (
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    PrivacyLoss,
    PureDP,
    declared_epsilon,
    required_epsilon,
    stated_loss,
)
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.ledger import Ledger

DELTA = Fraction(1, 10**6)
SEQUENCES = [(365, "0.05"), (100, "0.1"), (30, "0.5")]
TARGETS = {(365, "0.05"): (5.2, 4.65), (100, "0.1"): (5.5, 4.85), (30, "0.5"): (None, 14.0)}


def table(rows: list[tuple[Any, ...]], header: tuple[str, ...]) -> None:
    cells = [header] + [tuple(str(c) for c in row) for row in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, width, strict=True)))
    print()


def _dp_accounting() -> Any:
    try:
        import dp_accounting
        from dp_accounting.pld import privacy_loss_distribution
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError:
        return None
    return dp_accounting, privacy_loss_distribution, rdp_privacy_accountant


def baseline_laplace(k: int, eps: float) -> tuple[float | None, float | None]:
    """dp_accounting: PLD of k discrete Laplace (sensitivity 1), RDP of k randomized responses."""
    lib = _dp_accounting()
    if lib is None:
        return None, None
    dpa, pld_mod, rdp_mod = lib
    pld = pld_mod.from_discrete_laplace_mechanism(eps, sensitivity=1).self_compose(k)
    noise = 2 / (1 + pow(2.718281828459045, eps))  # RR(ε) with two buckets
    rdp = rdp_mod.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    rdp.compose(dpa.SelfComposedDpEvent(dpa.RandomizedResponseDpEvent(noise, 2), k))
    return pld.get_epsilon_for_delta(float(DELTA)), rdp.get_epsilon(float(DELTA))


def laplace_rows() -> list[tuple[Any, ...]]:
    rows = []
    for k, e in SEQUENCES:
        t0 = time.perf_counter()
        losses: list[PrivacyLoss] = [DiscreteLaplace(Fraction(e), 1)] * k
        adaptive = required_epsilon(losses, DELTA)
        plan, _ = declared_epsilon(Composed(tuple(losses)), DELTA)
        seconds = time.perf_counter() - t0
        pld, rdp = baseline_laplace(k, float(e))
        target_f, target_p = TARGETS[(k, e)]
        rows.append((f"{k} x DLap eps0={e}", f"{k * float(e):.4g}",
                     f"{float(adaptive):.4f}" if adaptive else "-",
                     "report" if target_f is None else f"<= {target_f}",
                     f"{float(plan):.4f}" if plan else "-", f"<= {target_p}",
                     "-" if pld is None else f"{pld:.4f}",
                     "-" if rdp is None else f"{rdp:.4f}",
                     "-" if pld is None or plan is None else f"{float(plan) / pld:.4f}",
                     "-" if rdp is None or adaptive is None else f"{float(adaptive) / rdp:.4f}",
                     f"{seconds:.2f}"))
    return rows


def gaussian_rows() -> list[tuple[Any, ...]]:
    rows = []
    lib = _dp_accounting()
    for k, sigma2 in [(30, 100), (100, 400), (365, 2000)]:
        t0 = time.perf_counter()
        loss = DiscreteGaussian(Fraction(sigma2), Fraction(1), True)
        plan, how = declared_epsilon(Composed((loss,) * k), DELTA)
        adaptive = required_epsilon([loss] * k, DELTA)
        seconds = time.perf_counter() - t0
        ref = None
        if lib is not None:
            ref = lib[1].from_discrete_gaussian_mechanism(sigma2 ** 0.5, sensitivity=1) \
                .self_compose(k).get_epsilon_for_delta(float(DELTA))
        rows.append((f"{k} x DGauss sigma2={sigma2}", f"{float(plan):.4f}" if plan else "-",
                     how, f"{float(adaptive):.4f}" if adaptive else "-",
                     "-" if ref is None else f"{ref:.4f}",
                     "-" if ref is None or plan is None else f"{float(plan) / ref:.4f}",
                     f"{seconds:.2f}"))
    return rows


def month_charges() -> list[tuple[str, float, float, PrivacyLoss]]:
    """(label, ε, δ, loss) of a month of the bench_grouped releases, as their plans state."""
    from dpfreq.profile import plan_profile
    from dpfreq.windows import plan_window_counts

    campaigns = [f"campaign_{k}" for k in range(20)]
    reach = plan_window_counts(horizon=30, epsilon=0.05, unit="item", k_values=[1],
                               windows=["total"], group="campaign", groups=campaigns,
                               max_groups_per_item=5)
    cumulative = plan_window_counts(horizon=30, epsilon=0.05, delta=1e-8, unit="item",
                                    k_values=[1], windows=["cumulative"])
    profile = plan_profile(domain_size=10**6, max_count=20, epsilon=0.25, unit="item",
                           group="campaign", groups=campaigns, max_groups_per_item=5)
    cum_loss = cumulative.privacy_loss or stated_loss(Fraction("0.05"), Fraction("1e-8"))
    out: list[tuple[str, float, float, PrivacyLoss]] = []
    for day in range(30):
        out.append((f"day {day + 1}: grouped reach", reach.epsilon, 0.0,
                    PureDP(Fraction("0.05"))))
        out.append((f"day {day + 1}: cumulative reach", 0.05, 1e-8, cum_loss))
        if day % 7 == 6:
            out.append((f"week {day // 7 + 1}: grouped profile", profile.epsilon, 0.0,
                        PureDP(Fraction("0.25"))))
    return out


def month_rows() -> list[tuple[Any, ...]]:
    charges = month_charges()
    t0 = time.perf_counter()
    total_eps = sum(c[1] for c in charges)
    total_delta = sum(c[2] for c in charges)
    losses = [c[3] for c in charges]
    adaptive = required_epsilon(losses, DELTA)
    plan, how = declared_epsilon(Composed(tuple(losses)), DELTA)
    acct = Accountant(epsilon=float(adaptive or 1000), delta=float(DELTA))
    for label, e, d, loss in charges:
        acct.spend(e, d, label=label, unit="item", loss=loss)
    s = acct.spending()
    seconds = time.perf_counter() - t0
    kinds = sorted({type(x).__name__ for x in losses})
    return [(f"{len(charges)} releases ({', '.join(kinds)})", f"{total_eps:.4g}",
             f"{total_delta:.2g}", f"{float(adaptive):.4f}" if adaptive else "-",
             f"{float(plan):.4f} ({how})" if plan else "-", s.binding,
             f"{total_eps / float(adaptive):.2f}" if adaptive else "-", f"{seconds:.2f}")]


def timing_rows() -> list[tuple[Any, ...]]:
    rows = []
    for kind in ("accountant", "ledger"):
        times = {}
        for composition in ("basic", "tight"):
            with tempfile.TemporaryDirectory() as tmp:
                if kind == "ledger":
                    acct: Any = Ledger.create(Path(tmp) / "l.db", PrivacyBudget(20.0, 1e-6),
                                              composition=composition)
                else:
                    acct = Accountant(epsilon=20.0, delta=1e-6, composition=composition)
                t0 = time.perf_counter()
                for i in range(365):
                    acct.spend(0.05, label=f"day {i}", unit="item")
                times[composition] = time.perf_counter() - t0
        rows.append((kind, 365, f"{times['basic']:.3f}", f"{times['tight']:.3f}",
                     f"{times['tight'] / times['basic']:.2f}",
                     f"{1e3 * times['tight'] / 365:.2f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the ledger timing")
    args = parser.parse_args()
    print(f"# bench_accounting  (uptime: {os.popen('uptime').read().strip()})\n")
    print("## 1. Discrete Laplace sequences at delta = 1e-6 (epsilon; ratios: dpfreq / "
          "dp_accounting)")
    table(laplace_rows(), ("sequence", "sum", "filter", "target", "declared", "target",
                           "dpa PLD", "dpa RDP", "declared/PLD", "filter/RDP", "s"))
    print("## 2. Discrete Gaussian sequences (scalar, sensitivity 1) at delta = 1e-6")
    table(gaussian_rows(), ("sequence", "declared", "by", "filter", "dpa PLD", "declared/PLD",
                            "s"))
    print("## 3. A month of the grouped/windows releases of bench_grouped (unit=item) at "
          "delta = 1e-6")
    table(month_rows(), ("month", "sum eps", "sum delta", "filter", "declared", "binds",
                         "sum/filter", "s"))
    if not args.quick:
        print("## 4. Bookkeeping: 365 spends of 0.05 (seconds; tight / basic in this run)")
        table(timing_rows(), ("accountant", "spends", "basic s", "tight s", "tight/basic",
                              "ms per spend"))


if __name__ == "__main__":
    main()
