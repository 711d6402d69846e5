"""`dpfreq profile`: the ε-DP profile (frequency of frequencies) of an item column.

Mirrors :func:`dpfreq.profile.release_profile`; formatting only. The table shows ``t``, the
private fraction of the domain with count ``t``, the error bound that applies to the row and the
estimate in items; long profiles are compressed into ranges of ``t`` (``--rows``).
"""

from __future__ import annotations

import math
from typing import Any

import click
import numpy as np

from dpfreq.cli._common import (
    emit_release,
    engine_option,
    output_options,
    seed_option,
    warn_if_seeded,
)
from dpfreq.errors import DataError

__all__ = ["CountType", "command", "format_header", "format_table", "row_ranges"]

_NORM_WORD = {"1": "ℓ1", "2": "ℓ2", "inf": "ℓ∞"}


class CountType(click.ParamType):
    """A non-negative integer written as ``2000000``, ``2_000_000`` or ``2e6``."""

    name = "integer"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value).strip().replace("_", "")
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number != math.floor(number) or abs(number) >= 2**63:
            self.fail(f"must be an integer (e.g. 2000000 or 2e6); got {value!r}", param, ctx)
        return int(number)


COUNT = CountType()


def row_ranges(max_count: int, rows: int | None) -> list[tuple[int, int]]:
    """Inclusive ranges ``[lo, hi]`` of ``t`` shown as table rows.

    ``t = 0..rows`` one per row, then ranges doubling in width up to ``n − 1``, then ``t = n``
    (the clamped count) on its own row. ``rows=None`` shows every ``t``.
    """
    n = max_count
    if rows is None or n <= rows + 1:
        return [(t, t) for t in range(n + 1)]
    out = [(t, t) for t in range(rows + 1)]
    lo, width = rows + 1, max(rows, 1)
    while lo <= n - 1:
        hi = min(lo + width - 1, n - 1)
        out.append((lo, hi))
        lo, width = hi + 1, 2 * width
    out.append((n, n))
    return out


def _row_bound(bound: float, norm: str, width: int) -> float:
    """Bound on the error of a sum of ``width`` entries given a bound on the whole error vector.

    Hölder: ``|Σ_{t∈R} (r − f)[t]| <= ‖r − f‖_p · |R|^(1 − 1/p)``; never above 1 (both sums
    are fractions in [0, 1]).
    """
    scale = {"1": 1.0, "2": math.sqrt(width), "inf": float(width)}[norm]
    return min(1.0, bound * scale)


def _label(lo: int, hi: int, max_count: int) -> str:
    if lo == hi == max_count and max_count >= 1:
        return f"{max_count}+"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def format_table(rel: Any, rows: int | None = 20, truth: Any = None) -> str:
    """The release as a text table: t, private fraction, row bound, items, (true fraction).

    Parameters
    ----------
    rel : ProfileRelease
        The release.
    rows : int or None
        Counts ``0..rows`` get a row each, larger counts are grouped (see :func:`row_ranges`);
        None lists every count.
    truth : array-like, optional
        The true profile, shown in a ``true`` column (simulations and demos only).
    """
    r = np.asarray(rel.value, dtype=np.float64)
    n, d = int(rel.max_count), int(rel.domain_size)
    bound = float(np.asarray(rel.error.value, dtype=np.float64).max())
    cum = np.concatenate([[0.0], np.cumsum(r)])
    f_cum = None
    if truth is not None:
        f_cum = np.concatenate([[0.0], np.cumsum(np.asarray(truth, dtype=np.float64))])
    header = ["t", "fraction", "± bound", "≈ items"] + (["true"] if f_cum is not None else [])
    table = [header]
    for lo, hi in row_ranges(n, rows):
        x = float(cum[hi + 1] - cum[lo])
        row = [_label(lo, hi, n), f"{x:.5f}", f"±{_row_bound(bound, rel.norm, hi - lo + 1):.5f}",
               f"{x * d:,.0f}"]
        if f_cum is not None:
            row.append(f"{float(f_cum[hi + 1] - f_cum[lo]):.5f}")
        table.append(row)
    width = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, width, strict=True))
                     for row in table)


