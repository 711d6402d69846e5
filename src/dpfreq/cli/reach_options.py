"""The options `dpfreq reach` and `dpfreq plan reach` share, defined once.

Both commands take the same public parameters — the time axis, ε, δ, the unit, the k values,
the window families, the singleton declaration and the confidence — with the same names, types,
rules and help, through :func:`reach_parameters`; the families use the grammar of
``release_window_counts(windows=[...])`` (:func:`parse_window_list`). Importing this module
imports click only.
"""

from __future__ import annotations

from typing import Any

import click

from dpfreq.cli._common import POSITIVE, parse_int_list, with_options

__all__ = ["FAMILY_HELP", "parse_method", "parse_window_list", "reach_parameters",
           "reach_public_kwargs"]

#: The families, as ``--windows`` takes them and as the output names them.
FAMILY_HELP = ("cumulative ([1, t] for every period t), total (only [1, T]), all (every "
               "window [t1, t2], answered later by `dpfreq reach query`) or an integer width "
               "W (rolling windows [t-W+1, t], named rolling(W=…) in the output)")

_NAMED = ("cumulative", "total", "all")


def parse_window_list(values: tuple[str, ...] | list[str]) -> list[Any]:
    """``--windows`` values (comma-separated, or the option repeated): the families of
    ``release_window_counts(windows=...)`` — ``cumulative``, ``total``, ``all`` or a width W.

    Examples
    --------
    >>> parse_window_list(("cumulative,7", "all"))
    ['cumulative', 7, 'all']
    """
    out: list[Any] = []
    for text in values:
        for part in text.split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name in _NAMED:
                out.append(name)
                continue
            try:
                out.extend(parse_int_list(name, "--windows"))
            except click.BadParameter:
                raise click.BadParameter(
                    "must be a comma-separated list of 'cumulative', 'total', 'all' and "
                    f"integer window widths W (e.g. cumulative,7,all); got {part.strip()!r}",
                    param_hint="--windows") from None
    if not out:
        raise click.BadParameter("must name at least one family (e.g. cumulative,7,all); "
                                 f"got {','.join(values)!r}", param_hint="--windows")
    return out


def reach_parameters(f: Any) -> Any:
    """The public parameters of a window release, as options (identical on both commands).

    The command receives ``horizon, start, end, period, epsilon, delta, unit, k_text,
    window_text, method_text, singleton, confidence``; :func:`reach_public_kwargs` turns them
    into the keyword arguments of ``release_window_counts`` / ``plan_window_counts``.
    """
    options = [
        click.option("--horizon", type=POSITIVE, default=None,
                     help="Public number of periods T when times are integer periods 1..T."),
        click.option("--start", default=None,
                     help="Public start of the time range (date/timestamp)."),
        click.option("--end", default=None,
                     help="Public end of the time range (date/timestamp; a date is inclusive "
                          "of that day)."),
        click.option("--period", default=None,
                     help="Public period length, e.g. 1d, 6h, 30min."),
        click.option("--epsilon", type=float, required=True,
                     help="Total privacy budget ε of the release (no default)."),
        click.option("--delta", type=float, default=0.0, show_default=True,
                     help="δ > 0: (ε, δ)-DP via advanced composition or zCDP (discrete "
                          "Gaussian), whichever predicts less error. With --group and "
                          "without --groups: δ in (0, 1e-3] also pays the private partition "
                          "selection of the data's groups (half of ε selects; the split of δ "
                          "is in the output's mechanism parameters)."),
        click.option("--unit", type=click.Choice(["event", "item", "item_replace"]),
                     required=True,
                     help="Unit of privacy: event (one event), item (one item with all its "
                          "events) or item_replace (one item's events replaced by any others); "
                          "no default."),
        click.option("--k", "k_text", required=True, metavar="LIST",
                     help="Comma-separated k values of k+ reach (1 = reach); no default: "
                          "each k released takes its share of ε."),
        click.option("--windows", "window_text", multiple=True, required=True,
                     metavar="LIST",
                     help="Comma-separated window families to release (no default; ε is "
                          f"split equally over every family and k): {FAMILY_HELP}."),
        click.option("--method", "method_text", default="auto", show_default=True,
                     metavar="auto|FAMILY=METHOD,...",
                     help="Noise structure per family: auto (the smallest predicted error from "
                          "public parameters, said why in the output) or FAMILY=METHOD pairs, "
                          "e.g. cumulative=factorization,7=per_query (families as in "
                          "--windows; the others stay auto)."),
        click.option("--singleton", is_flag=True, default=False,
                     help="Declare at most one event per period (enables time compression at "
                          "item level; a release checks it against the data)."),
        click.option("--confidence", type=float, default=0.95, show_default=True,
                     help="Confidence of the intervals."),
    ]
    return with_options(f, options)


def reach_public_kwargs(*, horizon: int | None, start: str | None, end: str | None,
                        period: str | None, epsilon: float, delta: float, unit: str,
                        k_text: str, window_text: tuple[str, ...], method_text: str,
                        singleton: bool, confidence: float) -> dict[str, Any]:
    """The keyword arguments shared by ``release_window_counts`` and ``plan_window_counts``."""
    return {"horizon": horizon, "start": start, "end": end, "period": period,
            "epsilon": epsilon, "delta": delta, "unit": unit,
            "k_values": parse_int_list(k_text, "--k"),
            "windows": parse_window_list(window_text), "method": parse_method(method_text),
            "singleton": singleton, "confidence": confidence}


def parse_method(text: str) -> Any:
    """``--method``: ``auto`` or ``FAMILY=METHOD`` pairs (the names are checked by the plan).

    Examples
    --------
    >>> parse_method("cumulative=factorization, 7=per_query")
    {'cumulative': 'factorization', '7': 'per_query'}
    """
    if text.strip().lower() == "auto":
        return "auto"
    out: dict[str, str] = {}
    for part in text.split(","):
        family, eq, name = part.partition("=")
        if not eq or not family.strip() or not name.strip():
            raise click.BadParameter(
                "must be 'auto' or comma-separated FAMILY=METHOD pairs (e.g. "
                f"cumulative=factorization,7=per_query); got {part.strip()!r}",
                param_hint="--method")
        out[family.strip().lower()] = name.strip()
    return out
