"""The common base of every release.

A release carries the estimate, the privacy parameters spent, the mechanism and its parameters,
whether the random source was seeded (not for production), and an error statement. Subclasses
(one per system) are frozen, keyword-only dataclasses that add their own fields and a ``plot``;
they are declared with ``repr=False`` so that the short summary of :class:`Release` (a few lines
in a terminal, a small table in a notebook) is theirs too, with their own rows from
``_summary``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from dpfreq._display import brief, cut, error_text, html_table, privacy_text, text_block

__all__ = ["DEVICE", "ERROR_KINDS", "EVENT", "ITEM", "ITEM_REPLACE", "PUBLIC_DIGITS", "RELATIONS",
           "TABLE_UNITS", "UNITS", "UNIT_BY_NAME", "ErrorStatement", "Release", "Unit",
           "public_floats", "to_jsonable", "whole_number_columns"]


def to_jsonable(obj: Any) -> Any:
    """Convert numpy arrays/scalars, fractions, dataclasses and mappings to JSON-ready values.

    Parameters
    ----------
    obj : Any
        Arrays become lists, numpy scalars Python scalars, fractions ``"s/t"`` strings,
        non-finite floats ``"nan"``/``"inf"``/``"-inf"``, dataclasses dictionaries of their
        public fields (recursively); anything else is returned as it is.

    Returns
    -------
    Any
        A value :func:`json.dumps` accepts (given JSON-ready leaves).

    Examples
    --------
    >>> from fractions import Fraction
    >>> to_jsonable({"gamma": Fraction(1, 10), "counts": np.array([1, 2]), "sd": float("inf")})
    {'gamma': '1/10', 'counts': [1, 2], 'sd': 'inf'}
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not f.name.startswith("_")}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, Fraction):
        return f"{obj.numerator}/{obj.denominator}"
    if isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            return str(obj)
        return obj
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


#: Significant digits of public parameters in JSON (:func:`public_floats`).
PUBLIC_DIGITS = 12


