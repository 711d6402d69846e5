"""Reading a ledger file (see :class:`dpfreq.ledger.Ledger`): its header, rule and rows.

Every stored value is checked as it is read — a header of another version, a fraction that is
not one or out of range, a loss that does not parse — and refused with one line naming the file.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import sys
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpfreq._ledger_chain import head_hash, header_hash
from dpfreq._signing import signing_key
from dpfreq._validate import check_choice, message
from dpfreq.accounting.book import Entry, spending
from dpfreq.accounting.losses import PrivacyLoss, fraction_text
from dpfreq.accounting.rules import COMPOSITIONS, Cost, Rule
from dpfreq.accounting.serial import loss_from_dict, loss_from_text, loss_text
from dpfreq.accounting.units import convert_spend, prepare_spend
from dpfreq.errors import DataError, ParameterError
from dpfreq.release import UNITS

__all__ = ["LEDGER_VERSION", "charge_in", "entries_in", "header_in", "new_header", "row_values",
           "rows_in", "rule_in", "summary_of"]

LEDGER_VERSION = 3
_KIND = "dpfreq-ledger"
#: No recorded value exceeds the largest float (every figure the ledger reports is a float).
_LARGEST = Fraction(sys.float_info.max)
_OLD = ("it is a version {v} ledger, made before ledgers recorded each release's privacy loss "
        "and composition rule, and dpfreq 0.x does not migrate it; start a new ledger with "
        "'dpfreq ledger init FILE --epsilon E --delta D' and record the old one's spends there "
        "by hand if they still count")


def _bad(label: str, what: str) -> DataError:
    return DataError(f"{label!r} is not a valid dpfreq ledger: {what}.")


def fraction_in(text: Any, label: str, what: str, *, upper: Fraction | None = None) -> Fraction:
    """A stored fraction, checked (``>= 0``, below ``upper`` and the largest float)."""
    try:
        value = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        raise _bad(label, f"{what} is not an exact fraction") from None
    if value < 0 or (upper is not None and value >= upper) or value > _LARGEST:
        raise _bad(label, f"{what} is out of range")
    return value


def header_in(conn: sqlite3.Connection, label: str) -> dict[str, Any]:
    """The header entries, of a ledger of this version (older ones refused in one line)."""
    try:
        rows = dict(conn.execute("SELECT key, value FROM dpfreq_ledger").fetchall())
    except sqlite3.DatabaseError:
        raise _bad(label, "not a SQLite database with a dpfreq_ledger table") from None
    if rows.get("kind") != _KIND:
        raise _bad(label, "it has no dpfreq ledger header")
    if rows.get("version") in ("1", "2"):
        raise _bad(label, _OLD.format(v=rows["version"]))
    if rows.get("version") != str(LEDGER_VERSION):
        raise _bad(label, f"version {rows.get('version')!r} is not {LEDGER_VERSION}")
    return rows


def rule_in(header: dict[str, Any], label: str) -> Rule:
    """The composition rule the header states (its order and budgets as stored)."""
    eps = fraction_in(header.get("total_epsilon"), label, "the total epsilon")
    dlt = fraction_in(header.get("total_delta"), label, "the total delta", upper=Fraction(1))
    if eps == 0:
        raise _bad(label, "the total epsilon is 0")
    composition = header.get("composition")
    if composition not in COMPOSITIONS:
        raise _bad(label, "it states no composition rule")
    release = fraction_in(header.get("release_delta"), label, "the release delta")
    conversion = fraction_in(header.get("conversion_delta"), label, "the conversion delta")
    order = budget = None
    if "order" in header:
        order = fraction_in(header.get("order"), label, "the Rényi order")
        budget = Fraction(str(header.get("renyi_budget")))  # may be negative: nothing fits
        if order <= 1 or conversion <= 0:
            raise _bad(label, "its Rényi order or conversion delta is out of range")
    if release + conversion != dlt:
        raise _bad(label, "its delta split does not add up to its total delta")
    return Rule(str(composition), eps, dlt, order, budget, release, conversion)


def entries_in(conn: sqlite3.Connection, label: str) -> list[Entry]:
    """Every row as a book entry (loss and costs at the ledger's unit), oldest first."""
    out: list[Entry] = []
    index_of: dict[int, int] = {}
    rows = conn.execute("SELECT id, epsilon, delta, rule, plan, loss, bad, bound, renyi, items "
                        "FROM releases ORDER BY id").fetchall()
    for n, (rid, *values) in enumerate(rows, 1):
        try:
            entry = _entry(tuple(values))
        except ValueError as exc:
            raise _bad(label, f"row {n}'s {exc}") from None
        if entry.rule == "plan":
            if values[3] not in index_of:
                raise _bad(label, f"row {n}'s plan is not an earlier declaration")
            entry = Entry(entry.loss, entry.cost, "plan", index_of[values[3]])
        out.append(entry)
        index_of[rid] = n - 1
    if sum((x.cost.epsilon for x in out), Fraction(0)) > _LARGEST:
        raise _bad(label, "its recorded spends sum past any budget")
    return out


@functools.lru_cache(maxsize=1 << 16)
def _entry(values: tuple[Any, ...]) -> Entry:
    """One stored row parsed (cached: a ledger's rows are read at every spend, and a row is
    immutable text; an edited row is another key, and fails the chain anyway). A ValueError
    names the part that does not parse."""
    e, d, rule, _plan, loss, bad, bound, renyi, items = values
    cost = Cost(_stored(e, "epsilon"), _stored(d, "delta", upper=Fraction(1)),
                _stored(bad, "bad-event delta"),
                None if bound is None else _stored(bound, "bound"),
                None if renyi is None else _stored(renyi, "Rényi cost"))
    if rule not in ("sum", "renyi", "declared", "plan"):
        raise ValueError("rule is not one")
    try:
        parsed = tuple(loss_from_dict(x) for x in json.loads(items)) if items else ()
        return Entry(loss_from_text(str(loss)), cost, str(rule), None, parsed)
    except (ValueError, TypeError):
        raise ValueError("loss or plan items are not privacy losses") from None


def _stored(text: Any, what: str, *, upper: Fraction | None = None) -> Fraction:
    try:
        value = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{what} is not an exact fraction") from None
    if value < 0 or (upper is not None and value >= upper) or value > _LARGEST:
        raise ValueError(f"{what} is out of range")
    return value


def charge_in(conn: sqlite3.Connection, header: dict[str, Any], epsilon: Any, delta: Any,
              unit: str | None, loss: Any) -> tuple[Fraction, Fraction, PrivacyLoss]:
    """A spend as charged at the ledger's unit (relations kept apart or converted)."""
    budget_unit = header.get("unit")
    if budget_unit is None and unit is not None:
        seen = {u for (u,) in conn.execute("SELECT DISTINCT unit FROM releases")}
        seen -= {None, unit}
        if seen:
            raise ParameterError(message(
                "unit", f"{seen.pop()!r}, the unit already spent at (this ledger keeps "
                "relations apart; create one with a unit to convert where sound)", unit))
    e, d, charged, _ = prepare_spend(epsilon, delta, unit, budget_unit, loss)
    return e, d, charged


def _conversion(header: dict[str, Any], unit: str | None) -> str | None:
    budget_unit = header.get("unit")
    if budget_unit is None or unit is None or unit == budget_unit:
        return None
    return convert_spend(Fraction(1), Fraction(0), unit, budget_unit)[2]


def rows_in(conn: sqlite3.Connection, header: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """Every recorded row for reports (ε and δ as charged at the ledger's unit)."""
    entries = entries_in(conn, label)
    rows = conn.execute("SELECT time, command, label, unit, source FROM releases "
                        "ORDER BY id").fetchall()
    return [{"time": t, "command": c, "label": lb, "epsilon": float(x.cost.epsilon),
             "delta": float(x.cost.delta), "unit": u, "source": s,
             "conversion": _conversion(header, u), "rule": x.rule, "loss": x.loss.describe()}
            for (t, c, lb, u, s), x in zip(rows, entries, strict=True)]


def summary_of(conn: sqlite3.Connection, header: dict[str, Any], label: str) -> dict[str, Any]:
    """The report of ``dpfreq ledger show`` (its ``chain`` entry is the caller's)."""
    rule = rule_in(header, label)
    entries = entries_in(conn, label)
    report = spending(rule, entries)
    rows = rows_in(conn, header, label)
    by_unit: dict[str | None, list[Fraction]] = {}
    for row, entry in zip(rows, entries, strict=True):
        part = by_unit.setdefault(row["unit"], [Fraction(0), Fraction(0), Fraction(0)])
        if entry.rule != "plan":
            part[0] += entry.cost.epsilon
            part[1] += entry.cost.delta
        part[2] += 1
    stated = [u for u in by_unit if u is not None]
    unit = header.get("unit")
    budget_unit = unit or (stated[0] if len(stated) == 1 else None)
    left = Fraction(report.remaining_epsilon)
    return {"ledger": label, "version": LEDGER_VERSION, "unit": budget_unit,
            "unit_stated": unit is not None, "composition": rule.composition,
            "rule": rule.describe(), "chain": "", "head": header.get("head"),
            "anchor": header.get("anchor"),
            "spent_by_unit": [{"unit": u, "epsilon": float(e), "delta": float(d),
                               "releases": int(n)} for u, (e, d, n) in by_unit.items()],
            "total": {"epsilon": float(rule.epsilon), "delta": float(rule.delta)},
            "spent": {"epsilon": report.spent_epsilon, "delta": report.spent_delta},
            "remaining": {"epsilon": report.remaining_epsilon,
                          "delta": report.remaining_delta},
            "spending": report.to_dict(), "remaining_by_unit": _left_by_unit(left, unit),
            "releases": rows}


def _left_by_unit(left: Fraction, budget_unit: str | None) -> dict[str, float]:
    """The ε still spendable at each unit that converts to ``budget_unit`` (a spend at ``item``
    is charged 2ε to an ``item_replace`` budget, so half as much is left at ``item``)."""
    if budget_unit is None:
        return {}
    out = {}
    for u in UNITS:
        try:
            factor = convert_spend(Fraction(1), Fraction(0), u, budget_unit)[0]
        except ParameterError:
            continue
        out[u] = float(left / factor)
    return out


def new_header(epsilon: Fraction, delta: Fraction, unit: str | None, composition: str,
               anchor: Any) -> dict[str, str]:
    """The header entries of a new ledger, its hashes included (parameters checked)."""
    header = [("unit", check_choice(unit, "unit", UNITS))] if unit else []
    check_choice(composition, "composition", COMPOSITIONS)
    if anchor is not None:
        header.append(("anchor", str(Path(anchor).resolve())))
    key = signing_key()
    rule = Rule.make(composition, epsilon, delta)
    entries = dict([("kind", _KIND), ("version", str(LEDGER_VERSION)),
                    ("created", datetime.now(UTC).isoformat(timespec="microseconds")),
                    ("total_epsilon", fraction_text(epsilon)),
                    ("total_delta", fraction_text(delta)), *header,
                    ("chain", "hmac-sha256" if key else "sha256"), *rule.header().items()])
    entries["header_hash"] = header_hash(key, entries)
    entries["head"] = head_hash(key, entries["header_hash"], 0)
    return entries


def row_values(conn: sqlite3.Connection, entry: Entry, e: Fraction, d: Fraction,
               unit: str | None, source: str | None) -> tuple[Any, ...]:
    """The stored values of an admitted entry from ``epsilon`` on (its plan's row id, when it
    is a plan's release)."""
    plan = None
    if entry.plan is not None:
        ids = [i for (i,) in conn.execute("SELECT id FROM releases ORDER BY id")]
        plan = ids[entry.plan]
    items = None if not entry.items else \
        "[" + ",".join(loss_text(x) for x in entry.items) + "]"
    cost = entry.cost.record()
    return (fraction_text(e), fraction_text(d), unit, source, entry.rule, plan,
            loss_text(entry.loss), cost["bad"], cost["bound"], cost["renyi"], items)
