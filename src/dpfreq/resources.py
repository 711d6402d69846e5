"""Memory estimates checked before work starts: refuse with a sentence, never a MemoryError.

A release that would need more memory than the machine has should fail at the public boundary,
before any budget is spent or noise drawn, with a message saying how much it needs and how much
is available — not with a ``MemoryError`` (or the kernel's OOM killer) halfway through.
"""

from __future__ import annotations

import os

from dpfreq._validate import message
from dpfreq.errors import ParameterError

__all__ = ["available_memory_bytes", "check_memory", "format_bytes"]

_GIB = 1024**3


def available_memory_bytes() -> int:
    """Memory available to a new allocation without swapping, in bytes.

    ``MemAvailable`` of ``/proc/meminfo`` on Linux (the kernel's own estimate, counting
    reclaimable caches); elsewhere the free physical pages from ``sysconf``. Returns 0 when
    neither is known (then :func:`check_memory` checks nothing).

    Examples
    --------
    >>> available_memory_bytes() >= 0
    True
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 0


def format_bytes(count: float) -> str:
    """``count`` bytes in the largest binary unit that keeps it >= 1 (e.g. ``'74.5 GiB'``).

    Examples
    --------
    >>> format_bytes(80 * 1024**3)
    '80.0 GiB'
    """
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def check_memory(needed_bytes: float, *, param: str, value: object,
                 what: str = "the computation", available: int | None = None) -> None:
    """Refuse (ParameterError) if ``needed_bytes`` exceeds the memory available now.

    Parameters
    ----------
    needed_bytes : float
        The estimate (a float so that a caller can compute it without int64 overflow).
    param, value : str, object
        The parameter that drives the size and the value given, for the usual message shape
        (the function named is the public call, :func:`dpfreq.errors.public_caller`).
    what : str
        What needs the memory, e.g. ``"the noisy histogram of d counts"``.
    available : int, optional
        Bytes available (default: :func:`available_memory_bytes`; 0 means unknown).

    Raises
    ------
    ParameterError
        ``"<param> of <function> must be small enough for <what> to fit in memory (needs X GiB,
        Y GiB available); got <value>."``

    Examples
    --------
    >>> try:
    ...     check_memory(8 * 10**10, param="domain_size", value=10**10,
    ...                  what="the counts", available=2**34)
    ... except ValueError as exc:
    ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
    domain_size of dpfreq must be small enough for the counts to fit in memory
    (needs 74.5 GiB, 16.0 GiB available); got 10000000000.
    """
    free = available_memory_bytes() if available is None else int(available)
    if free > 0 and needed_bytes > free:
        rule = (f"small enough for {what} to fit in memory (needs {format_bytes(needed_bytes)}, "
                f"{format_bytes(free)} available)")
        raise ParameterError(message(param, rule, value))
