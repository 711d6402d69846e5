"""A privacy ledger: a budget accountant kept in a SQLite file, shared by processes.

:class:`Ledger` records every release (what spent it, ε, δ, unit of privacy, source, time) in
one SQLite database and refuses a spend that would take the recorded total past the ledger's
budget. It implements :class:`dpfreq.budget.BudgetAccountant`, so it is accepted wherever an
in-memory :class:`~dpfreq.budget.Accountant` is (``accountant=``), and the command line's
``--ledger FILE`` option passes one.

Concurrency: each spend runs in one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write
lock before reading the spent total, so the check and the insert are atomic with respect to
every other process using the file: two processes can never both see the same remaining budget
and both spend it. The database is in WAL mode so that readers (``dpfreq ledger show``) never
block a spend. Amounts are stored as exact fractions (``"1/10"``), the same exact arithmetic as
the in-memory accountant: ten spends of 0.1 exhaust a budget of 1.0 exactly.

Integrity: a hash chain runs over the header and every row (:meth:`Ledger.verify`, ``dpfreq
ledger verify FILE``), so a row deleted, edited, inserted or reordered is detected, naming the
first row affected; every spend checks the chain before it appends. The chain is SHA-256, which
detects accidental damage and edits made by hand, but which anyone editing the file can
recompute. When ``DPFREQ_ARTIFACT_KEY`` is set (a secret of at least 32 bytes in hexadecimal, the
key of signed artefacts, :mod:`dpfreq.artifacts`) a new ledger is chained with HMAC-SHA256 under
it instead, which nobody without the key can recompute; such a ledger then needs the key for
every spend and verification, and an unsigned ledger is refused while a key is set.

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "budget.db"
>>> ledger = Ledger.create(path, PrivacyBudget(1.0))
>>> ledger.spend(0.25, label="release_profile", unit="item", source="events.csv")
>>> ledger.remaining
PrivacyBudget(epsilon=0.75, delta=0.0)
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpfreq._ledger_chain import (
    ROW_COLUMNS,
    chain_key,
    head_hash,
    header_hash,
    row_hash,
    verify_chain,
)
from dpfreq._signing import signing_key
from dpfreq._validate import check_choice, check_delta, check_epsilon, message
from dpfreq.budget import Accountant, PrivacyBudget, convert_spend, exact_fraction
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.release import UNITS

__all__ = ["LEDGER_VERSION", "Ledger"]

LEDGER_VERSION = 2
_KIND = "dpfreq-ledger"
_TIMEOUT_SECONDS = 60.0
_SCHEMA = (
    "CREATE TABLE dpfreq_ledger (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
    "command TEXT, label TEXT NOT NULL, epsilon TEXT NOT NULL, delta TEXT NOT NULL, "
    "unit TEXT, source TEXT, hash TEXT NOT NULL)",
)


#: No recorded value exceeds the largest float (every figure the ledger reports is a float).
_LARGEST = Fraction(sys.float_info.max)


def _fraction_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, init=False)
class Ledger:
    """A privacy budget kept in a SQLite file; an accountant shared by processes.

    Parameters
    ----------
    path : str or Path
        An existing ledger file (make one with :meth:`create` or ``dpfreq ledger init``).
    command, unit, source : str, optional
        Defaults recorded with every spend through this object when the spender does not give
        them (the command line sets ``command`` to e.g. ``"dpfreq profile"`` and ``source`` to
        the input file).

    Raises
    ------
    DataError
        If the file does not exist or is not a dpfreq ledger of a supported version.

    Notes
    -----
    Sequential composition: the ledger guarantees that the ε (and δ) of all recorded releases
    sum to at most the total. That is the guarantee for the data as a whole only if every
    release on the same data is recorded in the same ledger. Units of privacy are kept apart,
    or converted where sound when the ledger was created with a ``unit`` (:meth:`create`).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "budget.db"
    >>> _ = Ledger.create(path, PrivacyBudget(1.0))
    >>> ledger = Ledger(path, source="events.csv")  # another process opens the same file
    >>> ledger.spend(0.6, label="release_profile", unit="item")
    >>> try:
    ...     ledger.spend(0.6, label="release_window_counts", unit="item")
    ... except BudgetExceededError:
    ...     print("refused")
    refused
    >>> [(row["label"], row["epsilon"], row["source"]) for row in ledger.ledger]
    [('release_profile', 0.6, 'events.csv')]
    >>> ledger.remaining.epsilon
    0.4
    """

    path: Path
    command: str | None = None
    unit: str | None = None
    source: str | None = None

    def __init__(self, path: str | Path, *, command: str | None = None,
                 unit: str | None = None, source: str | None = None) -> None:
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "source", source)
        self._read_total()  # fail now, with one message, if the file is not a ledger

    @classmethod
    def create(cls, path: str | Path, total: PrivacyBudget, *,
               unit: str | None = None) -> Ledger:
        """Create a new, empty ledger with budget ``total``; refuse to overwrite a file.

        ``unit`` states the unit of privacy of the budget: spends at other units are then
        converted where sound (:func:`dpfreq.budget.convert_spend`; the recorded ε is the
        charge and the row's ``conversion`` says so) and refused otherwise. Without it the
        ledger keeps relations apart: every spend must be at the unit first spent at.
        """
        if not isinstance(total, PrivacyBudget):
            raise ParameterError(message("total", "Ledger.create", "a PrivacyBudget", total))
        header = [("unit", check_choice(unit, "unit", "Ledger.create", UNITS))] if unit else []
        target = Path(path)
        if target.exists():
            raise DataError(f"ledger file {str(target)!r} already exists; "
                            "choose a new path (a ledger is never overwritten).")
        if not target.parent.is_dir():
            raise DataError(f"cannot create ledger {str(target)!r}: directory "
                            f"{str(target.parent)!r} does not exist.")
        key = signing_key()
        entries = dict([("kind", _KIND), ("version", str(LEDGER_VERSION)), ("created", _now()),
                        ("total_epsilon", _fraction_text(total.exact_epsilon)),
                        ("total_delta", _fraction_text(total.exact_delta)), *header,
                        ("chain", "hmac-sha256" if key else "sha256")])
        entries["header_hash"] = header_hash(key, entries)
        entries["head"] = head_hash(key, entries["header_hash"], 0)
        try:
            conn = sqlite3.connect(target, timeout=_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise DataError(f"cannot create ledger {str(target)!r}: {exc}.") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.executemany("INSERT INTO dpfreq_ledger (key, value) VALUES (?, ?)",
                             list(entries.items()))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise DataError(f"cannot create ledger {str(target)!r}: {exc}.") from None
        finally:
            conn.close()
        return cls(target)

    def bind(self, *, command: str | None = None, unit: str | None = None,
             source: str | None = None) -> Ledger:
        """The same ledger with other defaults for the recorded command, unit and source."""
        return Ledger(self.path, command=command or self.command, unit=unit or self.unit,
                      source=source or self.source)

    # -- storage -------------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            raise DataError(f"ledger file {str(self.path)!r} does not exist; create it with "
                            f"'dpfreq ledger init {self.path} --epsilon TOTAL'.")
        uri = self.path.resolve().as_uri() + "?mode=rw"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise DataError(f"cannot open ledger {str(self.path)!r}: {exc}.") from None
        try:
            yield conn
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise DataError(f"ledger {str(self.path)!r} cannot be used: {exc}.") from None
        finally:
            conn.close()

    def _bad(self, what: str) -> DataError:
        return DataError(f"{str(self.path)!r} is not a valid dpfreq ledger: {what}.")

    def _fraction(self, text: Any, what: str, *, upper: Fraction | None = None) -> Fraction:
        try:
            value = Fraction(str(text))
        except (ValueError, ZeroDivisionError):
            raise self._bad(f"{what} is not an exact fraction") from None
        if value < 0 or (upper is not None and value >= upper) or value > _LARGEST:
            raise self._bad(f"{what} is out of range")
        return value

    def _header_in(self, conn: sqlite3.Connection) -> dict[str, Any]:
        try:
            rows = dict(conn.execute("SELECT key, value FROM dpfreq_ledger").fetchall())
        except sqlite3.DatabaseError:
            raise self._bad("not a SQLite database with a dpfreq_ledger table") from None
        if rows.get("kind") != _KIND:
            raise self._bad("it has no dpfreq ledger header")
        if rows.get("version") == "1":
            raise self._bad("it is a version 1 ledger, made before ledgers carried a hash chain, "
                            "and dpfreq 0.x does not migrate it; start a new ledger with "
                            "'dpfreq ledger init'")
        if rows.get("version") != str(LEDGER_VERSION):
            raise self._bad(f"version {rows.get('version')!r} is not {LEDGER_VERSION}")
        return rows

    def _total_in(self, conn: sqlite3.Connection) -> tuple[Fraction, Fraction]:
        rows = self._header_in(conn)
        eps = self._fraction(rows.get("total_epsilon"), "the total epsilon")
        dlt = self._fraction(rows.get("total_delta"), "the total delta", upper=Fraction(1))
        if eps == 0:
            raise self._bad("the total epsilon is 0")
        return eps, dlt

    def _charge_in(self, conn: sqlite3.Connection, e: Fraction, d: Fraction,
                   unit: str | None, func: str) -> tuple[Fraction, Fraction]:
        """The spend as charged to the budget's unit (relations kept apart or converted)."""
        row = conn.execute("SELECT value FROM dpfreq_ledger WHERE key = 'unit'").fetchone()
        if row is None and unit is not None:
            seen = {u for (u,) in conn.execute("SELECT DISTINCT unit FROM releases")}
            seen -= {None, unit}
            if seen:
                raise ParameterError(message(
                    "unit", func, f"{seen.pop()!r}, the unit already spent at (this ledger keeps "
                    "relations apart; create one with a unit to convert where sound)", unit))
        e2, d2, _ = convert_spend(e, d, unit, row[0] if row else None, func)
        return e2, d2

    def _conversion(self, conn: sqlite3.Connection, unit: str | None) -> str | None:
        row = conn.execute("SELECT value FROM dpfreq_ledger WHERE key = 'unit'").fetchone()
        if row is None or unit is None or unit == row[0]:
            return None
        return convert_spend(Fraction(1), Fraction(0), unit, row[0], "Ledger")[2]

    def _spent_in(self, conn: sqlite3.Connection) -> tuple[Fraction, Fraction]:
        eps, dlt = Fraction(0), Fraction(0)
        for e, d in conn.execute("SELECT epsilon, delta FROM releases"):
            eps += self._fraction(e, "a recorded epsilon")
            dlt += self._fraction(d, "a recorded delta")
        if eps > _LARGEST or dlt > 1:
            raise self._bad("its recorded spends sum past any budget")
        return eps, dlt

    def _read_total(self) -> tuple[Fraction, Fraction]:
        with self._connect() as conn:
            return self._total_in(conn)

    # -- the accountant interface ------------------------------------------------------------

    @property
    def total(self) -> PrivacyBudget:
        """The budget all recorded releases together may not exceed."""
        eps, dlt = self._read_total()
        return PrivacyBudget(float(eps), float(dlt))

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        """(ε, δ) recorded so far, exactly."""
        with self._connect() as conn:
            return self._spent_in(conn)

    #: (ε, δ) recorded so far, as floats: the same view of ``spent_exact`` as the accountant's
    spent = Accountant.spent

    @property
    def remaining(self) -> PrivacyBudget:
        """What is left, in the ledger's unit: ``PrivacyBudget(epsilon=0.0, ...)`` once the ε
        budget is exhausted (never ``None``; it may be below the smallest ε a release accepts).
        """
        with self._connect() as conn:
            total_e, total_d = self._total_in(conn)
            eps, dlt = self._spent_in(conn)
        return PrivacyBudget._left(total_e - eps, total_d - dlt)

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every recorded release, oldest first: time, command, label, ε, δ, unit, source."""
        with self._connect() as conn:
            self._total_in(conn)
            return self._rows_in(conn)

    def _rows_in(self, conn: sqlite3.Connection) -> list[dict[str, Any]]:
        rows = conn.execute("SELECT time, command, label, epsilon, delta, unit, source "
                            "FROM releases ORDER BY id").fetchall()
        return [{"time": t, "command": c, "label": lb,
                 "epsilon": float(self._fraction(e, "a recorded epsilon")),
                 "delta": float(self._fraction(d, "a recorded delta")), "unit": u, "source": s,
                 "conversion": self._conversion(conn, u)}
                for t, c, lb, e, d, u, s in rows]

    def _refuse_if_over(self, conn: sqlite3.Connection, e: Fraction, d: Fraction) -> None:
        total_e, total_d = self._total_in(conn)
        eps, dlt = self._spent_in(conn)
        left_e, left_d = total_e - eps, total_d - dlt
        if e > left_e or d > left_d:
            raise BudgetExceededError(
                f"spending (epsilon={float(e)!r}, delta={float(d)!r}) would exceed the budget "
                f"of ledger {str(self.path)!r}: remaining (epsilon={float(left_e)!r}, "
                f"delta={float(left_d)!r}) of total (epsilon={float(total_e)!r}, "
                f"delta={float(total_d)!r}); no noise was drawn."
            )

    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None) -> None:
        """Raise :class:`BudgetExceededError` if spending (ε, δ) at ``unit`` now would exceed
        the total (a ParameterError if the unit does not convert to the ledger's), and a
        DataError if the ledger fails :meth:`verify` (a spend would be refused for it too).

        Advisory only: another process may spend in between; :meth:`spend` is the atomic step.
        """
        check_epsilon(epsilon, "epsilon", "Ledger.check")
        check_delta(delta, "delta", "Ledger.check")
        with self._connect() as conn:
            verify_chain(conn, self._header_in(conn), str(self.path))
            e, d = self._charge_in(conn, exact_fraction(epsilon), exact_fraction(delta),
                                   unit or self.unit, "Ledger.check")
            self._refuse_if_over(conn, e, d)

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None) -> None:
        """Record a release of (ε, δ), or refuse it if the ledger's total would be exceeded.

        Check and record are one ``BEGIN IMMEDIATE`` transaction: concurrent processes are
        serialized on SQLite's write lock, so together they never overspend. A refused spend
        records nothing. ``unit`` and ``source`` default to the ones this object was bound with.
        The recorded ε and δ are the charge at the ledger's unit (see :meth:`create`).
        """
        check_epsilon(epsilon, "epsilon", "Ledger.spend")
        check_delta(delta, "delta", "Ledger.spend")
        e, d = exact_fraction(epsilon), exact_fraction(delta)
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                header = self._header_in(conn)
                count, last = verify_chain(conn, header, str(self.path))
                e, d = self._charge_in(conn, e, d, unit or self.unit, "Ledger.spend")
                self._refuse_if_over(conn, e, d)
                self._append(conn, chain_key(header.get("chain"), str(self.path)), count, last,
                             (_now(), self.command, str(label), _fraction_text(e),
                              _fraction_text(d), unit or self.unit, source or self.source))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _append(conn: sqlite3.Connection, key: bytes | None, count: int, last: str,
                values: tuple[Any, ...]) -> None:
        """Insert one row after ``last`` (the chain's last hash) and move the head to it."""
        (next_id,) = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM releases").fetchone()
        row = (next_id, *values)
        digest = row_hash(key, last, row)
        conn.execute(f"INSERT INTO releases ({', '.join(ROW_COLUMNS)}, hash) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*row, digest))
        conn.execute("UPDATE dpfreq_ledger SET value = ? WHERE key = 'head'",
                     (head_hash(key, digest, count + 1),))

    def verify(self) -> int:
        """Check the hash chain over the header and every row; returns the number of rows.

        Raises
        ------
        DataError
            One line naming the first row that fails (its position, oldest first, and its id)
            when a row was deleted, edited, inserted or reordered; naming the header when the
            total or unit was edited; saying rows are missing at the end when the last rows
            were deleted. Also when the ledger is signed and ``DPFREQ_ARTIFACT_KEY`` is not set
            (or is another key), or it is unsigned while a key is set.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> ledger = Ledger.create(pathlib.Path(tempfile.mkdtemp()) / "b.db", PrivacyBudget(1.0))
        >>> ledger.spend(0.5, label="release_profile", unit="item")
        >>> ledger.verify()
        1
        """
        with self._connect() as conn:
            conn.execute("BEGIN")  # one consistent snapshot of header and rows
            header = self._header_in(conn)
            self._total_in(conn)
            count, _ = verify_chain(conn, header, str(self.path))
            self._spent_in(conn)
            conn.execute("COMMIT")
        return count

    def summary(self) -> dict[str, Any]:
        """Total, spent, remaining and every release, as a JSON-ready mapping.

        ``unit`` is the unit the budget is in: the one stated at :meth:`create`
        (``unit_stated`` true), else the one unit spent at (the ledger keeps units apart), or
        None before any spend. ``spent_by_unit`` gives, per unit spent at, the ε and δ charged
        to the budget (converted to the budget's unit where the ledger converts) and the
        number of releases; total, spent and remaining are all in the budget's unit.
        ``remaining_by_unit`` gives, for a ledger with a stated unit, the ε still spendable at
        each unit that converts to it. ``chain`` is ``"ok: N rows"`` when :meth:`verify` passes,
        else its one-line reason (the report is still given, for the auditor to see).
        """
        with self._connect() as conn:
            conn.execute("BEGIN")  # one consistent snapshot of header and releases
            total_e, total_d = self._total_in(conn)
            eps, dlt = self._spent_in(conn)
            rows = self._rows_in(conn)
            spends = conn.execute("SELECT unit, epsilon, delta FROM releases "
                                  "ORDER BY id").fetchall()
            unit = conn.execute("SELECT value FROM dpfreq_ledger WHERE key = 'unit'").fetchone()
            conn.execute("COMMIT")
        try:
            chain = f"ok: {self.verify()} rows"
        except ParameterError as exc:  # a broken chain, or a key that does not fit
            chain = str(exc)
        by_unit: dict[str | None, list[Fraction]] = {}
        for u, e, d in spends:
            part = by_unit.setdefault(u, [Fraction(0), Fraction(0), Fraction(0)])
            part[0] += self._fraction(e, "a recorded epsilon")
            part[1] += self._fraction(d, "a recorded delta")
            part[2] += 1
        stated = [u for u in by_unit if u is not None]
        budget_unit = unit[0] if unit else (stated[0] if len(stated) == 1 else None)
        return {"ledger": str(self.path), "version": LEDGER_VERSION,
                "unit": budget_unit, "unit_stated": unit is not None, "chain": chain,
                "spent_by_unit": [{"unit": u, "epsilon": float(e), "delta": float(d),
                                   "releases": int(n)} for u, (e, d, n) in by_unit.items()],
                "total": {"epsilon": float(total_e), "delta": float(total_d)},
                "spent": {"epsilon": float(eps), "delta": float(dlt)},
                "remaining": {"epsilon": float(max(total_e - eps, Fraction(0))),
                              "delta": float(max(total_d - dlt, Fraction(0)))},
                "remaining_by_unit": _left_by_unit(max(total_e - eps, Fraction(0)),
                                                   unit[0] if unit else None),
                "releases": rows}


def _left_by_unit(left: Fraction, budget_unit: str | None) -> dict[str, float]:
    """The ε still spendable at each unit that converts to ``budget_unit`` (a spend at ``item``
    is charged 2ε to an ``item_replace`` budget, so half as much is left at ``item``)."""
    if budget_unit is None:
        return {}
    out = {}
    for u in UNITS:
        try:
            factor = convert_spend(Fraction(1), Fraction(0), u, budget_unit, "Ledger")[0]
        except ParameterError:
            continue
        out[u] = float(left / factor)
    return out
