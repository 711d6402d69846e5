"""The options of `dpfreq stream init` that fix a stream's accuracy, shared with `dpfreq plan
stream` (one grammar: a plan takes the same line). Imports click only, so `dpfreq plan` starts
without the stream's modules."""

from __future__ import annotations

from typing import Any

import click

import dpfreq.cli._common as shared

__all__ = ["accuracy_options", "parse_horizon"]


def accuracy_options(f: Any) -> Any:
    """The options of ``dpfreq stream init`` that fix a stream's accuracy, shared with
    ``dpfreq plan stream`` (one grammar: a plan takes the same line)."""
    options = [
        click.option("--horizon", "horizon_text", required=True, metavar="T|none",
                     help="Number of periods T, or 'none' for a stream without a horizon."),
        click.option("--k", "k_text", required=True, metavar="K[,K...]",
                     help="The k of the k+ reach curves (1 = reach)."),
        click.option("--unit", type=click.Choice(["event", "item", "item_replace"]),
                     required=True, help="Unit of privacy (no default)."),
        click.option("--epsilon", type=float, required=True, help="ε of the whole stream."),
        click.option("--delta", type=float, required=True,
                     help="δ of the whole stream (0: pure ε-DP; > 0 adds zCDP accounting)."),
        click.option("--method", required=True, type=click.Choice(
            ["auto", "simple", "tree", "smooth", "factorization", "epochs"]),
                     help="The online counter ('auto': the smallest predicted error, with "
                          "why)."),
        click.option("--group", default=None, help="Group column (with --groups)."),
        click.option("--groups", "groups_file", type=click.Path(dir_okay=False), default=None,
                     help="File of the public group names, one per line."),
        click.option("--max-groups-per-item", type=shared.INTEGER, default=None,
                     help="Groups one item counts in (required with --group at --unit item): "
                          "the first it is seen in."),
        click.option("--capping-epsilon", type=float, default=None,
                     help="With --group at --unit item: the share of --epsilon, in (0, "
                          "epsilon), that measures the fraction of (item, group) pairs the "
                          "cap --max-groups-per-item dropped to date (printed with its "
                          "interval every period; the reach counters spend the rest). "
                          "Default: not measured."),
        click.option("--confidence", type=float, default=0.95, show_default=True,
                     help="Confidence of the intervals and the band."),
    ]
    return shared.with_options(f, options)


def parse_horizon(text: str) -> int | None:
    """``--horizon``: an integer ``T >= 1`` or ``none``."""
    out: int | None = shared.positive_or_none(text, "--horizon", ("none", "unbounded"),
                                              "an integer >= 1 or 'none' (no horizon)")
    return out
