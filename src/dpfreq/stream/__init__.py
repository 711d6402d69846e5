"""dpfreq.stream: reach and k+ reach released every period, from one budget (continual release).

:class:`ReachStream` is created once with public parameters and a budget, then appended to as
periods close; each append returns a :class:`StreamRelease` per new period.
:func:`plan_reach_stream` predicts a stream's errors before it is created (public parameters
only). The online counters
(:mod:`dpfreq.stream.mechanisms`), the per-item state (:mod:`dpfreq.stream.items`), the plan
(:mod:`dpfreq.stream.auto`) and the saved state (:mod:`dpfreq.stream.state`) stay in their
modules.
"""

from dpfreq.stream.auto import StreamPlan
from dpfreq.stream.forecast import StreamForecast, plan_reach_stream
from dpfreq.stream.result import StreamRelease
from dpfreq.stream.stream import ReachStream

__all__ = ["ReachStream", "StreamForecast", "StreamPlan", "StreamRelease", "plan_reach_stream"]
