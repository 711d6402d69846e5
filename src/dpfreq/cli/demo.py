"""`dpfreq demo`: the main job end to end on a synthetic ad-impression log.

Writes ``OUT/impressions.parquet`` (:func:`dpfreq.profile.datasets.write_impressions`), releases
the ε-DP profile of the public domain of potential users through the DuckDB engine
(:func:`dpfreq.profile.release_profile`), prints it with its error bound beside the true
profile, and writes ``OUT/profile.json`` and ``OUT/profile.png``. Formatting only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpfreq._validate import check_confidence, check_epsilon, check_int
from dpfreq.cli._common import COUNT, emit_release, engine_option, seed_option, warn_if_seeded
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


def comparison_figure(rel: Any, truth: Any) -> Any:
    """Two panels (linear and log scale) of the private profile beside the true one."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    _fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, 4.5))
    rel.plot(left, truth=truth)
    rel.plot(right, truth=truth, log=True)
    right.set_title("same, log scale")
    right.legend(loc="lower left")
    return left


@click.command(name="demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="demo-out",
              show_default=True, help="Output directory (created if needed).")
@click.option("--users", type=COUNT, default=1_000_000, show_default=True,
              help="Users reached in the synthetic log.")
@click.option("--domain-size", type=COUNT, default=None,
              help="Public number of potential users d  [default: 2 × --users].")
@click.option("--max-count", type=COUNT, default=50, show_default=True,
              help="Public count cap n (impressions per user above n are clamped).")
@click.option("--epsilon", type=float, default=1.0, show_default=True,
              help="Privacy parameter ε of the release (a demo default; printed).")
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
            unit: str, norm: str, confidence: float, method: str, rows_text: str, engine: Any,
            data_seed: int, seed: int | None) -> None:
    """Private profile of a synthetic ad-impression log, beside the true profile.

    Writes OUT/impressions.parquet (one row per impression: user_id, timestamp, campaign),
    releases the fraction of the d potential users reached exactly t times under ε-DP through
    the DuckDB engine, and writes OUT/profile.json and OUT/profile.png.
    """
    from dpfreq.plotting import save_figure
    from dpfreq.profile import release_profile
    from dpfreq.profile.datasets import make_impressions, true_profile, write_impressions

    warn_if_seeded(seed)
    rows = parse_rows(rows_text)
    # fail before spending seconds on the data (release_profile checks them again)
    check_epsilon(epsilon, "epsilon", "release_profile")
    check_int(max_count, "max_count", "release_profile", minimum=0)
    check_confidence(confidence, "confidence", "release_profile")
    choose_method(method, unit, "release_profile")
    out = Path(out_dir)
    d = 2 * users if domain_size is None else domain_size

    t0 = time.perf_counter()
    log = make_impressions(users, domain_size=d, rng=data_seed)
    parquet = write_impressions(out, log)
    click.echo(f"wrote {parquet}: {len(log):,} impressions of {users:,} users over 7 days "
               f"(synthetic, --data-seed {data_seed}) in {time.perf_counter() - t0:.1f} s",
               err=True)

    t1 = time.perf_counter()
    source: Any = str(parquet)
    if engine == "memory":
        source = {"user_id": log.user}
    rel = release_profile(source, item="user_id", domain_size=d, max_count=max_count,
                          epsilon=epsilon, unit=unit, method=method, confidence=confidence,
                          norm=norm,
                          engine=None if engine == "memory" else engine, rng=seed)
    click.echo(f"released the profile in {time.perf_counter() - t1:.1f} s", err=True)

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
        click.echo(warning, err=True)
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
    click.echo("# the 'true' column and the comparison are for this synthetic demo only: "
               "publishing the true profile would void the privacy guarantee")

    emit_release(rel, str(out / "profile.json"), None)
    png = out / "profile.png"
    save_figure(comparison_figure(rel, truth), png)
    click.echo(f"wrote {png}", err=True)
