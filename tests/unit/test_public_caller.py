"""The public caller a message names: set by ``@public_errors``, read by the validators.

Helpers take no caller name; :func:`dpfreq.errors.public_caller` gives the outermost public call
under way, which a ContextVar keeps per thread and per asyncio task.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from dpfreq._validate import check_epsilon, message
from dpfreq.errors import (
    ParameterError,
    innermost_caller,
    public_call,
    public_caller,
    public_errors,
)


def _helper(epsilon: object) -> float:
    """An internal helper two calls below the public function: it names nobody."""
    return check_epsilon(epsilon)


@public_errors("inner_release")
def inner_release(epsilon: object) -> float:
    return _helper(epsilon)


@public_errors("outer_release")
def outer_release(epsilon: object) -> float:
    return inner_release(epsilon)


@public_errors("names_seen")
def names_seen() -> tuple[str, str]:
    return public_caller(), innermost_caller()


def test_the_public_name_reaches_a_nested_helper():
    with pytest.raises(ParameterError, match=r"^epsilon of inner_release must be a number in "
                                             r"\[1e-06, 1000\]; got -1\.0\.$"):
        inner_release(-1.0)


def test_the_outermost_public_call_wins():
    with pytest.raises(ParameterError, match=r"^epsilon of outer_release must be"):
        outer_release(-1.0)
    with public_call("dpfreq profile"):
        assert names_seen() == ("dpfreq profile", "names_seen")


def test_outside_any_public_call_the_message_is_still_one_line():
    assert public_caller() == "dpfreq"
    with pytest.raises(ParameterError) as info:
        _helper(float("nan"))
    assert str(info.value) == "epsilon of dpfreq must be a number in [1e-06, 1000]; got nan."
    assert "\n" not in str(info.value)


def test_the_caller_is_reset_after_the_call_and_after_an_exception():
    assert inner_release(1.0) == 1.0
    assert public_caller() == "dpfreq"
    with pytest.raises(ParameterError):
        outer_release(0.0)
    assert public_caller() == "dpfreq"
    assert innermost_caller() == "dpfreq"
    with pytest.raises(RuntimeError), public_call("block"):
        raise RuntimeError("boom")
    assert message("x", "a rule", 1) == "x of dpfreq must be a rule; got 1."


def test_another_owner_may_be_named_explicitly():
    with public_call("release_demo"):
        assert message("version", "1", 2, of="the parameters") == (
            "version of the parameters must be 1; got 2.")


def test_concurrent_threads_each_see_their_own_public_call():
    """Two threads inside different public calls at the same moment (a barrier holds both
    inside their call while each reads the name): neither sees the other's."""
    barrier = threading.Barrier(2, timeout=30)
    seen: dict[str, str] = {}

    def run(name: str) -> None:
        @public_errors(name)
        def call() -> None:
            barrier.wait()  # both calls are under way now
            try:
                check_epsilon(-1.0)
            except ParameterError as exc:
                seen[name] = str(exc)
            barrier.wait()

        call()

    threads = [threading.Thread(target=run, args=(n,)) for n in ("release_a", "release_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["release_a"].startswith("epsilon of release_a must be")
    assert seen["release_b"].startswith("epsilon of release_b must be")
    assert public_caller() == "dpfreq"


def test_concurrent_asyncio_tasks_each_see_their_own_public_call():
    """Requests of the collection service run as tasks: each task copies its context."""

    async def request(name: str, ready: asyncio.Event, go: asyncio.Event) -> str:
        with public_call(name):
            ready.set()
            await go.wait()  # the other task enters its call meanwhile
            return public_caller()

    async def main() -> list[str]:
        go = asyncio.Event()
        ready = [asyncio.Event(), asyncio.Event()]
        tasks = [asyncio.create_task(request(n, r, go))
                 for n, r in zip(("req_a", "req_b"), ready, strict=True)]
        for r in ready:
            await r.wait()
        go.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == ["req_a", "req_b"]