def public_floats(obj: Any) -> Any:
    """``obj`` (JSON-ready) with every finite float rounded to :data:`PUBLIC_DIGITS` significant
    digits.

    For public parameters only (ε, δ, budget splits, confidence levels, mechanism parameters):
    computing them by binary arithmetic (a split ``0.05·ε`` and its remainder, an exact fraction
    converted back to a float) leaves noise such as ``1.0450000000000002`` in the 16th digit,
    which 12 digits remove. Estimates, intervals and error values are never passed here.

    Examples
    --------
    >>> public_floats({"split": [0.05500000000000001, 1.0450000000000002, 0.0], "n": 3})
    {'split': [0.055, 1.045, 0.0], 'n': 3}
    """
    if isinstance(obj, float) and math.isfinite(obj):
        return float(f"{obj:.{PUBLIC_DIGITS}g}")
    if isinstance(obj, dict):
        return {k: public_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [public_floats(v) for v in obj]
    return obj


def whole_number_columns(frame: Any, names: tuple[str, ...]) -> Any:
    """``frame`` with each float column of ``names`` whose entries are all whole numbers cast
    to ``int64`` (to pandas' nullable ``Int64`` when some entries are missing, NaN).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"lower": [3.0, 8.0], "share": [0.5, 1.0]})
    >>> whole_number_columns(frame, ("lower",)).dtypes.astype(str).to_dict()
    {'lower': 'int64', 'share': 'float64'}
    """
    for name in names:
        if name not in frame or frame[name].dtype.kind != "f":
            continue
        col = frame[name].to_numpy(dtype=np.float64)
        known = col[~np.isnan(col)]
        if not np.all(np.isfinite(known)) or not np.all(known == np.rint(known)):
            continue
        if np.all(np.abs(known) < 2.0**53):
            frame[name] = (frame[name].astype("Int64") if known.size < col.size
                           else col.astype(np.int64))
    return frame


ERROR_KINDS = ("interval", "bound", "sd")


@dataclass(frozen=True)
class Unit:
    """A unit of privacy: the word every release states and its neighbouring relation.

    The vocabulary is one and the same in every system (docs/theory/relations.md); a system
    that supports only some units refuses the others with a one-line reason.

    Examples
    --------
    >>> ITEM.name, ITEM.relation
    ('item', 'add or remove one item with all its rows')
    """

    name: str
    relation: str


EVENT = Unit("event", "add or remove one event (one row)")
ITEM = Unit("item", "add or remove one item with all its rows")
ITEM_REPLACE = Unit("item_replace",
                    "replace one item's rows by any other rows (the item stays in the domain)")
DEVICE = Unit("device", "one device's whole report sequence (longitudinal local DP)")
#: every unit by its word, in the order the docs list them
UNIT_BY_NAME = {u.name: u for u in (EVENT, ITEM, ITEM_REPLACE, DEVICE)}
#: the relation of each unit, in words (what ``release.relation`` and the records state)
RELATIONS = {name: u.relation for name, u in UNIT_BY_NAME.items()}
UNITS = tuple(UNIT_BY_NAME)
#: the units of the central systems over a table of items and their rows
TABLE_UNITS = (EVENT.name, ITEM.name, ITEM_REPLACE.name)


@dataclass(frozen=True, kw_only=True)
class ErrorStatement:
    """How far the estimate may be from the truth, with the probability that it holds.

    Attributes
    ----------
    kind : {"interval", "bound", "sd"}
        ``"interval"``: per-estimate intervals ``[lower, upper]``, each holding with probability
        at least ``confidence`` (and, when ``band_lower``/``band_upper`` are given, a band
        holding for all estimates *simultaneously* with probability at least ``confidence``).
        ``"bound"``: a high-probability bound on a norm of the whole error (``value``), from a
        theorem with explicit constants. ``"sd"``: a standard deviation only (no confidence).
    confidence : float or None
        Probability with which the intervals / bound hold; ``None`` only for ``"sd"``.
    value : float or numpy.ndarray
        The bound, or the interval half-widths (per estimate), or the standard deviation.
    description : str
        One sentence a person can read: what is bounded, how it was computed, and what it means.
    lower, upper : numpy.ndarray or None
        Per-estimate interval ends (``"interval"`` only), in the units of ``Release.value``.
    band_lower, band_upper : numpy.ndarray or None
        A simultaneous band (all estimates at once) at the same confidence, when available.
    vacuous : bool
        True when the statement is no better than what is known without the data (e.g. an ℓ1
        bound ≥ the largest possible ℓ1 distance): the release is then of little use, and
        ``description`` names the ε that would make it useful.

    Raises
    ------
    ValueError
        If ``kind`` is not one of the three kinds, or an interval or bound has no confidence.

    Examples
    --------
    >>> err = ErrorStatement(kind="interval", confidence=0.95, value=np.array([2.0, 2.0]),
    ...                      description="95% interval of each count (exact noise quantiles)",
    ...                      lower=np.array([3.0, 8.0]), upper=np.array([7.0, 12.0]))
    >>> err.kind, err.confidence, err.vacuous
    ('interval', 0.95, False)
    """

    kind: str
    confidence: float | None
    value: Any
    description: str
    lower: Any = None
    upper: Any = None
    band_lower: Any = None
    band_upper: Any = None
    vacuous: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"ErrorStatement.kind must be one of {ERROR_KINDS}; got {self.kind!r}")
        if self.kind != "sd" and self.confidence is None:
            raise ValueError("an interval or bound needs its confidence")
        for name in ("value", "lower", "upper", "band_lower", "band_upper"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))

    def _display_rows(self) -> list[tuple[str, str]]:
        rows = [("statement", error_text(self))]
        rows += [(name, brief(getattr(self, name)))
                 for name in ("lower", "upper", "band_lower", "band_upper")
                 if getattr(self, name) is not None]
        return [*rows, ("description", cut(self.description, 80))]

    def __repr__(self) -> str:
        return text_block("ErrorStatement", self._display_rows())

    def _repr_html_(self) -> str:
        return html_table("ErrorStatement", self._display_rows())


