"""`dpfreq demo`: the main job end to end on a synthetic ad-impression log.

Writes ``OUT/impressions.parquet`` (:func:`dpfreq.profile.datasets.write_impressions`), releases
the ε-DP profile of the public domain of potential users through the DuckDB engine
(:func:`dpfreq.profile.release_profile`), prints it with its error bound beside the true
profile, and writes ``OUT/profile.json`` and ``OUT/profile.png``. At the demo's scale the
private and true profiles coincide, so the demo also releases the same data at a much smaller
ε (``--compare-epsilon``, a 100 times stronger guarantee by default) and shows it beside the
first: what privacy costs, in users misplaced and in the figure's third panel
(``OUT/profile-compare.json``). Formatting only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpfreq._validate import check_confidence, check_epsilon, check_int
from dpfreq.cli._common import (
    COUNT,
    POSITIVE,
    emit_release,
    engine_option,
    seed_option,
    warn_if_seeded,
)
from dpfreq.cli.output import warn
from dpfreq.cli.profile import (
    format_header,
    format_table,
    parse_rows,
    profile_options,
    vacuous_warning,
)
from dpfreq.cli.profile import rows_option as _rows_option
from dpfreq.profile.plan import choose_method

__all__ = ["command", "comparison_figure"]


def comparison_figure(rel: Any, truth: Any, costly: Any = None) -> Any:
    """The private profile beside the true one (linear and log scale) and, given ``costly`` (the
    same data released at a smaller ε), a third panel showing what that stronger privacy
    costs."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    n = 2 if costly is None else 3
    _fig, axes = plt.subplots(1, n, figsize=(6.5 * n, 4.8))
    rel.plot(axes[0], truth=truth)
    rel.plot(axes[1], truth=truth, log=True)
    axes[1].set_title(f"same, log scale (ε={rel.epsilon:g}: private ≈ true)")
    axes[1].legend(loc="lower left")
    if costly is not None:
        costly.plot(axes[2], truth=truth, log=True)
        axes[2].set_ylim(axes[1].get_ylim())
        axes[2].set_title(f"what privacy costs: the same users at ε={costly.epsilon:g}\n"
                          f"({rel.epsilon / costly.epsilon:g}× stronger guarantee, wider "
                          "intervals)", fontsize="medium")
        axes[2].legend(loc="lower left")
    return axes[0]


def _errors(rel: Any, truth: Any) -> tuple[float, float]:
    """ℓ1 error against the truth and the largest per-class half-width (fractions of d)."""
    r = np.asarray(rel.value, dtype=np.float64)
    half = np.max(np.asarray(rel.error.upper) - np.asarray(rel.error.lower)) / 2
    return float(np.abs(r - truth).sum()), float(half)


@click.command(name="demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="demo-out",
              show_default=True, help="Output directory (created if needed).")
@click.option("--users", type=POSITIVE, default=1_000_000, show_default=True,
              help="Users reached in the synthetic log.")
@click.option("--domain-size", type=COUNT, default=None,
              help="Public number of potential users d  [default: 2 × --users].")
@click.option("--max-count", type=COUNT, default=50, show_default=True,
              help="Public count cap n (impressions per user above n are clamped).")
@click.option("--epsilon", type=float, default=1.0, show_default=True,
              help="Privacy parameter ε of the release (a demo default; printed).")
@click.option("--compare-epsilon", type=float, default=None,
              help="ε of the second release of the same data, shown beside the first to show "
                   "what privacy costs  [default: --epsilon / 100; printed].")
@click.option("--unit", type=click.Choice(["item", "event"]), default="item", show_default=True,
              help="Unit of privacy (a demo default; printed): item = one user with all their "
                   "impressions.")
@profile_options
@_rows_option
@engine_option
@click.option("--data-seed", type=COUNT, default=0, show_default=True,
              help="Seed of the synthetic data (the data are not private; the noise is "
                   "seeded only by --seed).")
