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

from dpfreq._validate import check_epsilon, check_int, check_open_unit
from dpfreq.cli._common import emit_release, engine_option, seed_option, warn_if_seeded
from dpfreq.cli.profile import COUNT, format_header, format_table, parse_rows, profile_options
from dpfreq.cli.profile import rows_option as _rows_option

__all__ = ["command", "comparison_figure"]

_NORM_WORD = {"1": "ℓ1", "2": "ℓ2", "inf": "ℓ∞"}


def comparison_figure(rel: Any, truth: Any) -> Any:
    """Two panels (linear and log scale) of the private profile beside the true one."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    _fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, 4.5))
    rel.plot(left, truth=truth)
    rel.plot(right, truth=truth)
    positive = np.asarray(truth, dtype=np.float64)
    positive = positive[positive > 0]
    right.set_yscale("log")
    if positive.size:
        right.set_ylim(bottom=0.5 * float(positive.min()), top=1.5)
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
@profile_options
@_rows_option
@engine_option
@click.option("--data-seed", type=int, default=0, show_default=True,
              help="Seed of the synthetic data (the data are not private; the noise is "
                   "seeded only by --seed).")
@seed_option
def command(out_dir: str, users: int, domain_size: int | None, max_count: int, epsilon: float,
            norm: str, eta: float, method: str, rows_text: str, engine: Any, data_seed: int,
            seed: int | None) -> None:
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
    check_open_unit(eta, "eta", "release_profile")
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
                          epsilon=epsilon, eta=eta, norm=norm, method=method,
                          engine=None if engine == "memory" else engine, rng=seed)
    click.echo(f"released the profile in {time.perf_counter() - t1:.1f} s", err=True)

    truth = true_profile(log.counts(), d, max_count)
    source_kind = click.get_current_context().get_parameter_source("epsilon")
    chosen = ("the demo's default; choose it with --epsilon"
              if source_kind == click.core.ParameterSource.DEFAULT else "from --epsilon")
    click.echo(f"# dpfreq demo: {users:,} users reached out of d = {d:,} potential users; "
               f"epsilon = {epsilon:g} ({chosen})")
    for line in format_header(rel, f"column 'user_id' in {parquet}"):
        click.echo(line)
    click.echo(format_table(rel, rows, truth=truth))

    diff = np.asarray(rel.value, dtype=np.float64) - truth
    errors = {"1": float(np.abs(diff).sum()), "2": float(np.sqrt(np.square(diff).sum())),
              "inf": float(np.abs(diff).max())}
    bound = float(np.asarray(rel.error.value, dtype=np.float64).max())
    word = _NORM_WORD[rel.norm]
    held = "holds" if errors[rel.norm] <= bound else "EXCEEDED (a probability-η event)"
    click.echo(f"# true vs private: ℓ1 error {errors['1']:.5f}, ℓ2 error {errors['2']:.5f}, "
               f"ℓ∞ error {errors['inf']:.5f}")
    click.echo(f"# {word} error {errors[rel.norm]:.5f} vs bound {bound:.5f} (probability ≥ "
               f"{rel.error.confidence:.3g}): bound {held}")
    click.echo("# the 'true' column and the comparison are for this synthetic demo only: "
               "publishing the true profile would void the privacy guarantee")

    emit_release(rel, str(out / "profile.json"), None)
    png = out / "profile.png"
    save_figure(comparison_figure(rel, truth), png)
    click.echo(f"wrote {png}", err=True)
