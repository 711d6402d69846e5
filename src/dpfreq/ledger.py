"""A privacy ledger: a budget accountant kept in a SQLite file, shared by processes.

:class:`Ledger` records every release (what spent it, ε, δ, unit of privacy, source, time, its
privacy loss and the rule that admitted it) in one SQLite database and refuses a release the
ledger's composition rule does not admit. It implements :class:`dpfreq.budget.BudgetAccountant`,
so it is accepted wherever an in-memory :class:`~dpfreq.budget.Accountant` is (``accountant=``),
and the command line's ``--ledger FILE`` option passes one. Both admit releases by the same rule
(:mod:`dpfreq.accounting.rules`: ``"tight"`` by default, or ``"basic"``) and report what was
spent under each rule (:meth:`Ledger.spending`).

Concurrency: each spend runs in one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write
lock before reading what was spent, so the check and the insert are atomic with respect to every
other process using the file: two processes can never both see the same remaining budget and
both spend it. The database is in WAL mode so that readers (``dpfreq ledger show``) never block
a spend. Amounts are stored as exact fractions (``"1/10"``), the same exact arithmetic as the
in-memory accountant.

Integrity: a hash chain runs over the header (the total and the rule) and every row, its loss
and costs included (:meth:`Ledger.verify`, ``dpfreq ledger verify FILE``), so a row deleted,
edited, inserted or reordered is detected, naming the first row affected; every spend checks
the chain before it appends. The chain is SHA-256, which detects accidental damage and edits
made by hand, but which anyone editing the file can recompute. When ``DPFREQ_ARTIFACT_KEY`` is
set (a secret of at least 32 bytes in hexadecimal, the key of signed artefacts,
:mod:`dpfreq.artifacts`) a new ledger is chained with HMAC-SHA256 under it instead, which nobody
without the key can recompute. A chain inside one file cannot see that an older copy of the
whole file was restored (its budget comes back); an *anchor* kept elsewhere can (``anchor=``,
:mod:`dpfreq._ledger_anchor`), as can a head kept from an earlier spend
(``verify(expect_head=...)``).

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpfreq._ledger_anchor import append_head, check_anchor, check_head
from dpfreq._ledger_book import (
    LEDGER_VERSION,
    charge_in,
    entries_in,
    header_in,
    new_header,
    row_values,
    rows_in,
    rule_in,
    summary_of,
)
from dpfreq._ledger_chain import (
    ROW_COLUMNS,
    chain_key,
    head_hash,
    row_hash,
    verify_chain,
)
from dpfreq._validate import message
from dpfreq.accounting.book import (
    Entry,
    Spending,
    admission,
    declaration,
    refused_spend,
    share,
    spending,
    totals_of,
)
from dpfreq.accounting.losses import PrivacyLoss
from dpfreq.accounting.plans import BudgetShare
from dpfreq.accounting.rules import Rule, spent_epsilon
from dpfreq.accounting.units import plan_items
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, DataError, ParameterError, public_errors

__all__ = ["LEDGER_VERSION", "Ledger"]

_TIMEOUT_SECONDS = 60.0
_SCHEMA = (
    "CREATE TABLE dpfreq_ledger (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
    "command TEXT, label TEXT NOT NULL, epsilon TEXT NOT NULL, delta TEXT NOT NULL, "
    "unit TEXT, source TEXT, rule TEXT NOT NULL, plan INTEGER, loss TEXT NOT NULL, "
    "bad TEXT NOT NULL, bound TEXT, renyi TEXT, items TEXT, hash TEXT NOT NULL)",
)


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
        If the file does not exist or is not a dpfreq ledger of this version (an older ledger
        is refused with the one line that says how to start a new one).

    Notes
    -----
    The ledger guarantees that all recorded releases together are ``(ε, δ)``-DP for its total
    under its rule (:mod:`dpfreq.accounting.rules`): that is the guarantee for the data as a
    whole only if every release on the same data is recorded in the same ledger. Units of
    privacy are kept apart, or converted where sound when the ledger was created with a
    ``unit`` (:meth:`create`).

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
        self._read(lambda conn, header: rule_in(header, self._label))  # fail now, one line

    @classmethod
    @public_errors("Ledger.create")
    def create(cls, path: str | Path, total: PrivacyBudget, *, unit: str | None = None,
               composition: str = "tight", anchor: str | Path | None = None) -> Ledger:
        """Create a new, empty ledger with budget ``total``; refuse to overwrite a file.

        ``unit`` states the unit of privacy of the budget: spends at other units are then
        converted where sound (:func:`dpfreq.budget.convert_spend`; the recorded ε is the
        charge and the row's ``conversion`` says so) and refused otherwise. Without it the
        ledger keeps relations apart: every spend must be at the unit first spent at.
        ``composition`` is the rule releases are admitted by (``"tight"``, the default, or
        ``"basic"``; :class:`dpfreq.budget.Accountant` says why). ``anchor``: a second file
        (best on other storage) the ledger appends its head to after every spend, so that a
        restored older copy of the ledger is refused (:mod:`dpfreq._ledger_anchor`).
        """
        if not isinstance(total, PrivacyBudget):
            raise ParameterError(message("total", "a PrivacyBudget", total))
        target = Path(path)
        entries = new_header(total.exact_epsilon, total.exact_delta, unit, composition, anchor)
        _check_new(target, anchor)
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
        if anchor is not None:
            append_head(Path(anchor), 0, entries["head"])
        return cls(target)

    def bind(self, *, command: str | None = None, unit: str | None = None,
             source: str | None = None) -> Ledger:
        """The same ledger with other defaults for the recorded command, unit and source."""
        return Ledger(self.path, command=command or self.command, unit=unit or self.unit,
                      source=source or self.source)

    # -- storage -------------------------------------------------------------------------

    @property
    def _label(self) -> str:
        return str(self.path)

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

    def _read(self, read: Any, *, verified: bool = False) -> Any:
        """``read(conn, header)`` in one consistent snapshot (``verified``: chain and anchor
        checked first)."""
        with self._connect() as conn:
            conn.execute("BEGIN")
            try:
                header = header_in(conn, self._label)
                if verified:
                    self._verified(conn, header)
                return read(conn, header)
            finally:
                conn.execute("COMMIT")

    def _verified(self, conn: sqlite3.Connection, header: dict[str, Any],
                  heads: list[str] | None = None) -> tuple[int, str]:
        heads = [] if heads is None else heads
        count, last = verify_chain(conn, header, self._label, heads)
        if "anchor" in header:
            check_anchor(Path(header["anchor"]), heads, self._label)
        return count, last

    def _book(self, conn: sqlite3.Connection, header: dict[str, Any]) -> tuple[Rule, list[Entry]]:
        return rule_in(header, self._label), entries_in(conn, self._label)

    # -- the accountant interface ------------------------------------------------------------

    @property
    def total(self) -> PrivacyBudget:
        """The budget all recorded releases together may not exceed."""
        rule = self._read(lambda conn, header: rule_in(header, self._label))
        return PrivacyBudget(float(rule.epsilon), float(rule.delta))

    @property
    def composition(self) -> str:
        """The rule releases are admitted by (``"tight"`` or ``"basic"``)."""
        return str(self._read(lambda conn, header: rule_in(header, self._label).composition))

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        """(ε, δ) spent under the ledger's rule, exactly (as
        :attr:`dpfreq.budget.Accountant.spent_exact`)."""
        rule, entries = self._read(self._book)
        totals = totals_of(rule, entries)
        eps, _ = spent_epsilon(rule, totals)
        dlt = totals.delta if rule.composition == "basic" else totals.bad
        return (eps if eps is not None else rule.epsilon), dlt

    #: what was spent so far, a PrivacyBudget: the same view of ``spent_exact`` as the
    #: accountant's
    spent = Accountant.spent

    @property
    def remaining(self) -> PrivacyBudget:
        """What is left, in the ledger's unit (as :attr:`dpfreq.budget.Accountant.remaining`):
        ``PrivacyBudget(epsilon=0.0, ...)`` once the ε budget is exhausted."""
        rule, entries = self._read(self._book)
        s = spending(rule, entries, with_plan=False)
        return PrivacyBudget._left(Fraction(s.remaining_epsilon), Fraction(s.remaining_delta))

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every recorded release, oldest first: time, command, label, ε, δ, unit, source,
        conversion, the rule that admitted it and its loss."""
        return list(self._read(lambda conn, header: rows_in(conn, header, self._label)))

    @public_errors("Ledger.check")
    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> None:
        """Raise :class:`BudgetExceededError` if spending (ε, δ) at ``unit`` now would not be
        admitted (a ParameterError if the unit does not convert to the ledger's), and a
        DataError if the ledger fails :meth:`verify` (a spend would be refused for it too).

        Advisory only: another process may spend in between; :meth:`spend` is the atomic step.
        """
        def read(conn: sqlite3.Connection, header: dict[str, Any]) -> None:
            self._admit(conn, header, epsilon, delta, unit, loss)

        self._read(read, verified=True)

    def _admit(self, conn: sqlite3.Connection, header: dict[str, Any], epsilon: Any, delta: Any,
               unit: str | None, loss: Any) -> tuple[Entry, Fraction, Fraction]:
        rule, entries = self._book(conn, header)
        e, d, charged = charge_in(conn, header, epsilon, delta, unit or self.unit, loss)
        entry, why = admission(rule, entries, e, d, charged)
        if entry is None:
            s = spending(rule, entries, with_plan=False)
            raise BudgetExceededError(refused_spend(
                f"ledger {str(self.path)!r}", (epsilon, delta), (e, d), why,
                (s.remaining_epsilon, s.remaining_delta), (rule.epsilon, rule.delta)))
        return entry, e, d

    @public_errors("Ledger.spend")
    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None,
              loss: PrivacyLoss | None = None) -> None:
        """Record a release of (ε, δ), or refuse it if the ledger's rule does not admit it.

        Check and record are one ``BEGIN IMMEDIATE`` transaction: concurrent processes are
        serialized on SQLite's write lock, so together they never overspend. A refused spend
        records nothing. ``unit`` and ``source`` default to the ones this object was bound with;
        ``loss`` is the release's privacy loss (default: the one its (ε, δ) states). The
        recorded ε and δ are the charge at the ledger's unit (see :meth:`create`).
        """
        def write(conn: sqlite3.Connection, header: dict[str, Any], count: int,
                  last: str) -> tuple[Any, ...]:
            entry, e, d = self._admit(conn, header, epsilon, delta, unit, loss)
            return self._values(conn, entry, label, e, d, unit or self.unit,
                                source or self.source)

        self._write(write)

    @public_errors("Ledger.declare")
    def declare(self, losses: Sequence[PrivacyLoss], *, delta: float, unit: str | None = None,
                label: str = "") -> None:
        """Declare a plan fixed before any of its releases runs (as
        :meth:`dpfreq.budget.Accountant.declare`), recorded as one row (rule ``"declared"``)."""
        plan_items(losses, delta, None, None)  # checked before the file is opened

        def write(conn: sqlite3.Connection, header: dict[str, Any], count: int,
                  last: str) -> tuple[Any, ...]:
            charge_in(conn, header, 1.0, 0.0, unit or self.unit, None)  # units convert
            converted, dlt = plan_items(losses, delta, unit or self.unit, header.get("unit"))
            rule, entries = self._book(conn, header)
            entry, how = declaration(rule, entries, converted, dlt,
                                     f"ledger {str(self.path)!r}")
            if entry is None:
                raise BudgetExceededError(how)
            return self._values(conn, entry, label or "declared plan", entry.cost.epsilon, dlt,
                                unit or self.unit, None)

        self._write(write)

    def _write(self, make_row: Any) -> None:
        """One transaction: verify, build the row (or refuse), append it; then the anchor."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                header = header_in(conn, self._label)
                count, last = self._verified(conn, header)
                values = make_row(conn, header, count, last)
                key = chain_key(header.get("chain"), self._label)
                head = self._append(conn, key, count, last, values)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        if "anchor" in header:
            append_head(Path(header["anchor"]), count + 1, head)

    def _values(self, conn: sqlite3.Connection, entry: Entry, label: str, e: Fraction,
                d: Fraction, unit: str | None, source: str | None) -> tuple[Any, ...]:
        """The row of an admitted entry (after ``id``)."""
        return (_now(), self.command, str(label), *row_values(conn, entry, e, d, unit, source))

    @staticmethod
    def _append(conn: sqlite3.Connection, key: bytes | None, count: int, last: str,
                values: tuple[Any, ...]) -> str:
        """Insert one row after ``last`` (the chain's last hash), move the head; the new head."""
        (next_id,) = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM releases").fetchone()
        row = (next_id, *values)
        digest = row_hash(key, last, row)
        marks = ", ".join("?" * (len(ROW_COLUMNS) + 1))
        conn.execute(f"INSERT INTO releases ({', '.join(ROW_COLUMNS)}, hash) VALUES ({marks})",
                     (*row, digest))
        head = head_hash(key, digest, count + 1)
        conn.execute("UPDATE dpfreq_ledger SET value = ? WHERE key = 'head'", (head,))
        return head

    @property
    def head(self) -> str:
        """The ledger's current head: keep it (it changes with every spend) to detect later that
        an older copy was restored (:meth:`verify` with ``expect_head``)."""
        return str(self._read(lambda conn, header: header.get("head"), verified=True))

    def verify(self, *, expect_head: str | None = None) -> int:
        """Check the hash chain over the header and every row (and the anchor, if the ledger
        has one); returns the number of rows.

        Parameters
        ----------
        expect_head : str, optional
            A head this ledger had (:attr:`head`, printed after each spend): the chain must
            contain it, so an older copy restored since that spend is detected.

        Raises
        ------
        DataError
            One line naming the first row that fails (its position, oldest first, and its id)
            when a row was deleted, edited, inserted or reordered; naming the header when the
            total, unit or rule was edited; saying rows are missing at the end when the last
            rows were deleted; saying the ledger is an older copy when its anchor (or
            ``expect_head``) recorded a head its chain never had. Also when the ledger is
            signed and ``DPFREQ_ARTIFACT_KEY`` is not set (or is another key), or it is
            unsigned while a key is set.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> ledger = Ledger.create(pathlib.Path(tempfile.mkdtemp()) / "b.db", PrivacyBudget(1.0))
        >>> head = ledger.head
        >>> ledger.spend(0.5, label="release_profile", unit="item")
        >>> ledger.verify(expect_head=head)
        1
        """
        def read(conn: sqlite3.Connection, header: dict[str, Any]) -> int:
            heads: list[str] = []
            count, _ = self._verified(conn, header, heads)
            self._book(conn, header)  # every recorded value parses as what it states
            if expect_head is not None:
                check_head(expect_head, heads, self._label)
            return count

        return int(self._read(read))

    def spending(self) -> Spending:
        """What was spent under each rule (sum, filter, declared plan) and what is left under
        the ledger's own (:class:`dpfreq.accounting.Spending`)."""
        return spending(*self._read(self._book))

    @public_errors("Ledger.share")
    def share(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> BudgetShare:
        """What one more release of (ε, δ) at ``unit`` would take under the ledger's rule, and
        how many such releases still fit (:class:`dpfreq.accounting.BudgetShare`)."""
        def read(conn: sqlite3.Connection, header: dict[str, Any]) -> BudgetShare:
            rule, entries = self._book(conn, header)
            e, d, charged = charge_in(conn, header, epsilon, delta, unit or self.unit, loss)
            return share(rule, entries, e, d, charged)

        return self._read(read)

    def summary(self) -> dict[str, Any]:
        """Total, spent (under each rule), remaining, the chain's state and every release, as a
        JSON-ready mapping (what ``dpfreq ledger show`` prints).

        ``unit`` is the unit the budget is in: the one stated at :meth:`create`
        (``unit_stated`` true), else the one unit spent at, or None before any spend.
        ``spending`` is :meth:`spending`'s report; ``chain`` is ``"ok: N rows"`` when
        :meth:`verify` passes, else its one-line reason (the report is still given, for the
        auditor to see); ``head`` is the current head to keep.
        """
        report = self._read(lambda conn, header: summary_of(conn, header, self._label))
        try:
            report["chain"] = f"ok: {self.verify()} rows"
        except (DataError, ParameterError) as exc:  # a broken chain, or a key that does not fit
            report["chain"] = str(exc)
        return dict(report)


def _check_new(target: Path, anchor: str | Path | None) -> None:
    """Refuse to overwrite a ledger (or its anchor), or to create one in a missing directory."""
    if target.exists():
        raise DataError(f"ledger file {str(target)!r} already exists; "
                        "choose a new path (a ledger is never overwritten).")
    if not target.parent.is_dir():
        raise DataError(f"cannot create ledger {str(target)!r}: directory "
                        f"{str(target.parent)!r} does not exist.")
    if anchor is not None and Path(anchor).absolute() == target.absolute():
        raise ParameterError(message("anchor", "another file than the ledger (kept best on "
                                     "other storage)", str(anchor)))
    if anchor is not None and Path(anchor).exists():
        raise DataError(f"anchor file {str(anchor)!r} already exists; choose a new path (an "
                        "anchor belongs to one ledger).")
