"""Exact enumeration helpers shared by the anonymized-histogram tests (not a test module).

Histograms are in prevalence form ``{count r: number of labels with count r}``.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["histograms_up_to", "move_up", "partitions"]


def partitions(n: int, largest: int) -> Iterator[list[int]]:
    """Integer partitions of ``n`` with parts ``<= largest``, parts non-increasing."""
    if n == 0:
        yield []
        return
    for first in range(min(n, largest), 0, -1):
        for rest in partitions(n - first, first):
            yield [first, *rest]


def histograms_up_to(n_max: int) -> Iterator[dict[int, int]]:
    """All anonymized histograms (integer partitions) of total 0..n_max."""
    for n in range(n_max + 1):
        for part in partitions(n, n):
            h: dict[int, int] = {}
            for x in part:
                h[x] = h.get(x, 0) + 1
            yield h


def move_up(h: dict[int, int], r: int) -> dict[int, int]:
    """Neighbour: move one element r -> r+1 (r = 0 adds a new element with count 1)."""
    out = dict(h)
    if r > 0:
        out[r] -= 1
        if out[r] == 0:
            del out[r]
    out[r + 1] = out.get(r + 1, 0) + 1
    return out