@seed_option
def command(out_dir: str, users: int, domain_size: int | None, max_count: int, epsilon: float,
            compare_epsilon: float | None, unit: str, norm: str, confidence: float, method: str,
            rows_text: str, engine: Any, data_seed: int, seed: int | None) -> None:
    """Private profile of a synthetic ad-impression log, beside the true profile.

    Writes OUT/impressions.parquet (one row per impression: user_id, timestamp, campaign),
    releases the fraction of the d potential users reached exactly t times under ε-DP through
    the DuckDB engine, and writes OUT/profile.json and OUT/profile.png. Then releases the
    same data at a much smaller ε (--compare-epsilon) to show what privacy costs: the error in
    users and a third panel of the figure (OUT/profile-compare.json).
    """
    from dpfreq.plotting import save_figure
    from dpfreq.profile import release_profile
    from dpfreq.profile.datasets import true_profile

    warn_if_seeded(seed)
    rows = parse_rows(rows_text)
    # fail before spending seconds on the data (release_profile checks them again)
    check_epsilon(epsilon, "epsilon")
    small_eps = epsilon / 100 if compare_epsilon is None else compare_epsilon
    check_epsilon(small_eps, "--compare-epsilon")
    check_int(max_count, "max_count", minimum=0)
    check_confidence(confidence, "confidence")
    choose_method(method, unit)
    out = Path(out_dir)
    d = 2 * users if domain_size is None else domain_size

    log, parquet = _write_data(out, users, d, data_seed)

    t1 = time.perf_counter()
    source: Any = str(parquet)
    if engine == "memory":
        source = {"user_id": log.user}
    # one generator for both releases: with --seed each gets its own stretch of the stream
    rng = None if seed is None else np.random.default_rng(seed)

    def release(eps: float) -> Any:
        return release_profile(source, item="user_id", domain_size=d, max_count=max_count,
                               epsilon=eps, unit=unit, method=method, confidence=confidence,
                               norm=norm, engine=None if engine == "memory" else engine,
                               rng=rng)

    rel = release(epsilon)
    costly = release(small_eps)
    click.echo(f"released the profile at epsilon {epsilon:g} and {small_eps:g} in "
               f"{time.perf_counter() - t1:.1f} s", err=True)

    # the counts of the users reached (never a d-length array: d may be far beyond memory)
    truth = true_profile(np.unique(log.user, return_counts=True)[1], d, max_count)
    source_kind = click.get_current_context().get_parameter_source("epsilon")
    chosen = ("the demo's default; choose it with --epsilon"
              if source_kind == click.core.ParameterSource.DEFAULT else "from --epsilon")
    click.echo(f"# dpfreq demo: {users:,} users reached out of d = {d:,} potential users; "
               f"epsilon = {epsilon:g} ({chosen})")
    for line in format_header(rel, f"column 'user_id' in {parquet}"):
        click.echo(line)
    click.echo(format_table(rel, rows, truth=truth))

    warning = vacuous_warning(rel)
    if warning is not None:
        warn(warning)
    _print_truth_check(rel, truth, d)
    _print_cost(rel, costly, truth, d, compare_epsilon is None)
    click.echo("# the 'true' column and the comparison are for this synthetic demo only: "
               "publishing the true profile would void the privacy guarantee")

    emit_release(rel, str(out / "profile.json"), None)
    emit_release(costly, str(out / "profile-compare.json"), None)
    png = out / "profile.png"
    save_figure(comparison_figure(rel, truth, costly), png)
    click.echo(f"wrote {png}", err=True)


def _write_data(out: Path, users: int, d: int, data_seed: int) -> tuple[Any, Path]:
    """Generate the synthetic impression log and write it to OUT/impressions.parquet."""
    from dpfreq.profile.datasets import make_impressions, write_impressions

    t0 = time.perf_counter()
    log = make_impressions(users, domain_size=d, rng=data_seed)
    parquet = write_impressions(out, log)
    click.echo(f"wrote {parquet}: {len(log):,} impressions of {users:,} users over 7 days "
               f"(synthetic, --data-seed {data_seed}) in {time.perf_counter() - t0:.1f} s",
               err=True)
    return log, parquet


def _print_truth_check(rel: Any, truth: Any, d: int) -> None:
    """The release against the true profile: ℓ1 error, intervals and band that hold."""
    r = np.asarray(rel.value, dtype=np.float64)
    l1 = float(np.abs(r - truth).sum())
    inside = int(np.sum((rel.error.lower <= truth + 1e-12) & (truth <= rel.error.upper + 1e-12)))
    band = bool(np.all((rel.error.band_lower <= truth + 1e-12)
                       & (truth <= rel.error.band_upper + 1e-12)))
    conf = float(rel.error.confidence or 0.0)
    click.echo(f"# true vs private: ℓ1 error {l1:.6f} ({l1 * d:,.0f} users misplaced); the "
               f"ℓ1 bound was {rel.l1_bound:.6f} (probability ≥ {conf:g})")
    click.echo(f"# {inside} of {r.size} per-class intervals contain the true value (each holds "
               f"with probability ≥ {conf:g}); the simultaneous band "
               f"{'holds' if band else 'is EXCEEDED (a probability ≤ ' + f'{1 - conf:g} event)'}")


def _print_cost(rel: Any, costly: Any, truth: Any, d: int, default: bool) -> None:
    """What the stronger guarantee of the second release costs, in users."""
    l1, half = _errors(rel, truth)
    l1_small, half_small = _errors(costly, truth)
    said = "--epsilon / 100, the demo's default" if default else "from --compare-epsilon"
    click.echo(f"# what privacy costs: the same data released at epsilon = {costly.epsilon:g} "
               f"({said}; {rel.epsilon / costly.epsilon:g}× stronger guarantee) misplaces "
               f"{l1_small * d:,.0f} users (ℓ1 error {l1_small:.6f}) against {l1 * d:,.0f} at "
               f"epsilon = {rel.epsilon:g}; the widest per-class interval is ±{half_small * d:,.0f}"
               f" users against ±{half * d:,.0f} (third panel of the figure)")
