"""A ledger's anchor: its heads written to a second file, so that a restored older copy shows.

A hash chain inside one file proves that its rows were not edited, deleted, inserted or
reordered, but an *older copy* of the whole file is a valid chain too: restoring yesterday's
backup brings yesterday's budget back. Only something kept outside the file can see that. A
ledger created with an anchor appends ``"<rows> <head>"`` to the anchor file after every spend
(and at creation); :meth:`dpfreq.ledger.Ledger.verify`, every spend and every check then demand
that each head the anchor recorded is one the ledger's chain has had. A ledger copy older than
the anchor's last head fails, naming both row counts.

What this does not see: an anchor rolled back together with the ledger (keep it where whoever can
restore the ledger cannot, e.g. another machine or append-only storage), or an anchor deleted
(then the ledger refuses to be used until it is restored). The same check is available without
an anchor file: keep the head printed after each spend and pass it to ``dpfreq ledger verify
FILE --expect-head HEAD``.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpfreq.errors import DataError

__all__ = ["append_head", "check_anchor", "check_head"]


def append_head(anchor: Path, count: int, head: str) -> None:
    """Append one head to the anchor file (created when missing), flushed to disk."""
    try:
        with open(anchor, "a", encoding="ascii") as out:
            out.write(f"{count} {head}\n")
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise DataError(f"cannot write the ledger's anchor {str(anchor)!r}: {exc.strerror}; "
                        "the spend is recorded in the ledger, restore the anchor's "
                        "directory.") from None


def check_anchor(anchor: Path, heads: list[str], label: str) -> None:
    """Refuse (one-line DataError) a ledger whose chain lacks a head its anchor recorded."""
    try:
        lines = anchor.read_text(encoding="ascii").splitlines()
    except OSError:
        raise DataError(f"ledger {label!r} is anchored to {str(anchor)!r}, which cannot be "
                        "read; restore it (the ledger is not used without its anchor).") from None
    except UnicodeDecodeError:  # not the ASCII lines an anchor holds
        lines = None
    malformed = DataError(f"the anchor {str(anchor)!r} of ledger {label!r} has a malformed "
                          "line.")
    if lines is None:
        raise malformed from None
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise malformed
        count, head = int(parts[0]), parts[1]
        if count >= len(heads) or heads[count] != head:
            raise DataError(
                f"ledger {label!r} fails its anchor {str(anchor)!r}: the anchor recorded a head "
                f"after {count} rows that this ledger ({len(heads) - 1} rows) never had; it is "
                "an older copy (rolled back) or another ledger.")


def check_head(expected: str, heads: list[str], label: str) -> int:
    """The number of rows at which the chain had head ``expected`` (a DataError if never)."""
    for count, head in enumerate(heads):
        if head == expected.strip().lower():
            return count
    raise DataError(f"ledger {label!r} never had the head {expected.strip()[:16]!r}...: it is "
                    "an older copy (rolled back) or another ledger.")