def format_header(rel: Any, what: str) -> list[str]:
    """Comment lines (``# ...``) stating ε, the mechanism, d, n, B and the error statement."""
    params = rel.mechanism_params
    word = _NORM_WORD.get(rel.norm, rel.norm)
    return [
        f"# dpfreq profile of {what} (engine {params.get('engine', '?')})",
        f"# epsilon={rel.epsilon:g}, delta={rel.delta:g} (pure ε-DP); mechanism {rel.mechanism}: "
        f"exact discrete Laplace noise on each of d={rel.domain_size:,} domain items, counts "
        f"clamped at n={rel.max_count}, B={rel.B}",
        "# unit of privacy: one row (occurrence) of one item; an item with k rows is protected "
        "at k·ε",
        f"# error: {rel.error.description}",
        f"# ± bound: error bound of each row (sum over its t) implied by the {word} bound, "
        f"holding simultaneously with probability ≥ {rel.error.confidence:.3g}; "
        f"t = {rel.max_count}+ counts items with {rel.max_count} or more rows",
    ]


def _memory_source(file: str, item: str) -> dict[str, Any]:
    """The item column of FILE as an in-memory mapping (read by DuckDB) for ``--engine memory``."""
    from dpfreq.engines import get_engine

    reader: Any = get_engine("duckdb")
    rel = reader.relation(file, "dpfreq profile")
    if item not in rel.columns:
        raise DataError(f"column {item!r} of dpfreq profile is not in {file!r}; available: "
                        f"{', '.join(rel.columns)}.")
    column = rel.project('"' + item.replace('"', '""') + '"').fetchnumpy()[item]
    if isinstance(column, np.ma.MaskedArray):
        if np.ma.getmaskarray(column).any():
            raise DataError(f"column {item!r} of dpfreq profile must be free of nulls; "
                            f"got null value(s) in {file!r}.")
        column = np.ma.getdata(column)
    return {item: np.asarray(column)}


def parse_rows(text: str) -> int | None:
    """``--rows``: an integer >= 0 or ``all``."""
    if text.strip().lower() == "all":
        return None
    try:
        rows = int(text)
    except ValueError:
        rows = -1
    if rows < 0:
        raise click.BadParameter(f"must be an integer >= 0 or 'all'; got {text!r}",
                                 param_hint="--rows")
    return rows


def rows_option(f: Any) -> Any:
    return click.option(
        "--rows", "rows_text", default="20", show_default=True, metavar="N|all",
        help="Show t = 0..N one per row and group larger t into ranges; 'all' lists every t.",
    )(f)


def profile_options(f: Any) -> Any:
    """``--norm``, ``--eta`` and ``--method`` (shared with ``dpfreq demo``)."""
    f = click.option("--method", type=click.Choice(["fft", "mle"]), default="fft",
                     show_default=True,
                     help="fft: Algorithms 2+3 of Wu & Pagh (with their bound); mle: EM.")(f)
    f = click.option("--eta", type=float, default=0.05, show_default=True,
                     help="Failure probability η of the error bound (holds w.p. 1 − 2η).")(f)
    return click.option("--norm", type=click.Choice(["1", "2", "inf"]), default="1",
                        show_default=True,
                        help="Norm the reconstruction optimizes and the bound refers to.")(f)


@click.command(name="profile")
@click.argument("file", type=click.Path())
@click.option("--item", required=True, help="Column naming the item (e.g. user) of each row.")
@click.option("--domain-size", type=COUNT, required=True,
              help="Public number d of potential items (never taken from the data).")
@click.option("--max-count", type=COUNT, required=True,
              help="Public count cap n: counts above n are clamped to n.")
@click.option("--epsilon", type=float, required=True, help="Privacy parameter ε (pure ε-DP).")
@profile_options
@rows_option
@engine_option
@output_options
@seed_option
def command(file: str, item: str, domain_size: int, max_count: int, epsilon: float, norm: str,
            eta: float, method: str, rows_text: str, engine: Any, json_out: str | None,
            plot_out: str | None, seed: int | None) -> None:
    """Private profile of the item column of FILE (CSV or Parquet file, or Parquet directory).

    The profile is the fraction of the d domain items occurring exactly t times, t = 0..n
    (items never seen count at t = 0). Prints the table with its error bound; --json and
    --plot write the release.
    """
    from dpfreq.profile import release_profile

    warn_if_seeded(seed)
    rows = parse_rows(rows_text)
    source: Any = file
    if engine == "memory":
        source = _memory_source(file, item)
    rel = release_profile(source, item=item, domain_size=domain_size, max_count=max_count,
                          epsilon=epsilon, eta=eta, norm=norm, method=method,
                          engine=engine if source is file else None, rng=seed)
    to_err = json_out == "-"
    for line in format_header(rel, f"column {item!r} in {file}"):
        click.echo(line, err=to_err)
    click.echo(format_table(rel, rows), err=to_err)
    emit_release(rel, json_out, plot_out)
