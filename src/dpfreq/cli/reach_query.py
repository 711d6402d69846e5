"""`dpfreq reach query SAVED --window START:END --k K`: windows answered from a saved release.

Mirrors :meth:`dpfreq.windows.WindowCountsRelease.load` and
:meth:`~dpfreq.windows.WindowCountsRelease.window`; formatting only. Every answer comes from the
saved release's fixed node noise, so asking any number of windows is post-processing: nothing
is spent and no ledger is charged (the command takes no ``--epsilon`` and no ``--ledger``).
A release saved with ``dpfreq reach --group`` is answered per group (every group, or those
named by ``--group``), with the same checks and the same JSON, each answer naming its group,
and says what its intervals cover (the capped data, with the dropped-fraction estimate when
the release measured one), as the release itself did.
Reached through ``dpfreq reach query`` (see :mod:`dpfreq.cli.reach`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import click
import numpy as np

from dpfreq._validate import check_confidence, message
from dpfreq.cli._common import output_path_option, parse_int_list, write_output
from dpfreq.cli.output import warn
from dpfreq.cli.spelling import spelled
from dpfreq.errors import DataError, DPFreqError, ParameterError

__all__ = ["command", "load_saved", "parse_window", "period_label"]

_DAY_US = 86_400_000_000
_INT = re.compile(r"\s*(\d{1,18})\s*")
_DATE = re.compile(r"\s*(\d{4}-\d{2}-\d{2})\s*")


def parse_window(text: str) -> tuple[str, str]:
    """``START:END`` (or one period ``T``) split into its two ends, each a period number or a
    date ``YYYY-MM-DD``; a one-line usage error otherwise."""
    parts = text.split(":")
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or not all(_INT.fullmatch(p) or _DATE.fullmatch(p) for p in parts):
        raise click.BadParameter(f"must be START:END with period numbers (3:9) or dates "
                                 f"(2026-11-08:2026-11-14); got {text!r}",
                                 param_hint="--window")
    return parts[0].strip(), parts[1].strip()


def period_label(axis: Mapping[str, Any], t: int) -> str:
    """The period ``t`` as printed: its number, or its start (a date for whole days)."""
    if axis.get("kind") != "timestamp":
        return str(t)
    start = np.datetime64(axis["start"], "us")
    step = int(axis["period_us"])
    first = start + np.timedelta64((t - 1) * step, "us")
    return str(first.astype("datetime64[D]" if step % _DAY_US == 0 else "datetime64[s]"))


def _period_of(end: str, axis: Mapping[str, Any], last: bool, text: str, horizon: int) -> int:
    """The period number of one end of a window (a date: the period holding its first instant,
    or, for END, its last instant)."""
    rule = f"START:END with 1 <= START <= END <= {horizon} (the periods of the saved release"
    if _INT.fullmatch(end):
        return int(end)
    if axis.get("kind") != "timestamp":
        raise ParameterError(message("--window", rule + ", which has integer periods, "
                                     "not dates)", text))
    try:
        day = int(np.datetime64(end, "us").astype(np.int64))
    except ValueError:
        raise ParameterError(message("--window", rule + "), with valid dates",
                                     text)) from None
    us = day + _DAY_US - 1 if last else day
    offset = us - int(np.datetime64(axis["start"], "us").astype(np.int64))
    return offset // int(axis["period_us"]) + 1 if offset >= 0 else 0


def _resolve(texts: tuple[str, ...], axis: Mapping[str, Any], horizon: int
             ) -> list[tuple[str, int, int]]:
    """``(as asked, t1, t2)`` of every ``--window``, each checked against the horizon."""
    out = []
    for text in texts:
        a, b = parse_window(text)
        t1 = _period_of(a, axis, False, text, horizon)
        t2 = _period_of(b, axis, True, text, horizon)
        if not 1 <= t1 <= t2 <= horizon:
            first, final = period_label(axis, 1), period_label(axis, horizon)
            span = "" if axis.get("kind") != "timestamp" else f", {first} to {final}"
            raise ParameterError(message(
                "--window", f"START:END with 1 <= START <= END <= {horizon} (the periods "
                f"of the saved release{span})", text))
        out.append((text, t1, t2))
    return out


def _answers(rel: Any, windows: list[tuple[str, int, int]], ks: list[int], confidence: float,
             saved: str, group: str | None = None) -> list[dict[str, Any]]:
    """One record per (window, k), in the order asked (``group``: the group ``rel`` is, named
    first in each record)."""
    fams = [w if isinstance(w, str) else f"rolling(W={w})" for w in rel.windows]
    out = []
    for text, t1, t2 in windows:
        for k in ks:
            try:
                a = rel.window(t1, t2, k, confidence=confidence)
            except ParameterError:
                raise ParameterError(message(
                    "--window", f"a window the release in {saved} answers (it released "
                    f"{', '.join(fams)}: cumulative answers 1:END, total 1:{rel.horizon}, "
                    "rolling(W=…) END-W+1:END, all any window)", text)) from None
            out.append({**({} if group is None else {"group": group}),
                        "window": text, "t1": t1, "t2": t2,
                        "first_period": period_label(rel.time_axis, t1),
                        "last_period": period_label(rel.time_axis, t2), "k": k,
                        "estimate": a.estimate, "lower": a.lower, "upper": a.upper,
                        "band_lower": a.band_lower, "band_upper": a.band_upper, "sd": a.sd,
                        "answered_by": a.answered_by})
    return out


def load_saved(saved: str) -> Any:
    """The release saved in ``saved``: a :class:`~dpfreq.windows.WindowCountsRelease`, or the
    :class:`~dpfreq.windows.grouped.result.GroupedWindowRelease` of ``dpfreq reach --group``
    (tried when the file says it holds one, so every other failure names the ungrouped
    format)."""
    from dpfreq.windows import WindowCountsRelease
    from dpfreq.windows.grouped.result import GROUPED_KIND, GroupedWindowRelease

    try:
        return WindowCountsRelease.load(saved)
    except DataError as exc:
        if f"it holds a {GROUPED_KIND!r}" not in str(exc):
            raise
    return GroupedWindowRelease.load(saved)


def _chosen_groups(saved: str, rel: Any, asked: tuple[str, ...]) -> list[str | None]:
    """The groups to answer: ``[None]`` for an ungrouped release, else the ones asked (every
    group when none is), each checked against the released (public) group names."""
    if not hasattr(rel, "groups"):
        if asked:
            raise ParameterError(message(
                "--group", f"given only for a release saved with `dpfreq reach --group` "
                f"({saved} holds one release without groups)", asked[0]))
        return [None]
    names = list(rel.groups)
    for name in asked:
        if name not in names:
            shown = ", ".join(names[:20]) + (f", … ({len(names)} groups)" if len(names) > 20
                                             else "")
            raise ParameterError(message("--group", f"one of the groups released in "
                                         f"{saved}: {shown}", name))
    return list(dict.fromkeys(asked)) if asked else names


def _info(rel: Any, one: Any) -> dict[str, Any]:
    """The public description of the saved release (``one``: a group's release, or ``rel``)."""
    info = {"epsilon": rel.epsilon, "delta": rel.delta, "unit": rel.unit,
            "mechanism": rel.mechanism, "horizon": one.horizon,
            "k_values": list(one.k_values), "seeded": rel.seeded,
            "windows": [w if isinstance(w, str) else f"rolling(W={w})" for w in one.windows]}
    if hasattr(rel, "groups"):
        info.update(group_column=rel.group_column, groups=list(rel.groups),
                    epsilon_per_group=one.epsilon, delta_per_group=one.delta,
                    coverage=rel.mechanism_params["coverage"])
        if rel.dropped_fraction is not None:
            info["dropped_fraction"] = rel.dropped_fraction.to_dict()
    if one.time_axis.get("kind") == "timestamp":
        info["timezone"] = one.time_axis["timezone"]
    return info


def _load_and_answer(saved: str, window_text: tuple[str, ...], ks: list[int], conf: float,
                     groups: tuple[str, ...] = ()
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The saved release's public description and the answers, as plain data.

    A failure is raised afresh once the loaded release is dropped: the CLI saves every release
    it finds in a failing traceback as one whose budget was spent, which a loaded release is
    not (nothing is spent here).
    """
    rel = load_saved(saved)
    try:
        chosen = _chosen_groups(saved, rel, groups)
        first = rel if chosen[0] is None else rel[chosen[0]]
        for k in ks:
            if k not in first.k_values:
                raise ParameterError(message("--k", "one of the k values released in "
                                             f"{saved}: {list(first.k_values)}", k))
        windows = _resolve(window_text, first.time_axis, first.horizon)
        records = [r for g in chosen
                   for r in _answers(rel if g is None else rel[g], windows, ks, conf, saved, g)]
    except DPFreqError as exc:
        failure = (type(exc), str(exc))
    else:
        return _info(rel, first), records
    rel = first = None  # no loaded release may stay in the failing frame
    raise failure[0](failure[1])


def _table(records: list[dict[str, Any]], group_column: str | None = None) -> str:
    head: tuple[str, ...] = ("window", "periods", "k", "estimate", "±", "answered by")
    rows: list[tuple[str, ...]] = [
        (r["window"], f"{r['first_period']}..{r['last_period']}", str(r["k"]),
         f"{r['estimate']:.0f}", f"±{r['upper'] - r['estimate']:.0f}", r["answered_by"])
        for r in records]
    if group_column is not None:
        head = (group_column, *head)
        rows = [(str(r["group"]), *row) for r, row in zip(records, rows, strict=True)]
    size = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    return "\n".join("  ".join(c.rjust(s) for c, s in zip(row, size, strict=True))
                     for row in [head, *rows])


@click.command(name="query")
@click.argument("saved", type=click.Path(exists=True, dir_okay=False))
@click.option("--window", "window_text", multiple=True, required=True, metavar="START:END",
              help="A window to answer (repeat for more): period numbers 1..T (3:9, or 5 for "
                   "one period) or, for dated periods, dates (2026-11-08:2026-11-14).")
@click.option("--k", "k_text", multiple=True, required=True, metavar="LIST",
              help="k of k+ reach (comma-separated or repeated): released k values only.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals.")
@click.option("--group", "group_names", multiple=True, metavar="NAME",
              help="For a release saved with `dpfreq reach --group`: answer this group (repeat "
                   "for more); every group when not given.")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the answers as JSON to FILE ('-' = stdout; then the text goes "
                         "to stderr).")
@click.option("--quiet", "-q", is_flag=True, default=False, expose_value=False,
              help="Accepted as on every command (this one draws no progress bars).")
def command(saved: str, window_text: tuple[str, ...], k_text: tuple[str, ...],
            confidence: float, group_names: tuple[str, ...], json_out: str | None) -> None:
    """Answer windows from a release saved by `dpfreq reach --save SAVED`.

    Post-processing of that release: the answers reuse its fixed noise, so no budget is spent
    and no ledger is charged, however many windows are asked. A release saved with --group
    answers every group, or the groups named by --group.
    """
    for text in window_text:
        parse_window(text)  # syntax first, before the file is read
    ks = sorted({k for text in k_text for k in parse_int_list(text, "--k")})
    conf = check_confidence(confidence, "--confidence")
    info, records = _load_and_answer(saved, window_text, ks, conf, group_names)
    if info["seeded"]:
        warn("the saved release was made with --seed (reproducible noise); these answers are "
             "NOT for production.")
    if json_out is not None:
        doc = {"type": "WindowQueryAnswers", "post_processing": True,
               "budget_spent": {"epsilon": 0.0, "delta": 0.0}, "release": info,
               "confidence": conf, "answers": records}
        write_output(json.dumps(doc, default=_json_default), json_out)
    click.echo(f"# dpfreq reach query: post-processing of the release saved in {saved} (no new "
               f"budget, no ledger charge); it was released at unit={info['unit']}, "
               f"epsilon={info['epsilon']:g}, delta={info['delta']:g}, T={info['horizon']} "
               "periods")
    if "groups" in info:
        click.echo(f"# grouped by {info['group_column']!r}: {len(info['groups'])} groups, "
                   f"epsilon={info['epsilon_per_group']:g} per group; answering "
                   f"{len({r['group'] for r in records})} of them")
        click.echo(f"# coverage: {spelled(info['coverage'])}")
        if "dropped_fraction" in info:
            click.echo(f"# dropped by the cap: {info['dropped_fraction']['description']}")
    if "timezone" in info:
        click.echo(f"# periods: wall-clock days/times in {info['timezone']}; a window "
                   "START..END includes both periods")
    click.echo(f"# ± = {conf:.0%} per-answer interval half-width")
    click.echo(_table(records, info.get("group_column")))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value).__name__)
