"""Two parts of an ask side by side: both results, the switch interval lowered only while they
run (and restored after nested and failing runs), errors raised in the caller."""

from __future__ import annotations

import sys
import threading

import pytest

from dpfreq.windows.noise.overlap import SWITCH_INTERVAL, side_by_side


def test_both_results_and_the_interval_while_running() -> None:
    before = sys.getswitchinterval()
    seen: dict[str, object] = {}

    def helper() -> str:
        seen["helper"] = (threading.current_thread() is not threading.main_thread(),
                          sys.getswitchinterval())
        return "public"

    def here() -> int:
        seen["here"] = sys.getswitchinterval()
        return 7

    assert side_by_side(helper, here) == ("public", 7)
    assert seen["helper"] == (True, min(before, SWITCH_INTERVAL))
    assert seen["here"] == min(before, SWITCH_INTERVAL)
    assert sys.getswitchinterval() == before


def test_nested_and_failing_runs_restore_the_interval() -> None:
    before = sys.getswitchinterval()
    inner = side_by_side(lambda: side_by_side(lambda: 1, lambda: 2), lambda: 3)
    assert inner == ((1, 2), 3)
    assert sys.getswitchinterval() == before

    def fails() -> int:
        raise ValueError("helper failed")

    with pytest.raises(ValueError, match="helper failed"):
        side_by_side(fails, lambda: 0)
    assert sys.getswitchinterval() == before
