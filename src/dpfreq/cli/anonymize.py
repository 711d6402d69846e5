"""`dpfreq anonymize`: a private anonymized histogram (PrivHist / Hay et al.) and its properties.

Mirrors :func:`dpfreq.anonymized.release_anonymized_histogram` followed by
:func:`dpfreq.anonymized.properties.estimate_properties` (post-processing, no extra budget);
formatting only.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpfreq.cli._common import engine_option, seed_option, warn_if_seeded
from dpfreq.errors import DataError

__all__ = ["command", "parse_split", "read_prevalence_csv"]

METHODS = ("auto", "privhist", "privhist-tuned", "hay")


def read_prevalence_csv(path: str) -> dict[int, int]:
    """Read a two-column CSV with header ``count,prevalence`` into ``{count: prevalence}``.

    Every row is a distinct count ``>= 1`` and the number of labels (``>= 1``) that occur
    exactly that often. Any other header, a non-integer cell, a repeated count or a row of the
    wrong width raises :class:`~dpfreq.errors.DataError` naming the file and line.
    """
    out: dict[int, int] = {}
    with Path(path).open(newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        header = next(rows, None)
        if header is None or [h.strip().lower() for h in header] != ["count", "prevalence"]:
            raise DataError(f"{path}: a --prevalence-csv file must start with the header "
                            f"'count,prevalence'; got {','.join(header or [])!r}.")
        for line, row in enumerate(rows, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != 2:
                raise DataError(f"{path}, line {line}: expected 2 columns (count,prevalence); "
                                f"got {len(row)}.")
            try:
                count, prevalence = (int(cell.strip()) for cell in row)
            except ValueError:
                raise DataError(f"{path}, line {line}: count and prevalence must be integers; "
                                f"got {','.join(row)!r}.") from None
            if count < 1 or prevalence < 1:
                raise DataError(f"{path}, line {line}: count and prevalence must be >= 1; "
                                f"got {count},{prevalence}.")
            if count in out:
                raise DataError(f"{path}, line {line}: count {count} is listed twice.")
            out[count] = prevalence
    return out


def parse_split(text: str | None) -> tuple[float, ...] | None:
    """Parse ``--split "e1,e2,e3"`` (absolute ε units) with a one-line error otherwise."""
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(f"must be comma-separated numbers e1,e2[,e3]; got {text!r}",
                                 param_hint="--split") from None


def _runs_desc(rel: Any) -> tuple[np.ndarray, np.ndarray]:
    counts = np.asarray(rel.counts, dtype=np.int64)
    prev = np.asarray(rel.prevalences, dtype=np.int64)
    keep = prev > 0
    return counts[keep][::-1], prev[keep][::-1]


def _frequency_list(rel: Any, top: int) -> list[str]:
    """Compact released frequency list: largest and smallest distinct counts with prevalences."""
    counts, prev = _runs_desc(rel)
    if counts.size == 0:
        return ["(empty histogram: no label released)"]
    ranks = np.cumsum(prev)
    rows = [(f"{c:d}", f"{p:d}", f"{r - p + 1:d}-{r:d}" if p > 1 else f"{r:d}")
            for c, p, r in zip(counts.tolist(), prev.tolist(), ranks.tolist(), strict=True)]
    hidden = len(rows) - 2 * top
    if hidden > 0:
        rows = rows[:top] + rows[-top:]
    table = [("count", "labels", "ranks"), *rows]
    width = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, width, strict=True)).rstrip()
             for row in table]
    if hidden > 0:
        lines.insert(top + 1, f"{'...'.rjust(width[0])}  ({hidden} more distinct counts)")
    return lines


def _property_lines(props: dict[str, Any]) -> list[str]:
    label = {
        "entropy": "entropy (nats, plug-in)",
        "miller-madow-entropy": "entropy (nats, Miller-Madow)",
        "support-size": "support size (observed labels)",
        "unseen-species": "unseen species in t*N more rows",
        "support-coverage": "support coverage of (1+t)*N rows",
        "power-sum-2": "collision probability P_2",
        "renyi-entropy-2": "Renyi entropy of order 2 (nats)",
        "distance-to-uniformity": "l1 distance to uniform on k",
    }
    width = max(len(v) for v in label.values())
    lines = []
    for key, est in props.items():
        bound = float(est.error.value)
        band = f"± {bound:.4g}" if np.isfinite(bound) else "(no finite bound)"
        lip = (f"L = {est.lipschitz_constant:.3g}" if np.isfinite(est.lipschitz_constant)
               else "non-linear")
        lines.append(f"{label.get(key, key).ljust(width)}  {float(est.value):12.6g}  {band}  "
                     f"({lip})")
    return lines


def _write_json(rel: Any, props: dict[str, Any], json_out: str) -> None:
    doc = {"release": rel.to_dict(), "properties": {k: v.to_dict() for k, v in props.items()}}
    text = json.dumps(doc, indent=2)
    if json_out == "-":
        click.echo(text)
    else:
        Path(json_out).write_text(text + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}", err=True)


@click.command(name="anonymize")
@click.argument("file", type=click.Path())
@click.option("--label", default=None,
              help="Column naming the label (password, word, node...) of each row; its anonymized "
                   "histogram is the multiset of per-label row counts.")
@click.option("--prevalence-csv", is_flag=True, default=False,
              help="FILE is already a histogram in prevalence form: a CSV with header "
                   "'count,prevalence' (one row per distinct count).")
@click.option("--epsilon", type=float, required=True, help="Privacy budget ε (pure ε-DP).")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="PrivHist with the paper's split, tuned PrivHist, Hay et al. sorted counts, "
                   "or auto (chosen from ε and public parameters only).")
@click.option("--split", "split_text", default=None, metavar="E1,E2[,E3]",
              help="Budget split in absolute ε units (ε1 for N, ε2 for the counts, ε3 for the "
                   "high-privacy branch); sum <= --epsilon. Not with --method auto.")
@click.option("--domain-size", type=int, default=None,
              help="Public number of possible labels k: adds the distance to uniformity.")
@click.option("--extrapolation-ratio", type=float, default=2.0, show_default=True,
              help="t of the unseen-species / support-coverage estimates.")
@click.option("--top", type=int, default=10, show_default=True,
              help="Show this many largest and smallest distinct released counts.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Write release + property estimates as JSON ('-' = stdout).")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
              help="Write a rank-frequency (log-log) PNG of the release to this file.")
@engine_option
@seed_option
def command(file: str, label: str | None, prevalence_csv: bool, epsilon: float, method: str,
            split_text: str | None, domain_size: int | None, extrapolation_ratio: float,
            top: int, json_out: str | None, plot_out: str | None, engine: Any,
            seed: int | None) -> None:
    """Release the anonymized histogram (frequency list) of FILE with ε-DP, and its properties.

    Neighbouring datasets differ in one row (one label's count moves by ±1). The output is
    the released histogram (counts × number of labels), N (a DP estimate of the number of rows)
    and plug-in estimates of entropy, support size, unseen species, ... computed from the
    release only (no further budget).
    """
    from dpfreq.anonymized import release_anonymized_histogram
    from dpfreq.anonymized.properties import estimate_properties

    if prevalence_csv:
        if label is not None:
            raise click.UsageError("--label does not apply to --prevalence-csv input.")
        if engine is not None:
            raise click.UsageError("--engine does not apply to --prevalence-csv input.")
    elif label is None:
        raise click.UsageError("give --label COL (or --prevalence-csv for a count,prevalence "
                               "file).")
    if top < 1:
        raise click.BadParameter(f"must be >= 1; got {top}", param_hint="--top")
    split = parse_split(split_text)
    warn_if_seeded(seed)
    if prevalence_csv:
        rel = release_anonymized_histogram(read_prevalence_csv(file), epsilon=epsilon,
                                           method=method, split=split, rng=seed)
    else:
        rel = release_anonymized_histogram(file, label=label, epsilon=epsilon, method=method,
                                           split=split, engine=engine, rng=seed)
    props = estimate_properties(rel, domain_size=domain_size,
                                extrapolation_ratio=extrapolation_ratio)
    if json_out != "-":
        err = rel.error
        conf = f" (confidence {err.confidence:g})" if err.confidence is not None else ""
        split = getattr(rel, "split", None)
        split_text = (", ".join(f"{float(s):.4g}" for s in split)
                      if isinstance(split, list | tuple) else str(split))
        released = int(np.asarray(rel.prevalences, dtype=np.int64).sum())
        click.echo(f"# dpfreq anonymize: epsilon={epsilon:g} (pure DP), method={rel.method}, "
                   f"regime={getattr(rel, 'regime', '?')}, split=({split_text})")
        click.echo(f"# N = {int(rel.n_estimate)} (DP estimate of the number of rows); "
                   f"{released} labels released")
        click.echo(f"# error ({err.kind}): {float(np.max(err.value)):.6g}{conf}: "
                   f"{err.description}")
        click.echo("# released frequency list, largest counts first:")
        for line in _frequency_list(rel, top):
            click.echo(line)
        click.echo(f"# property estimates (post-processing of the release, no extra budget; "
                   f"± = L x the release's sorted-l1 error {err.kind}):")
        for line in _property_lines(props):
            click.echo(line)
    if json_out is not None:
        _write_json(rel, props, json_out)
    if plot_out is not None:
        from dpfreq.plotting import save_figure

        save_figure(rel.plot(), plot_out)
        click.echo(f"wrote {plot_out}", err=True)
