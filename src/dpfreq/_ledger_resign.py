"""Re-signing a ledger under a new key (:mod:`dpfreq.resign`): its hash chain rehashed in place.

A ledger's chain (:mod:`dpfreq._ledger_chain`) is keyed with the artefact key, so rotating the
key means rehashing it: the header hash (the chain's name, ``sha256`` or ``hmac-sha256``, is
part of it), every row's hash and the head. Rows are never touched: their ids, order and every
recorded spend stay as they are, and only the ``hash`` column and the header's ``chain``,
``header_hash`` and ``head`` entries change.

It runs in one ``BEGIN IMMEDIATE`` transaction, like a spend: the whole chain and the anchor are
verified under the old key first, the new hashes written, the new chain verified under the new
key, then committed — all or nothing, and no spend of another process can slip in between (the
file is rewritten in place through SQLite's journal, never replaced by a copy, which a process
that holds it open would keep writing to).

An anchored ledger (:mod:`dpfreq._ledger_anchor`) keeps its anchor's meaning: the anchor file
is rewritten (a temporary file renamed over it, just before the commit) with the same row
counts, each with the head the ledger had at that count under the new key; so a copy of the
ledger older than the anchor is still refused. If the process stops between that rename and
the commit, the anchor holds the new heads and the ledger the old chain: running the rotation
again accepts an anchor whose heads are the new key's heads of this very chain (nobody without
the new key can write those) and completes it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from dpfreq._ledger_anchor import check_anchor
from dpfreq._ledger_book import entries_in, header_in, rule_in
from dpfreq._ledger_chain import CHAINS, ROW_COLUMNS, head_hash, header_hash, row_hash, walk_chain
from dpfreq._seal import replace_file
from dpfreq._signing import OLD_KEY_VARIABLE, old_key_refusal
from dpfreq.errors import DataError

__all__ = ["resign_ledger"]

_TIMEOUT_SECONDS = 60.0


def resign_ledger(path: Path, old: bytes | None, new: bytes | None) -> None:
    """Verify the ledger at ``path`` (chain and anchor) under ``old`` and rehash it under
    ``new`` (None: plain SHA-256), in one transaction; a one-line DataError, nothing changed,
    when it does not verify."""
    label = str(path)
    if not path.is_file():
        raise DataError(f"ledger file {label!r} does not exist.")
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True,
                               timeout=_TIMEOUT_SECONDS, isolation_level=None)
    except sqlite3.Error as exc:
        raise DataError(f"cannot open ledger {label!r}: {exc}.") from None
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            _rekey(conn, label, old, new)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise DataError(f"ledger {label!r} cannot be re-signed: {exc}.") from None
    finally:
        conn.close()


def _rekey(conn: sqlite3.Connection, label: str, old: bytes | None, new: bytes | None) -> None:
    """The rotation inside the transaction (see the module docstring)."""
    header = header_in(conn, label)
    chain = header.get("chain")
    if chain not in CHAINS:
        raise DataError(f"{label!r} is not a valid dpfreq ledger: it has no hash chain.")
    why = old_key_refusal(CHAINS[chain], old)
    if why is not None:
        raise DataError(f"ledger {label!r} cannot be re-signed: {why}.")
    if header.get("header_hash") != header_hash(old, header):
        raise DataError(f"ledger {label!r} cannot be re-signed: its header does not verify "
                        f"under {OLD_KEY_VARIABLE} (signed with another key, or edited).")
    heads: list[str] = []
    walk_chain(conn, header, label, old, heads)
    rule_in(header, label)
    entries_in(conn, label)  # every recorded value parses as what it states
    fresh = {**header, "chain": "hmac-sha256" if new else "sha256"}
    hashes, new_heads = _rehash(conn, fresh, new)
    anchor = Path(header["anchor"]) if "anchor" in header else None
    text = None if anchor is None else _anchor_text(anchor, heads, new_heads, label)
    conn.executemany("UPDATE releases SET hash = ? WHERE id = ?", hashes)
    conn.executemany("UPDATE dpfreq_ledger SET value = ? WHERE key = ?",
                     [(fresh[k], k) for k in ("chain", "header_hash", "head")])
    walk_chain(conn, header_in(conn, label), label, new)  # the new chain holds
    if anchor is not None and text is not None:
        replace_file(anchor, text, anchor.stat().st_mode & 0o7777)


def _rehash(conn: sqlite3.Connection, header: dict[str, Any], key: bytes | None
            ) -> tuple[list[tuple[str, int]], list[str]]:
    """``([(hash, id) of every row], heads of every prefix)`` of the chain under ``key``;
    ``header`` receives its ``header_hash`` and ``head``."""
    previous = header["header_hash"] = header_hash(key, header)
    heads = [head_hash(key, previous, 0)]
    hashes: list[tuple[str, int]] = []
    for row in conn.execute(f"SELECT {', '.join(ROW_COLUMNS)} FROM releases ORDER BY id"):
        previous = row_hash(key, previous, tuple(row))
        hashes.append((previous, int(row[0])))
        heads.append(head_hash(key, previous, len(hashes)))
    header["head"] = heads[-1]
    return hashes, heads


def _anchor_text(anchor: Path, heads: list[str], new_heads: list[str], label: str) -> bytes:
    """The anchor's lines with the new heads at the same row counts, once the anchor is
    checked against the old heads (or, after a rotation stopped before its commit, the new)."""
    try:
        check_anchor(anchor, heads, label)
    except DataError as first:
        try:
            check_anchor(anchor, new_heads, label)
        except DataError:
            raise first from None
    counts = [int(line.split()[0]) for line in anchor.read_text(encoding="ascii").splitlines()]
    return "".join(f"{n} {new_heads[n]}\n" for n in counts).encode("ascii")
