"""Which closed periods an append re-sends: compared period by period with what was appended.

A source may hold periods already appended besides the new ones (a cron job re-run over a file
of days 5–7 when 5–6 were appended) or only closed periods (a re-sent append). The **re-sent
periods** run from the first closed period the source holds events of (the period named by
``through`` when it holds none and closes nothing new) to the last closed period the append
covers. Each is compared with what the stream appended for it by its private digest
(:class:`~dpfreq.stream.items.reader.PeriodEvents`: the period's aggregated rows, of the listed
groups, in one order-free hash): a period re-sent as it was returns its stored answers without
new noise; a **changed** one — other events, some missing, or events where it had none — is
refused with ``late="error"`` (named) and its events dropped with ``late="drop"`` (counted with
the late events, never merged). Events before the stream's first period are late as ever.
Which releases an append returns is thus the re-sent periods and the new ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dpfreq.stream.items.reader import EMPTY_PERIOD, PeriodEvents

__all__ = ["Resend", "compare_periods"]


@dataclass(frozen=True)
class Resend:
    """The comparison of an append with the closed periods (module docstring): the first
    period it returns, the closed periods whose events changed, and the events of closed
    periods (and before the first) not re-sent as they were, which are late."""

    first: int
    changed: tuple[int, ...]
    n_late: int


def compare_periods(periods: Mapping[int, PeriodEvents], digests: Sequence[str], n_late: int,
                    through: int) -> Resend:
    """Compare what a source holds of each period (``n_late``: its events of the closed
    periods and before the first, read as late) with the digests of the ``len(digests)``
    closed periods."""
    last = len(digests)
    held = [p for p in periods if p <= min(last, through)]
    first = min([*held, through if through <= last else last + 1])
    changed, resent = [], 0
    for p in range(first, min(last, through) + 1):
        got = periods.get(p)
        if (got.digest if got is not None else EMPTY_PERIOD) != digests[p - 1]:
            changed.append(p)
        elif got is not None:
            resent += got.all_events
    return Resend(first, tuple(changed), n_late - resent)
