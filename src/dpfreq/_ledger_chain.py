"""The hash chain over a ledger's header and rows (see :class:`dpfreq.ledger.Ledger`).

The header's hash is the digest of its canonical encoding; each row stores the digest of the
previous row's hash (the header's, for the first row) and the row's own canonical encoding,
its id included; the header's ``head`` entry is the digest of the last row's hash and the number
of rows. Deleting, editing, inserting or reordering rows therefore breaks the chain at the first
row affected, and deleting rows at the end breaks the head.

Digests are SHA-256, or HMAC-SHA256 under ``DPFREQ_ARTIFACT_KEY`` when the ledger was created
with that key set (:mod:`dpfreq._signing`). A plain chain detects accidental damage and edits
made without dpfreq's help; anyone can recompute it after a deliberate edit. Only a keyed chain
detects deliberate edits by someone who does not hold the key.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from dpfreq._signing import KEY_VARIABLE, OLD_KEY_VARIABLE, digest, signing_key
from dpfreq.errors import DataError

__all__ = [
    "CHAINS",
    "ROW_COLUMNS",
    "chain_key",
    "head_hash",
    "header_hash",
    "row_hash",
    "verify_chain",
    "walk_chain",
]

#: chain name → whether it is keyed
CHAINS = {"sha256": False, "hmac-sha256": True}
#: the header entries the header hash covers (``unit``, ``order``, ``renyi_budget`` and
#: ``anchor`` are absent when not used)
_HEADER_KEYS = ("kind", "version", "created", "total_epsilon", "total_delta", "unit", "chain",
                "composition", "order", "renyi_budget", "release_delta", "conversion_delta",
                "anchor")
#: the columns of a row, in the order the row hash covers them: what spent, its (ε, δ) at the
#: ledger's unit, the rule that admitted it, its declared plan, its loss and its costs
ROW_COLUMNS = ("id", "time", "command", "label", "epsilon", "delta", "unit", "source", "rule",
               "plan", "loss", "bad", "bound", "renyi", "items")


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def header_hash(key: bytes | None, header: dict[str, Any]) -> str:
    """The digest of the header entries that state the ledger (kind, version, total, unit)."""
    return digest(key, b"dpfreq-ledger-header\0" +
                  _canonical([header.get(k) for k in _HEADER_KEYS]))


def row_hash(key: bytes | None, previous: str, row: tuple[Any, ...]) -> str:
    """The digest of the previous hash and one row (its :data:`ROW_COLUMNS`, in order)."""
    return digest(key, b"dpfreq-ledger-row\0" + previous.encode("ascii") + b"\0" +
                  _canonical(list(row)))


def head_hash(key: bytes | None, last: str, count: int) -> str:
    """The digest of the last row's hash and the number of rows."""
    return digest(key, b"dpfreq-ledger-head\0" + last.encode("ascii") + b"\0" +
                  str(count).encode("ascii"))


def chain_key(chain: Any, label: str) -> bytes | None:
    """The key to hash a ledger of this chain with; refused when the environment's key state
    does not match the ledger (a signed ledger needs its key; an unsigned one is refused while
    a key is set, since anyone could have rewritten it)."""
    if chain not in CHAINS:
        raise DataError(f"{label!r} is not a valid dpfreq ledger: it has no hash chain.")
    key = signing_key()
    if CHAINS[chain] and key is None:
        raise DataError(f"ledger {label!r} is signed (HMAC-SHA256): set {KEY_VARIABLE} to its "
                        "key to use or verify it.")
    if not CHAINS[chain] and key is not None:
        raise DataError(f"ledger {label!r} is not signed, and an unsigned ledger is refused "
                        f"while {KEY_VARIABLE} is set (anyone could have rewritten it); unset "
                        "the key to use it, or start a signed ledger with 'dpfreq ledger init'.")
    return key


def verify_chain(conn: sqlite3.Connection, header: dict[str, Any], label: str,
                 heads: list[str] | None = None) -> tuple[int, str]:
    """``(number of rows, last hash)`` after checking the whole chain; a one-line DataError
    naming the first row that fails (position among the rows, oldest first, and id).

    ``heads``, when given, receives the head of every prefix of the chain (the empty one
    first): the heads the ledger has had, which an anchor kept elsewhere must be one of."""
    return walk_chain(conn, header, label, chain_key(header.get("chain"), label), heads)


def walk_chain(conn: sqlite3.Connection, header: dict[str, Any], label: str, key: bytes | None,
               heads: list[str] | None = None) -> tuple[int, str]:
    """:func:`verify_chain` under ``key``, whatever the environment holds."""
    previous = header_hash(key, header)
    if header.get("header_hash") != previous:
        rotated = ("; or it is signed with another key than this one (after a key rotation, "
                   "carry it over with 'dpfreq resign', the old key in "
                   f"{OLD_KEY_VARIABLE})") if key is not None else ""
        raise DataError(f"ledger {label!r} fails verification at its header: the total, unit, "
                        f"composition rule or creation record was edited{rotated}.")
    count = 0
    columns = ", ".join(ROW_COLUMNS)
    if heads is not None:
        heads.append(head_hash(key, previous, 0))
    for *row, stored in conn.execute(f"SELECT {columns}, hash FROM releases ORDER BY id"):
        count += 1
        expected = row_hash(key, previous, tuple(row))
        if stored != expected:
            raise DataError(f"ledger {label!r} fails verification at row {count} (id {row[0]}): "
                            "its hash does not match it and the rows before it (a row was "
                            "deleted, edited, inserted or reordered at or before it).")
        previous = expected
        if heads is not None:
            heads.append(head_hash(key, previous, count))
    if header.get("head") != head_hash(key, previous, count):
        raise DataError(f"ledger {label!r} fails verification after row {count}: its head "
                        "records another last row (rows were deleted at the end, or the head "
                        "was edited).")
    return count, previous
