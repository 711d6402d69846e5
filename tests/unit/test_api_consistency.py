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


def test_domain_size_accepts_an_integral_float_as_the_cli_does():
    from dpfreq.profile import plan_profile

    assert plan_profile(domain_size=1e6, max_count=5, epsilon=1.0, unit="item").domain_size \
        == 1_000_000


@pytest.mark.parametrize("total", [38664309969, 38664309970, 2**36])
def test_memory_refusal_names_no_size_derived_from_the_data(total):
    from dpfreq.anonymized import release_anonymized_histogram

    with pytest.raises(ParameterError) as info:
        release_anonymized_histogram({1: total}, epsilon=1e-6, unit="event", rng=1)
    text = str(info.value)
    assert "working-memory limit of 4 GiB" in text
    assert "GiB" not in text.replace("limit of 4 GiB", "")
