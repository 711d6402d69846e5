"""What a window release needs of the data: the event log read into periods
(:mod:`~dpfreq.windows.data.events`), the per-item reductions of the log into points
(:mod:`~dpfreq.windows.data.reductions`), their mergeable sums
(:mod:`~dpfreq.windows.data.summaries`) and the exact counts answered from them
(:mod:`~dpfreq.windows.data.dominance_count`)."""

from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.data.summaries import (
    SummarySpec,
    WindowReducer,
    WindowSummaries,
    summary_specs,
)

__all__ = ["DominanceCounter", "SummarySpec", "WindowReducer", "WindowSummaries", "summary_specs"]