def _read_only(obj: Any) -> Any:
    """``obj`` with every numpy array in it (an array, or dicts/lists/tuples of them) replaced by
    a read-only view: a release records what was published, so it cannot be edited in place,
    and the arrays the caller passed in stay writable."""
    if isinstance(obj, np.ndarray):
        view = obj.view()
        view.flags.writeable = False
        return view
    if type(obj) is dict:
        return {k: _read_only(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_read_only(v) for v in obj)
    return obj


@dataclass(frozen=True, kw_only=True)
class Release:
    """Base class of dpfreq releases.

    Attributes
    ----------
    value : Any
        The released estimate (numpy arrays for vectors).
    epsilon, delta : float
        Privacy parameters the release spent (as given by the caller; the exact fraction used
        for noise is in ``mechanism_params``).
    unit : {"event", "item", "item_replace", "device"}
        The unit of privacy, naming one neighbouring relation (:data:`RELATIONS`): ``"event"`` —
        add or remove one row; ``"item"`` — add or remove one item with all its rows;
        ``"item_replace"`` — replace one item's rows (ε-DP at ``"item"`` implies 2ε here);
        ``"device"`` — one device's whole sequence of reports. :attr:`relation` and
        ``to_dict()["relation"]`` say it in words.
    mechanism : str
        Name of the mechanism (e.g. ``"wu-pagh-fft"``).
    mechanism_params : Mapping
        Every parameter needed to reproduce the analysis (fractions as ``"s/t"`` in JSON).
    seeded : bool
        True when a seed or user generator was used: reproducible, **not for production**.
    error : ErrorStatement
        The error bound or confidence statement.

    Examples
    --------
    Each system returns its own subclass; the common surface is the same:

    >>> err = ErrorStatement(kind="sd", confidence=None, value=1.41,
    ...                      description="standard deviation of the discrete Laplace noise")
    >>> rel = Release(value=np.array([10, 4]), epsilon=1.0, unit="event",
    ...               mechanism="discrete-laplace", mechanism_params={"gamma": "1/1"},
    ...               seeded=True, error=err)
    >>> d = rel.to_dict()
    >>> d["type"], d["value"], d["unit"], d["error"]["kind"]
    ('Release', [10, 4], 'event', 'sd')
    """

    value: Any
    epsilon: float
    delta: float = 0.0
    unit: str
    mechanism: str
    mechanism_params: Mapping[str, Any] = field(default_factory=dict)
    seeded: bool
    error: ErrorStatement

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _read_only(self.value))

    #: Columns of :meth:`table` that count items, events or periods: ``int64`` in
    #: :meth:`to_pandas` when every entry is a whole number.
    _count_columns: ClassVar[tuple[str, ...]] = ()
    #: Fields of public parameters, written by :meth:`to_dict` with :func:`public_floats`.
    _public_fields: ClassVar[tuple[str, ...]] = ("epsilon", "delta", "mechanism_params")

    def _value_text(self) -> str:
        """``value`` in one line (its shape and first entries)."""
        return brief(self.value)

    def _summary(self) -> list[tuple[str, str]]:
        """Rows ``(label, text)`` particular to this kind of release, shown after its value
        by ``repr`` and in notebooks (subclasses add theirs: sizes, method, public bounds)."""
        return []

    def _display_rows(self) -> list[tuple[str, str]]:
        seeded = ", seeded (reproducible, not for production)" if self.seeded else ""
        return [("value", self._value_text()), *self._summary(),
                ("privacy", privacy_text(self.epsilon, self.delta, self.unit)),
                ("mechanism", f"{self.mechanism}{seeded}"),
                ("error", error_text(self.error))]

    def __repr__(self) -> str:
        """A few lines: the value's shape and first entries, ε/δ, unit, mechanism, error."""
        return text_block(type(self).__name__, self._display_rows())

    def _repr_html_(self) -> str:
        """The same summary as a small HTML table (shown by notebooks)."""
        return html_table(type(self).__name__, self._display_rows())

    @property
    def relation(self) -> str:
        """The neighbouring relation protected, in words (:data:`RELATIONS` of ``unit``)."""
        return RELATIONS.get(self.unit, self.unit)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of every field, with ``type`` naming the release class and
        ``relation`` stating the unit's neighbouring relation in words.

        Public parameters — ε, δ, budget splits, confidence levels and ``mechanism_params`` —
        are written with 12 significant digits (:func:`public_floats`), without the noise of
        binary arithmetic on them; the estimate, its intervals and error values are written
        exactly as computed.
        """
        out: dict[str, Any] = {"type": type(self).__name__}
        out.update(to_jsonable(self))
        for name in self._public_fields:
            out[name] = public_floats(out[name])
        out["error"]["confidence"] = public_floats(out["error"]["confidence"])
        out["relation"] = self.relation
        return out

    def to_json(self, **kwargs: Any) -> str:
        """The release as JSON text (keyword arguments go to :func:`json.dumps`)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.to_dict(), **kwargs)

    def table(self) -> dict[str, Any]:
        """The estimate as tidy columns (one row per estimate), with its interval where known.

        Subclasses implement it; :meth:`to_pandas` builds a DataFrame from it.
        """
        raise NotImplementedError(f"{type(self).__name__} has no table")

    def to_pandas(self) -> Any:
        """The estimate as a tidy :class:`pandas.DataFrame` (one row per estimate).

        Columns come from :meth:`table`; the release's ε, δ, unit, relation and mechanism are
        in ``DataFrame.attrs``. Columns of counts (numbers of items, events or periods) are
        ``int64`` whenever every entry is a whole number (a post-processed estimate may not
        be). pandas is a dependency of dpfreq.
        """
        import pandas as pd

        frame = whole_number_columns(pd.DataFrame(self.table()), self._count_columns)
        frame.attrs.update({"epsilon": self.epsilon, "delta": self.delta, "unit": self.unit,
                            "relation": self.relation, "mechanism": self.mechanism,
                            "confidence": self.error.confidence})
        return frame

    def plot(self, ax: Any = None) -> Any:  # pragma: no cover - overridden
        """Draw the release with its error band on a matplotlib axes (subclasses implement)."""
        raise NotImplementedError(f"{type(self).__name__} has no plot")
