"""Versioned protocol parameters of the longitudinal protocol, shared by devices and server."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from dpfreq import _validate
from dpfreq.artifacts import open_json, seal_json
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors
from dpfreq.noise import epsilon_to_fraction

from .laws import MAX_CHANGES, MODES, distance_law, erlingsson_c_gap
from .result import parse_period

__all__ = [
    "MAX_HORIZON",
    "PROTOCOL_VERSION",
    "ProtocolParams",
    "make_params",
]

#: Version of the device protocol (docs/protocol.md); a device refuses parameters of any other.
PROTOCOL_VERSION = 2
#: Largest horizon: the server keeps 2·d counters and one bit per (device, report).
MAX_HORIZON = 1 << 24
_PARAMS_KIND = "dpfreq.longitudinal.params"
_RESOLVED = tuple(m for m in MODES if m != "auto")


def _padded(horizon: int) -> int:
    return 1 << max(0, (horizon - 1).bit_length())


def _check_start(start: Any) -> str | None:
    """``start`` as ISO text: a date, or a datetime in UTC without offset (aware datetimes are
    converted to UTC)."""
    if start is None:
        return None
    value: Any = start
    if isinstance(start, str):
        try:
            value = (_dt.datetime.fromisoformat(start) if "T" in start or " " in start
                     else _dt.date.fromisoformat(start))
        except ValueError:
            value = None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    raise ParameterError(_validate.message("start", "an ISO date or datetime", start))


@dataclass(frozen=True)
class ProtocolParams:
    """Versioned parameters shared by devices and server (build them with :func:`make_params`).

    Attributes
    ----------
    horizon : int
        Number of periods ``d`` the devices report on.
    padded_horizon : int
        The power of two ``≥ horizon`` the dyadic decomposition uses (the last value is
        repeated up to it).
    max_changes : int
        Change budget ``k`` per device.
    epsilon : float
        Each device's local ε over its whole sequence.
    method : str
        The method of :func:`make_params` with ``"auto"`` resolved: the randomizer the devices
        run (``"rr"``, ``"futurerand"``, ``"calibrated"``, ``"threshold"`` or ``"erlingsson"``).
    c_gap : float
        Its exact gap (of the law that is sampled); ``certificate`` its ``ln(p_max/p_min) ≤ ε``.
    per_order_sparsity : bool
        Order h's randomizer is built for ``min(k, d/2^h)`` changes; gaps in ``order_c_gaps``.
    start, period : str or None
        Public time axis: the date of period 1 (ISO) and the period length (``"1d"``, ``"7d"``,
        ``"1h"``, ``"1w"``); results then carry dates.
    version : int
        Protocol version.

    Examples
    --------
    >>> p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    >>> ProtocolParams.from_json(p.to_json()) == p
    True
    >>> p.orders, p.changes_at_order(3)
    (4, 2)
    """

    horizon: int
    padded_horizon: int
    max_changes: int
    epsilon: float
    method: str
    c_gap: float
    certificate: float
    per_order_sparsity: bool = False
    order_c_gaps: tuple[float, ...] = ()
    start: str | None = None
    period: str | None = None
    version: int = PROTOCOL_VERSION

    @public_errors("ProtocolParams")
    def __post_init__(self) -> None:
        object.__setattr__(self, "order_c_gaps", tuple(float(c) for c in self.order_c_gaps))
        self._validate()

    def _validate(self) -> None:
        if self.version != PROTOCOL_VERSION:
            raise DataError(_outdated("version", self.version))
        d0 = _validate.check_int(self.horizon, "horizon", minimum=1)
        if d0 > MAX_HORIZON:
            raise ParameterError(_validate.message("horizon",
                                                   f"an integer in 1..{MAX_HORIZON}", d0))
        k = _validate.check_int(self.max_changes, "max_changes", minimum=1)
        if k > MAX_CHANGES:
            raise ParameterError(_validate.message("max_changes",
                                                   f"an integer in 1..{MAX_CHANGES}", k))
        _validate.check_epsilon(self.epsilon, "epsilon")
        if self.padded_horizon != _padded(d0):
            raise ParameterError(_validate.message(
                "padded_horizon", "the power of two >= horizon", self.padded_horizon))
        _validate.check_choice(self.method, "method", _RESOLVED)
        c = _validate.check_positive_float(self.c_gap, "c_gap")
        if c > 1:
            raise ParameterError(_validate.message("c_gap", "in (0, 1]", self.c_gap))
        if not (isinstance(self.certificate, float | int)
                and 0 <= self.certificate <= self.epsilon):
            raise ParameterError(_validate.message(
                "certificate", f"in [0, epsilon = {self.epsilon!r}]", self.certificate))
        if not isinstance(self.per_order_sparsity, bool):
            raise ParameterError(_validate.message("per_order_sparsity", "a bool",
                                                   self.per_order_sparsity))
        if self.per_order_sparsity:
            if self.method == "erlingsson":
                raise ParameterError(
                    "per_order_sparsity of ProtocolParams applies to distance-based randomizers "
                    "only; got method 'erlingsson'.")
            if len(self.order_c_gaps) != self.orders or not all(
                    0 < g <= 1 for g in self.order_c_gaps):
                raise ParameterError(_validate.message(
                    "order_c_gaps", f"{self.orders} gaps in (0, 1], one per order",
                    self.order_c_gaps))
        elif self.order_c_gaps:
            raise ParameterError(_validate.message(
                "order_c_gaps", "empty without per_order_sparsity", self.order_c_gaps))
        if (self.start is None) != (self.period is None):
            raise ParameterError(_validate.message(
                "start/period", "both given (dated periods) or both None",
                (self.start, self.period)))
        if self.start is not None:
            if _check_start(self.start) != self.start:
                raise ParameterError(_validate.message("start", "an ISO date or datetime",
                                                       self.start))
            parse_period(self.period)

    @property
    def c_gaps(self) -> tuple[float, ...]:
        """The gap of each order h = 0..log d (all equal to ``c_gap`` unless per-order)."""
        return self.order_c_gaps if self.per_order_sparsity else (self.c_gap,) * self.orders

    def changes_at_order(self, order: int) -> int:
        """Non-zero budget of the randomizer of ``order``: ``min(k, d/2^h)`` per order, else k."""
        if self.per_order_sparsity:
            return min(self.max_changes, self.padded_horizon >> order)
        return self.max_changes

    @property
    def orders(self) -> int:
        """Number of orders ``log d + 1``."""
        return self.padded_horizon.bit_length()

    @functools.cached_property
    def param_id(self) -> str:
        """Content hash identifying the parameter set (first 16 hex digits of SHA-256).

        Computed once per object (the fields are frozen): clients read it for every report.
        """
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_json(self) -> str:
        """Sealed JSON text (format version and SHA-256 checksum) including ``param_id``.

        Never signed with ``DPFREQ_ARTIFACT_KEY``: the parameters are public and published to
        devices, which do not hold the key; ``param_id`` names them.
        """
        return seal_json({**asdict(self), "param_id": self.param_id}, kind=_PARAMS_KIND,
                         version=PROTOCOL_VERSION, sign=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, label: str = "the parameters") -> ProtocolParams:
        """Open sealed text from :meth:`to_json`, check every field and the ``param_id``.

        Raises
        ------
        DataError
            Not text :meth:`to_json` wrote, edited or corrupted text, a field out of range, or a
            ``param_id`` that does not match the content. ``label`` names the source.
        """
        raw = open_protocol_json(text, kind=_PARAMS_KIND, label=label, sign=False)
        return cls._from_payload(raw, label)

    @classmethod
    def _from_payload(cls, raw: dict[str, Any], label: str) -> ProtocolParams:
        pid = raw.pop("param_id", None)
        try:
            raw["order_c_gaps"] = tuple(raw.get("order_c_gaps", ()))
            p = cls(**raw)
        except (TypeError, ValueError) as exc:  # ParameterError is a ValueError
            raise DataError(f"{label} do not hold valid protocol parameters: {exc}") from None
        if pid != p.param_id:
            raise DataError(f"{label}: param_id does not match the parameters.")
        return p


def _outdated(param: str, version: Any, where: str | None = None) -> str:
    """One-line message for parameters or state of another protocol version than this one's
    (``where``: the label of the text read, else the public call)."""
    fix = ("this dpfreq is older than the text: upgrade it" if isinstance(version, int)
           and version > PROTOCOL_VERSION else "the protocol is outdated: fetch the study's "
           "parameters again")
    return _validate.message(param, f"{PROTOCOL_VERSION}, the supported protocol "
                             f"version ({fix})", version, of=where)


def open_protocol_json(text: str | bytes, *, kind: str, label: str,
                        sign: bool = True) -> dict[str, Any]:
    """The payload of sealed protocol text (:func:`dpfreq.artifacts.open_json`); text of
    another protocol version is refused with one message naming the supported version."""
    try:
        return open_json(text, kind=kind, versions=(PROTOCOL_VERSION,), label=label,
                         sign=sign)[1]
    except DataError:
        version = _version_of(text, kind)
        if version != PROTOCOL_VERSION:
            raise DataError(_outdated("protocol version", version, label)) from None
        raise


def _version_of(text: str | bytes, kind: str) -> Any:
    """The version in the header of sealed ``kind`` text (this protocol's when there is none)."""
    try:
        obj = json.loads(text)
    except (ValueError, TypeError, UnicodeDecodeError):
        return PROTOCOL_VERSION
    if isinstance(obj, dict) and obj.get("kind") == kind:
        return obj.get("version", PROTOCOL_VERSION)
    return PROTOCOL_VERSION


@public_errors("make_params")
def make_params(*, horizon: int, max_changes: int, epsilon: float, method: str,
                per_order_sparsity: bool = False, start: Any = None,
                period: str | None = None) -> ProtocolParams:
    """The versioned protocol parameters shared by devices and server.

    Parameters
    ----------
    horizon : int, keyword-only
        Number of periods ``d`` (padded to the next power of two inside the protocol).
    max_changes : int, keyword-only
        Change budget ``k`` per device (``X[0] = 0``: starting at 1 is a change).
    epsilon : float, keyword-only
        Each device's local ε over its whole sequence; no default.
    method : str, keyword-only
        The randomizer: ``"auto"`` (largest exact ``c_gap``; recommended), ``"futurerand"``
        (paper constants, the reference), ``"calibrated"``, ``"threshold"``, ``"rr"`` or
        ``"erlingsson"``.
    per_order_sparsity : bool, keyword-only
        Order h has only ``L = d/2^h`` coordinates, so its randomizer is built for ``min(k, L)``
        non-zeros (larger gap at high orders); the per-order gaps are recorded in
        ``order_c_gaps`` and the server uses them. Distance-based randomizers only.
    start, period : keyword-only, optional
        Public time axis (both or neither): the date of period 1 (``datetime.date`` or ISO
        text) and the period length (``"1d"``, ``"7d"``, ``"1h"``, ``"1w"``).

    Returns
    -------
    ProtocolParams

    Raises
    ------
    ParameterError
        A parameter out of range (horizon above ``2^24``, ``max_changes`` above 4096, ε outside
        [1e-6, 1000]), or parameters for which no randomizer of this method is certified.

    Notes
    -----
    No parameter is derived from data. The randomizer's exact ``c_gap`` and privacy certificate
    are computed here, on the law the devices sample.

    Examples
    --------
    >>> p = make_params(horizon=30, max_changes=4, epsilon=1.0, method="auto")
    >>> p.padded_horizon, p.orders, p.method
    (32, 6, 'threshold')
    >>> p.certificate <= p.epsilon
    True
    """
    func = public_caller()
    d0 = _validate.check_int(horizon, "horizon", minimum=1)
    if d0 > MAX_HORIZON:
        raise ParameterError(_validate.message("horizon", f"an integer in 1..{MAX_HORIZON}",
                                               horizon))
    k = _validate.check_int(max_changes, "max_changes", minimum=1)
    if k > MAX_CHANGES:
        raise ParameterError(_validate.message("max_changes",
                                               f"an integer in 1..{MAX_CHANGES}", max_changes))
    epsilon = _validate.check_epsilon(epsilon, "epsilon")
    method = _validate.check_choice(method, "method", MODES)
    if not isinstance(per_order_sparsity, bool):
        raise ParameterError(_validate.message("per_order_sparsity", "a bool",
                                               per_order_sparsity))
    start_text = _check_start(start)
    if (start_text is None) != (period is None):
        raise ParameterError(_validate.message(
            "start/period", "both given (dated periods) or both None", (start, period)))
    if period is not None:
        parse_period(period)
    d = _padded(d0)
    if method == "erlingsson":
        if per_order_sparsity:
            raise ParameterError(f"per_order_sparsity of {func} applies to distance-based "
                                 "randomizers only; got method 'erlingsson'.")
        name, c_gap = "erlingsson", erlingsson_c_gap(k, epsilon)
        cert = float(epsilon_to_fraction(epsilon))  # exact RR uses γ ≤ ε
    else:
        law = distance_law(method, k, epsilon)
        name, c_gap, cert = law.name, law.c_gap, law.certificate
    gaps: tuple[float, ...] = ()
    if per_order_sparsity:
        laws = [distance_law(name, min(k, d >> h), epsilon) for h in range(d.bit_length())]
        gaps = tuple(lw.c_gap for lw in laws)
        cert = max(lw.certificate for lw in laws)
    return ProtocolParams(d0, d, k, epsilon, name, c_gap, cert, per_order_sparsity, gaps,
                          start_text, period)
