"""Python API consistency: messages that say what is allowed."""

from __future__ import annotations

import pytest

from dpfreq.errors import ParameterError
from dpfreq.windows import plan_window_counts


def test_a_named_rolling_window_is_told_that_an_integer_width_is_allowed():
    with pytest.raises(ParameterError, match=r"integer window width") as info:
        plan_window_counts(horizon=10, epsilon=1.0, unit="event", k_values=[1],
                           windows=["rolling7"])
    assert "'rolling7'" in str(info.value)
