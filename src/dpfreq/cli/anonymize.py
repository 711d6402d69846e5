"""`dpfreq anonymize`: a private anonymized histogram (PrivHist / Hay et al.) and its properties.

Mirrors :func:`dpfreq.anonymized.release_anonymized_histogram` followed by
:func:`dpfreq.anonymized.properties.estimate_properties` (post-processing, no extra budget);
formatting only.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq._validate import check_positive_float
from dpfreq.cli.grouped import (
    delta_option,
    echo_grouped_head,
    format_grouped_plan,
    group_options,
    noise_line,
    plan_group_options,
)
from dpfreq.cli.plan_options import target_option
from dpfreq.cli.row_rules import null_group_hint, null_group_option, rows_kept
from dpfreq.errors import DataError, debug_enabled

if TYPE_CHECKING:
    from dpfreq.budget import BudgetAccountant

__all__ = ["command", "parse_split", "plan_command", "read_prevalence_csv"]

METHODS = ("auto", "privhist", "privhist-tuned", "hay")


def read_prevalence_csv(path: str) -> dict[int, int]:
    """Read a two-column CSV with header ``count,prevalence`` into ``{count: prevalence}``.

    Every row is a distinct count in ``1..2**52`` and the number of items (in ``1..2**52``)
    that occur exactly that often. A UTF-8 byte-order mark (as Excel writes) is skipped. Any
    other header, a non-integer cell, a repeated count, a row of the wrong width, or a Parquet
    file raises :class:`~dpfreq.errors.DataError` naming the file and line (never the offending
    values).
    """
    out: dict[int, int] = {}
    with Path(path).open("rb") as raw:
        magic = raw.read(4)
    if magic == b"PAR1" or path.lower().endswith(".parquet"):
        raise DataError(f"{path}: --prevalence-csv reads a CSV file with header "
                        "'count,prevalence'; this is Parquet. For a Parquet table of rows use "
                        "--item COLUMN (and --count COLUMN for an item,count table).")
    try:
        return _read_prevalence_rows(path, out)
    except UnicodeDecodeError:
        raise DataError(f"{path}: --prevalence-csv must be UTF-8 text (a BOM is fine).") from None


def _at(path: str, line: int) -> str:
    """The file, and the line only in debug mode (row numbers are details of the data)."""
    return f"{path}, line {line}" if debug_enabled() else f"{path}, a row"


def _read_prevalence_rows(path: str, out: dict[int, int]) -> dict[int, int]:
    with Path(path).open(newline="", encoding="utf-8-sig") as handle:
        rows = csv.reader(handle)
        header = next(rows, None)
        if header is None or [h.strip().lower() for h in header] != ["count", "prevalence"]:
            got = ("no first line" if header is None else  # the line may be data: not shown
                   f"a first line of {len(header)} field(s) that is not that header")
            raise DataError(f"{path}: a --prevalence-csv file must start with the header "
                            f"'count,prevalence'; got {got}.")
        for line, row in enumerate(rows, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != 2:
                raise DataError(f"{_at(path, line)}: expected 2 columns (count,prevalence); "
                                f"got {len(row)}.")
            try:
                count, prevalence = (int(cell.strip()) for cell in row)
            except ValueError:
                raise DataError(f"{_at(path, line)}: count and prevalence must be "
                                "integers.") from None
            if not (1 <= count <= 2**52 and 1 <= prevalence <= 2**52):  # 2**52: exact totals
                raise DataError(f"{_at(path, line)}: count and prevalence must be integers in "
                                "1..2**52.")
            if count in out:
                raise DataError(f"{_at(path, line)}: a count is listed twice.")
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
        return ["(empty histogram: no item released)"]
    ranks = np.cumsum(prev)
    rows = [(f"{c:d}", f"{p:d}", f"{r - p + 1:d}-{r:d}" if p > 1 else f"{r:d}")
            for c, p, r in zip(counts.tolist(), prev.tolist(), ranks.tolist(), strict=True)]
    hidden = len(rows) - 2 * top
    if hidden > 0:
        rows = rows[:top] + rows[-top:]
    table = [("count", "items", "ranks"), *rows]
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
        "support-size": "support size (observed items)",
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
        if est.error.kind != "bound":
            band = "(no error statement)"
        elif not np.isfinite(bound) or est.error.vacuous:
            band = f"± {bound:.4g} (vacuous)"
        else:
            band = f"± {bound:.4g}"
        if est.clamped:
            band += " [clamped]"
        lip = (f"L = {est.lipschitz_constant:.3g}" if np.isfinite(est.lipschitz_constant)
               else "non-linear")
        lines.append(f"{label.get(key, key).ljust(width)}  {float(est.value):12.6g}  {band}  "
                     f"({lip})")
    return lines


#: what the ± of a property line is
_PLUS_MINUS = ("L x the release's sorted-l1 bound (for the entropy plus the cost of N for the "
               "true total), or at N = 0 the property's range over the totals in the total's "
               "interval; cut to the property's range (vacuous when that is all of it)")


def _header(rel: Any, epsilon: float) -> list[str]:
    err = rel.error
    split = ", ".join(f"{float(x):.4g}" for x in rel.split)
    lo, hi = rel.total_interval
    conf = f"{err.confidence:g}" if err.confidence is not None else "?"
    empty = rel.regime == "empty"
    prob = ">=" if empty else "about"
    how = ("(exact: N = 0, the empty histogram is released, and the error is the true total)"
           if empty else "(simulated from the known noise law around the release)")
    return [
        f"# dpfreq anonymize: epsilon={epsilon:g}, delta=0 (pure DP), mechanism={rel.mechanism} "
        f"(method={rel.method}, regime={rel.regime}, split=({split})), unit={rel.unit} "
        f"({rel.relation})",
        f"# N = {rel.n_estimate} (DP estimate of the total); the true total is in [{lo}, {hi}] "
        f"with probability >= {conf}; {rel.n_items} items released",
        f"# sorted-l1 error <= {float(err.value):.6g} with probability {prob} {conf} {how}"
        + ("; VACUOUS: no better than the trivial bound" if err.vacuous else ""),
        f"# items with count >= r: within ±{float(rel.items_at_least_band):.6g} of the released "
        f"number for every r at once, with probability {prob} "
        f"{float(rel.items_at_least_confidence):.3g}"
        + ("" if empty else " (the band is a whole number of items)"),
    ]


def _write_json(rel: Any, props: dict[str, Any], json_out: str | None,
                plot_out: str | None) -> None:
    doc = {"release": rel.to_dict(), "properties": {k: v.to_dict() for k, v in props.items()}}
    shared.emit_release(rel, json_out, plot_out, text=_json_text(doc))


def _json_text(doc: dict[str, Any]) -> str:
    """Strict JSON of a release and its properties: non-finite numbers are the strings
    ``"nan"``/``"inf"`` (:func:`~dpfreq.release.to_jsonable`), never the non-standard ``NaN``."""
    from dpfreq.release import to_jsonable

    return json.dumps(to_jsonable(doc), indent=2, allow_nan=False)


@click.command(name="anonymize")
@click.argument("file", type=shared.INPUT_FILE)
@click.option("--item", default=None,
              help="Column naming the item (password, word, node...) of each row; the "
                   "anonymized histogram is the multiset of per-item counts.")
@click.option("--count", "count_column", default=None,
              help="Column of non-negative integer counts: each row stands for that many "
                   "occurrences of its item (a pre-aggregated item,count table such as a "
                   "password frequency list). Without it every row is one occurrence.")
@click.option("--prevalence-csv", is_flag=True, default=False,
              help="FILE is already a histogram in prevalence form: a CSV with header "
                   "'count,prevalence' (one row per distinct count).")
@click.option("--epsilon", type=float, required=True,
              help="Privacy budget epsilon (pure DP), between 1e-6 and 1000.")
@click.option("--unit", type=click.Choice(["event", "item", "item_replace"]), required=True,
              help="Unit of privacy (no default): event (add/remove one row) is the one this "
                   "system supports; item and item_replace are refused with the reason.")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="PrivHist with the paper's split, tuned PrivHist, Hay et al. sorted counts, "
                   "or auto (chosen from epsilon only).")
@click.option("--split", "split_text", default=None, metavar="E1,E2[,E3]",
              help="Budget split in absolute epsilon units (E1 for the total, E2 for the counts, "
                   "E3 for the high-privacy branch); sum <= --epsilon. Not with --method auto.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the error statements.")
@click.option("--domain-size", type=shared.POSITIVE, default=None,
              help="Public number of possible items k: adds the distance to uniformity; refused "
                   "if the data holds more distinct items.")
@click.option("--extrapolation-ratio", type=float, default=2.0, show_default=True,
              help="t of the unseen-species / support-coverage estimates.")
@click.option("--top", type=shared.POSITIVE, default=10, show_default=True,
              help="Show this many largest and smallest distinct released counts.")
@group_options
@null_group_option
@delta_option
@shared.output_options
@shared.engine_option
@shared.seed_option
@shared.ledger_option
def command(file: str, item: str | None, count_column: str | None, prevalence_csv: bool,
            epsilon: float, unit: str, method: str, split_text: str | None, confidence: float,
            domain_size: int | None, extrapolation_ratio: float, top: int,
            json_out: str | None, plot_out: str | None, engine: Any, seed: int | None,
            accountant: BudgetAccountant | None, group: str | None = None,
            max_groups_per_item: int | None = None, groups_file: str | None = None,
            delta: float | None = None, null_group: str = "error") -> None:
    """Release the anonymized histogram (frequency list) of FILE with epsilon-DP, and its
    properties.

    Unit of privacy: --unit event, add or remove one occurrence of one item (neighbouring
    datasets differ in one row, or by one in one row's --count); item and item_replace are
    refused (no public count cap bounds one item's rows). The output is the released histogram
    (counts x number of items), N (a DP estimate of the total) with an exact interval for the
    true total, a sorted-l1 error bound, and plug-in estimates of entropy, support size, unseen
    species, ... computed from the release only (no further budget). With --group, one histogram
    per group (every group at the full epsilon: each row lies in one group) and its properties,
    the groups from --groups FILE or selected privately with --delta.
    """
    from dpfreq.anonymized import release_anonymized_histogram
    from dpfreq.anonymized.properties import estimate_properties

    if prevalence_csv:
        for given, flag in ((item, "--item"), (count_column, "--count"), (engine, "--engine")):
            if given is not None:
                raise click.UsageError(f"{flag} does not apply to --prevalence-csv input.")
    elif item is None:
        raise click.UsageError("give --item COLUMN (or --prevalence-csv for a count,prevalence "
                               "file).")
    split = parse_split(split_text)
    # the properties' own parameter, checked before the release spends anything
    check_positive_float(extrapolation_ratio, "extrapolation_ratio")
    shared.warn_if_seeded(seed)
    if not prevalence_csv:
        shared.warn_if_no_rows(file, "the frequency list")
    if any(v is not None for v in (group, groups_file, max_groups_per_item, delta)):
        if prevalence_csv:
            raise click.UsageError("--group and its options need a table of rows (--item), "
                                   "not --prevalence-csv.")
        source = rows_kept(file, item=item or "", group=group, null_group=null_group,
                           engine=engine)
        try:
            rel = release_anonymized_histogram(
                source, item=item, engine=engine, epsilon=epsilon, unit=unit, method=method,
                split=split, confidence=confidence, domain_size=domain_size, rng=seed,
                accountant=accountant, count=count_column, group=group, groups=groups_file,
                max_groups_per_item=max_groups_per_item, delta=delta)
        except DataError as exc:
            raise null_group_hint(exc, group) from None
        return _emit_grouped(rel, domain_size, extrapolation_ratio, json_out, plot_out, top)
    if null_group != "error":
        raise click.UsageError("--null-group applies with --group.")
    common: dict[str, Any] = {
        "epsilon": epsilon, "unit": unit, "method": method, "split": split,
        "confidence": confidence, "domain_size": domain_size, "rng": seed,
        "accountant": accountant}
    if prevalence_csv:
        rel = release_anonymized_histogram(read_prevalence_csv(file), **common)
    else:
        if count_column is None:
            _warn_if_count_column(file, item)
        rel = release_anonymized_histogram(file, item=item, count=count_column, engine=engine,
                                           **common)
    props = estimate_properties(rel, domain_size=domain_size,
                                extrapolation_ratio=extrapolation_ratio)
    _write_json(rel, props, json_out, plot_out)  # files first: `| head` loses nothing
    for line in _header(rel, epsilon):
        click.echo(line)
    click.echo("# released frequency list, largest counts first:")
    for line in _frequency_list(rel, top):
        click.echo(line)
    click.echo("# property estimates (post-processing of the release, no extra budget; "
               f"± = {_PLUS_MINUS}; [clamped] = moved into the quantity's range):")
    for line in _property_lines(props):
        click.echo(line)


def _emit_grouped(rel: Any, domain_size: int | None, extrapolation_ratio: float,
                  json_out: str | None, plot_out: str | None, top: int) -> None:
    """A grouped release: every group's property estimates (post-processing); JSON / PNG first,
    then one summary row per group, the frequency lists and the property estimates, each row
    led by its group."""
    from dpfreq.anonymized.properties import estimate_properties

    per_group = {g: estimate_properties(rel[g], domain_size=domain_size,
                                        extrapolation_ratio=extrapolation_ratio)
                 for g in rel}
    doc = {"release": rel.to_dict(), "properties": {
        g: {k: v.to_dict() for k, v in p.items()} for g, p in per_group.items()}}
    shared.emit_release(rel, json_out, plot_out, text=_json_text(doc))
    err = json_out == "-"
    relation = f" ({rel[rel.groups[0]].relation})" if rel.groups else ""
    echo_grouped_head(rel, f"# dpfreq anonymize: unit of privacy: {rel.unit}{relation}, "
                      f"mechanism {rel.mechanism}", err)
    small = noise_line(rel)
    if small is not None:
        click.echo(small, err=err)
    column = str(rel.group_column)
    name_width = max([len(column), *(len(str(name)) for name in rel)])  # no group selected
    _echo_group_summaries(rel, err)
    click.echo("# released frequency lists, largest counts first:", err=err)
    click.echo(f"{column:>{name_width}}  count  items  ranks", err=err)
    for name in rel:
        lines = _frequency_list(rel[name], top)
        for line in lines[1:] if lines[0].lstrip().startswith("count") else lines:
            click.echo(f"{name!s:>{name_width}}  {line}", err=err)
    click.echo("# property estimates per group (post-processing of each group's release, no "
               f"extra budget; ± = {_PLUS_MINUS}):", err=err)
    for name, props in per_group.items():
        for line in _property_lines(props):
            click.echo(f"{name!s:>{name_width}}  {line}", err=err)


def _echo_group_summaries(rel: Any, err: bool) -> None:
    """One row per group: its released total with its exact interval, the items released, the
    sorted-ℓ1 bound and the method."""
    rows = [(str(rel.group_column), "N", "total interval", "items", "sorted-l1 <=", "method")]
    for name in rel:
        r = rel[name]
        lo, hi = r.total_interval
        rows.append((str(name), str(r.n_estimate), f"[{lo}, {hi}]", str(r.n_items),
                     f"{float(r.error.value):.6g}", f"{r.method} ({r.regime})"))
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    click.echo(f"# per group: N (DP total) with its exact interval, items released, sorted-l1 "
               f"bound at confidence about {rel.simultaneous.confidence:g}", err=err)
    for row in rows:
        click.echo("  ".join(c.rjust(w) for c, w in zip(row, width, strict=True)), err=err)


@click.command(name="anonymize")
@click.option("--n-range", "n_range", required=True, metavar="LO,HI",
              help="Smallest and largest total (number of rows or summed counts) the data may "
                   "have, e.g. 1e4,1e6 or 0,1000 for a dataset that may be empty (public: "
                   "never read from the data).")
@click.option("--epsilon", type=float, default=None, help="Privacy parameter epsilon to plan for.")
@target_option("--target-l1", metavar="L1",
                      help="Instead of --epsilon: the sorted-l1 bound wanted at the top of "
                           "--n-range; prints the epsilon that reaches it.")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="As for dpfreq anonymize.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the statements.")
@plan_group_options
def plan_command(n_range: str, epsilon: float | None, target_l1: float | None, method: str,
                 confidence: float, group: str | None = None,
                 max_groups_per_item: int | None = None, groups_file: str | None = None,
                 delta: float | None = None) -> None:
    """Predicted error statement of `dpfreq anonymize` (public parameters only); with --group,
    of every group (--n-range is then each group's total)."""
    from dpfreq.anonymized import plan_anonymized
    from dpfreq.cli._common import parse_int_list

    bounds = parse_int_list(n_range, "--n-range")
    if len(bounds) != 2:
        raise click.BadParameter("must be two integers LO,HI", param_hint="--n-range")
    plan = plan_anonymized(n_range=(bounds[0], bounds[1]), epsilon=epsilon, target_l1=target_l1,
                           confidence=confidence, method=method, group=group,
                           groups=groups_file, max_groups_per_item=max_groups_per_item,
                           delta=delta)
    if group is not None:
        for line in format_grouped_plan(plan, _plan_lines):
            click.echo(line)
        return
    for line in _plan_lines(plan):
        click.echo(line)


def _how_predicted(n_range: tuple[int, int]) -> str:
    """Where the planned sorted-l1 bounds come from: exact at n = 0, else the reference shape."""
    how = ["at n = 0 exact, as a release with N = 0 states it"] if n_range[0] == 0 else []
    if n_range[1] > 0:
        how.append("predicted for a Zipf(1)-shaped histogram")
    return "; ".join(how)


def _plan_lines(plan: Any) -> list[str]:
    """The lines printed for an :class:`~dpfreq.anonymized.AnonymizedPlan`."""
    return [
        f"# plan: anonymized histogram, totals {plan.n_range[0]}..{plan.n_range[1]}, "
        f"epsilon={plan.epsilon:g}, delta=0, method {plan.method}, unit {plan.unit} "
        f"({plan.relation})",
        f"total:          N ± {plan.total_halfwidth} (exact, confidence {plan.confidence:g})",
        f"sorted-l1 bound: {plan.predicted_l1[0]:.4g} .. {plan.predicted_l1[1]:.4g} "
        f"({_how_predicted(plan.n_range)})" + (" — VACUOUS" if plan.vacuous else ""),
        plan.description]


_COUNT_NAMES = ("count", "counts", "frequency", "freq", "occurrences", "n")


def _warn_if_count_column(file: str, item: str | None) -> None:
    """Warn when a CSV looks pre-aggregated (a count-like column) but --count was not given.

    Only the header line is read (with the csv module): without --count every row is one
    occurrence, which is right for an event log and wrong for an ``item,count`` table.
    """
    if not file.lower().endswith((".csv", ".csv.gz", ".tsv")) or not Path(file).is_file():
        return
    import gzip

    opener: Any = gzip.open if file.lower().endswith(".gz") else open
    try:
        with opener(file, "rt", encoding="utf-8-sig", newline="") as fh:
            header = next(csv.reader(fh, delimiter="\t" if file.endswith(".tsv") else ","), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return
    found = [c for c in header if c.strip().lower() in _COUNT_NAMES and c != item]
    if found:
        shared.warn(f"{file} has a column {found[0]!r}; without --count every row counts as one "
                    f"occurrence (for an item,count table pass --count {found[0]}).")
