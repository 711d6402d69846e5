"""What a command records in the ledger (``--ledger``): the same fields for every command.

A ledger row's ``source`` is the command's own record of what it released
(:func:`release_record`): the input file, the engine, the groups (the public list's names, or
that they are selected privately), the window families, the k values and the time range —
whatever source name the release function passes (a window release names its engine), so the
rows of `dpfreq profile` and `dpfreq reach` read alike (:func:`command_ledger`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["command_ledger", "release_record"]


def _engine_name(engine: Any) -> str:
    """The engine a command runs on, by name (``duckdb`` reads files by default)."""
    if engine is None:
        return "duckdb"
    return engine if isinstance(engine, str) else str(getattr(engine, "name", "spark"))


def _groups_text(kwargs: dict[str, Any]) -> str | None:
    """Which groups a grouped command releases: the public list (its names), or the private
    selection (the names are known after the release only)."""
    group = kwargs.get("group")
    if not isinstance(group, str):
        return None
    listed = kwargs.get("groups_file")
    if isinstance(listed, str) and Path(listed).is_file():
        names = list(dict.fromkeys(line.strip() for line in
                                   Path(listed).read_text(encoding="utf-8").splitlines()
                                   if line.strip()))
        shown = ", ".join(names[:50]) + (f", … ({len(names)} groups)" if len(names) > 50
                                         else "")
        which = f"public list {listed}: {shown}"
    else:
        which = f"selected privately (delta={kwargs.get('delta')})"
    m = kwargs.get("max_groups_per_item")
    bound = ("" if m is None else ", at most m per item, m chosen privately" if m == "auto"
             else f", at most {m} per item")
    drop = ", rows without a group dropped" if kwargs.get("null_group") == "drop" else ""
    return f"groups by {group} ({which}{bound}{drop})"


def release_record(source: str, kwargs: dict[str, Any]) -> str:
    """The ledger's ``source`` of a command: the input (``source``: its first FILE argument),
    the engine (for a command that has one), and what is released where the command says it
    — the groups, the window families, the k values, the time range. The same fields, in the
    same words, for every command (``kwargs``: the command's parameters).

    Examples
    --------
    >>> release_record("log.csv", {"engine": None, "k_text": "1,3",
    ...                            "window_text": ("cumulative", "7")})
    'log.csv; engine duckdb; windows cumulative,7; k 1,3'
    """
    parts = [source]
    if "engine" in kwargs:
        parts.append(f"engine {_engine_name(kwargs['engine'])}")
    groups = _groups_text(kwargs)
    if groups is not None:
        parts.append(groups)
    windows = kwargs.get("window_text")
    if windows:
        parts.append(f"windows {','.join(windows)}")
    if kwargs.get("k_text"):
        parts.append(f"k {kwargs['k_text']}")
    if kwargs.get("start") is not None and kwargs.get("end") is not None:
        zone = kwargs.get("timezone") or "UTC"
        parts.append(f"time {kwargs['start']} to {kwargs['end']} ({zone})")
    elif kwargs.get("horizon") is not None:
        parts.append(f"periods 1..{kwargs['horizon']}")
    return "; ".join(parts)


def command_ledger(ledger: Any, command: str, unit: str | None, source: str) -> Any:
    """``ledger`` recording every spend with ``source`` (the command's record, whatever source
    the release function names)."""
    from dpfreq.ledger import Ledger

    class CommandLedger(Ledger):
        def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
                  unit: str | None = None, source: str | None = None,
                  loss: Any = None) -> None:
            super().spend(epsilon, delta, label=label, unit=unit, source=self.source,
                          loss=loss)

    return CommandLedger(ledger.path, command=command, unit=unit, source=source)
