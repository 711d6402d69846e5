"""Two parts of one ask run at once: one in a helper thread, one in the caller's thread.

An ask of many windows computes the node noise (AES and compiled passes that release the GIL)
beside its public part (exact counts, compiled and GIL-free too, then the interval half-widths:
numpy on short arrays, mostly under the GIL). The two threads hand the GIL back and forth at
every step between those passes, and the interpreter lets a thread that holds the GIL keep it
for its whole switch interval (5 ms by default) before the other may take it: with intervals
of about 20 ms per ask, most of the overlap was lost waiting. While parts run side by side the
switch interval is lowered to :data:`SWITCH_INTERVAL` (and restored when the last such run
ends; nested and concurrent runs share one save). This only makes the interpreter offer the
GIL sooner; it changes no result.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["SWITCH_INTERVAL", "side_by_side"]

#: the interpreter's switch interval (seconds) while two parts of an ask run side by side
SWITCH_INTERVAL = 5e-4

A = TypeVar("A")
B = TypeVar("B")

_lock = threading.Lock()
_state: dict[str, float] = {"depth": 0, "saved": 0.0}


def side_by_side(helper: Callable[[], A], here: Callable[[], B]) -> tuple[A, B]:
    """``(helper(), here())``, ``helper`` in a new thread while ``here`` runs in this one (an
    exception of either is raised here once both have ended)."""
    _enter()
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            job = pool.submit(helper)
            mine = here()
            return job.result(), mine
    finally:
        _leave()


def _enter() -> None:
    with _lock:
        if _state["depth"] == 0:
            _state["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_state["saved"], SWITCH_INTERVAL))
        _state["depth"] += 1


def _leave() -> None:
    with _lock:
        _state["depth"] -= 1
        if _state["depth"] == 0:
            sys.setswitchinterval(_state["saved"])
