"""`dpfreq reach query SAVED --window START:END --k K`: windows answered from a saved release.

Mirrors :meth:`dpfreq.windows.WindowCountsRelease.load` and
:meth:`~dpfreq.windows.WindowCountsRelease.window`; formatting only. Every answer comes from the
saved release's fixed node noise, so asking any number of windows is post-processing: nothing
is spent and no ledger is charged (the command takes no ``--epsilon`` and no ``--ledger``).
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
from dpfreq.errors import DPFreqError, ParameterError

__all__ = ["command", "parse_window", "period_label"]

_FUNC = "dpfreq reach query"
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
        raise ParameterError(message("--window", _FUNC, rule + ", which has integer periods, "
                                     "not dates)", text))
    try:
        day = int(np.datetime64(end, "us").astype(np.int64))
    except ValueError:
        raise ParameterError(message("--window", _FUNC, rule + "), with valid dates",
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
                "--window", _FUNC, f"START:END with 1 <= START <= END <= {horizon} (the periods "
                f"of the saved release{span})", text))
        out.append((text, t1, t2))
    return out


def _answers(rel: Any, windows: list[tuple[str, int, int]], ks: list[int], confidence: float,
             saved: str) -> list[dict[str, Any]]:
    """One record per (window, k), in the order asked."""
    fams = [w if isinstance(w, str) else f"fixed(W={w})" for w in rel.windows]
    out = []
    for text, t1, t2 in windows:
        for k in ks:
            try:
                a = rel.window(t1, t2, k, confidence=confidence)
            except ParameterError:
                raise ParameterError(message(
                    "--window", _FUNC, f"a window the release in {saved} answers (it released "
                    f"{', '.join(fams)}: cumulative answers 1:END, total 1:{rel.horizon}, "
                    "fixed(W=…) END-W+1:END, all any window)", text)) from None
            out.append({"window": text, "t1": t1, "t2": t2,
                        "first_period": period_label(rel.time_axis, t1),
                        "last_period": period_label(rel.time_axis, t2), "k": k,
                        "estimate": a.estimate, "lower": a.lower, "upper": a.upper,
                        "band_lower": a.band_lower, "band_upper": a.band_upper, "sd": a.sd,
                        "answered_by": a.answered_by})
    return out


def _load_and_answer(saved: str, window_text: tuple[str, ...], ks: list[int], conf: float
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The saved release's public description and the answers, as plain data.

    A failure is raised afresh once the loaded release is dropped: the CLI saves every release
    it finds in a failing traceback as one whose budget was spent, which a loaded release is
    not (nothing is spent here).
    """
    from dpfreq.windows import WindowCountsRelease

    rel = WindowCountsRelease.load(saved)
    try:
        for k in ks:
            if k not in rel.k_values:
                raise ParameterError(message("--k", _FUNC, "one of the k values released in "
                                             f"{saved}: {list(rel.k_values)}", k))
        records = _answers(rel, _resolve(window_text, rel.time_axis, rel.horizon), ks, conf,
                           saved)
    except DPFreqError as exc:
        failure = (type(exc), str(exc))
    else:
        info = {"epsilon": rel.epsilon, "delta": rel.delta, "unit": rel.unit,
                "mechanism": rel.mechanism, "horizon": rel.horizon,
                "k_values": list(rel.k_values), "seeded": rel.seeded,
                "windows": [w if isinstance(w, str) else f"fixed(W={w})" for w in rel.windows]}
        return info, records
    del rel
    raise failure[0](failure[1])


def _table(records: list[dict[str, Any]]) -> str:
    head = ("window", "periods", "k", "estimate", "±", "answered by")
    rows = [(r["window"], f"{r['first_period']}..{r['last_period']}", str(r["k"]),
             f"{r['estimate']:.0f}", f"±{r['upper'] - r['estimate']:.0f}", r["answered_by"])
            for r in records]
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
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the answers as JSON to FILE ('-' = stdout; then the text goes "
                         "to stderr).")
@click.option("--quiet", "-q", is_flag=True, default=False, expose_value=False,
              help="Accepted as on every command (this one draws no progress bars).")
def command(saved: str, window_text: tuple[str, ...], k_text: tuple[str, ...],
            confidence: float, json_out: str | None) -> None:
    """Answer windows from a release saved by `dpfreq reach --save SAVED`.

    Post-processing of that release: the answers reuse its fixed noise, so no budget is spent
    and no ledger is charged, however many windows are asked.
    """
    for text in window_text:
        parse_window(text)  # syntax first, before the file is read
    ks = sorted({k for text in k_text for k in parse_int_list(text, "--k")})
    conf = check_confidence(confidence, "--confidence", _FUNC)
    info, records = _load_and_answer(saved, window_text, ks, conf)
    if info["seeded"]:
        click.echo("warning: the saved release was made with --seed (reproducible noise); "
                   "these answers are NOT for production.", err=True)
    if json_out is not None:
        doc = {"type": "WindowQueryAnswers", "post_processing": True,
               "budget_spent": {"epsilon": 0.0, "delta": 0.0}, "release": info,
               "confidence": conf, "answers": records}
        write_output(json.dumps(doc, default=_json_default), json_out)
    click.echo(f"# dpfreq reach query: post-processing of the release saved in {saved} (no new "
               f"budget, no ledger charge); it was released at unit={info['unit']}, "
               f"epsilon={info['epsilon']:g}, delta={info['delta']:g}, T={info['horizon']} "
               "periods")
    click.echo(f"# ± = {conf:.0%} per-answer interval half-width")
    click.echo(_table(records))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value).__name__)
