"""`dpfreq reach`: private reach and k+ reach per period, cumulative and over rolling windows.

Mirrors :func:`dpfreq.windows.release_window_counts`; formatting only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq._validate import message
from dpfreq.cli.grouped import emit_grouped_reach, group_options
from dpfreq.errors import ParameterError
from dpfreq.windows import WindowCountsRelease, release_window_counts

__all__ = ["command"]


def _period_labels(rel: WindowCountsRelease) -> list[str]:
    axis = rel.time_axis
    ts = range(1, rel.horizon + 1)
    if axis.get("kind") != "timestamp":
        return [str(t) for t in ts]
    start = np.datetime64(axis["start"], "us")
    step = np.timedelta64(int(axis["period_us"]), "us")
    day = axis["period_us"] % 86_400_000_000 == 0
    return [str((start + (t - 1) * step).astype("datetime64[D]" if day else "datetime64[s]"))
            for t in ts]


def _predicted(rec: dict[str, Any]) -> float:
    """Predicted RMSE of the chosen structure (the smallest of the candidates)."""
    return float(min(rec["predicted_rmse"].values()))


def _table(rel: WindowCountsRelease) -> str:
    cols: list[tuple[str, list[str]]] = [("t", [str(t) for t in range(1, rel.horizon + 1)]),
                                         ("period", _period_labels(rel))]
    widths = [w for w in rel.windows if not isinstance(w, str)]
    for k in rel.k_values:
        if "cumulative" in rel.windows:
            a = rel.cumulative_curve(k)
            cols.append((f"cum {k}+", [f"{e:.0f} ±{h - e:.0f}" for e, h in
                                       zip(a.estimate, a.upper, strict=True)]))
        for w in widths:
            a = rel.fixed_curve(k, width=w)
            cols.append((f"last{w} {k}+", [f"{e:.0f} ±{h - e:.0f}" for e, h in
                                           zip(a.estimate, a.upper, strict=True)]))
    size = [max(len(name), *(len(v) for v in vals)) for name, vals in cols]
    lines = ["  ".join(name.rjust(s) for (name, _), s in zip(cols, size, strict=True))]
    for i in range(rel.horizon):
        lines.append("  ".join(vals[i].rjust(s) for (_, vals), s in zip(cols, size, strict=True)))
    return "\n".join(lines)


@click.command(name="reach")
@click.argument("file", type=shared.INPUT_FILE)
@click.option("--item", required=True, help="Column naming the item (user) of each event.")
@click.option("--time", "time_col", required=True, help="Column with the event time.")
@click.option("--horizon", type=shared.POSITIVE, default=None,
              help="Public number of periods T when times are integer periods 1..T.")
@click.option("--start", default=None, help="Public start of the time range (date/timestamp).")
@click.option("--end", default=None, help="Public end of the time range (date/timestamp).")
@click.option("--period", default=None, help="Public period length, e.g. 1d, 6h, 30min.")
@click.option("--epsilon", type=float, required=True, help="Total privacy budget ε.")
@click.option("--delta", type=float, default=0.0, show_default=True,
              help="δ > 0: (ε, δ)-DP via advanced composition or zCDP (discrete Gaussian), "
                   "whichever predicts less error.")
@click.option("--k", "k_text", default="1", show_default=True,
              help="Comma-separated k values (k+ reach; 1 = reach).")
@click.option("--window", "window", type=shared.POSITIVE, default=None,
              help="Also release rolling windows of this many periods.")
@click.option("--all-windows", is_flag=True, default=False,
              help="Also release every window [t1, t2] (answerable later from --save).")
@click.option("--unit", type=click.Choice(["event", "item"]), required=True,
              help="Unit of privacy: one event, or one item with all its events (no default).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the printed intervals.")
@click.option("--singleton", is_flag=True, default=False,
              help="Declare at most one event per period (enables time compression at item "
                   "level; checked against the data).")
@click.option("--out-of-range", type=click.Choice(["error", "drop"]), default="error",
              show_default=True, help="Events outside [start, end].")
@shared.output_path_option("--save", "save_path",
                           help="Write the release with its SECRET state (key, exact log) for "
                                "later queries.")
@shared.engine_option
@shared.output_options
@shared.seed_option
@shared.ledger_option
@group_options
def command(file: str, item: str, time_col: str, horizon: int | None, start: str | None,
            end: str | None, period: str | None, epsilon: float, delta: float, k_text: str,
            window: int | None, all_windows: bool, unit: str, confidence: float,
            singleton: bool,
            out_of_range: str,
            save_path: str | None, engine: Any, json_out: str | None,
            plot_out: str | None, seed: int | None, accountant: Any = None,
            group: str | None = None, max_groups_per_item: int | None = None,
            groups_file: str | None = None) -> None:
    """Private cumulative reach and rolling-window k+ reach of an event log FILE.

    Prints one row per period with the estimate and its per-answer interval half-width.
    """
    shared.warn_if_seeded(seed)
    if save_path is not None and not Path(save_path).resolve().parent.is_dir():
        raise ParameterError(message("--save", "dpfreq reach", "a file in an existing "
                                     "directory (checked before anything is spent)", save_path))
    ks = shared.parse_int_list(k_text, "--k")
    windows: list[Any] = ["cumulative"]
    if window is not None:
        windows.append(window)
    if all_windows:
        windows.append("all")
    kwargs: dict[str, Any] = {"item": item, "time": time_col, "horizon": horizon, "start": start,
                                  "end": end, "period": period, "epsilon": epsilon, "delta": delta,
                                  "k_values": ks, "unit": unit, "windows": windows,
                                  "confidence": confidence,
                                  "out_of_range": out_of_range, "rng": seed, "singleton": singleton}
    if group is not None or max_groups_per_item is not None or groups_file is not None:
        kwargs.update(group=group, max_groups_per_item=max_groups_per_item, groups=groups_file)
    rel = release_window_counts(file, engine=engine, accountant=accountant, **kwargs)
    if group is not None:  # one table for all groups (dpfreq.cli.grouped)
        return emit_grouped_reach(rel, json_out, plot_out, save_path)
    shared.emit_release(rel, json_out, plot_out)  # files first: `| head` loses nothing
    if save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains the noise key and exact summaries of "
                   "the log)", err=True)
    if json_out != "-":  # with --json - the output is the JSON alone
        click.echo(f"# dpfreq reach: unit={unit}, epsilon={epsilon:g}, delta={delta:g}, "
                   f"mechanism={rel.mechanism}, T={rel.horizon} periods; "
                   f"± = {confidence:.0%} per-answer interval half-width")
        for name, rec in rel.mechanism_params["strategies"].items():
            click.echo(f"# {name}: strategy {rec['strategy']}, {rec['noise']} noise "
                       f"(predicted RMSE {_predicted(rec):.1f})")
        click.echo(_table(rel))
