"""Protocol parameters and the device-side state machine of the longitudinal protocol."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from dpfreq import _validate
from dpfreq.artifacts import open_json, seal_json
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import RNGLike

from .keyed import DeviceKey
from .laws import MAX_CHANGES, MODES, distance_law, erlingsson_c_gap
from .randomizers import make_randomizer, restore_randomizer
from .result import parse_period

__all__ = [
    "MAX_HORIZON",
    "PROTOCOL_VERSION",
    "LongitudinalClient",
    "ProtocolParams",
    "make_params",
]

PROTOCOL_VERSION = 1
#: Largest horizon: the server keeps 2·d counters and one bit per (device, report).
MAX_HORIZON = 1 << 24
_PARAMS_KIND = "dpfreq.longitudinal.params"
_CLIENT_KIND = "dpfreq.longitudinal.client"
_RESOLVED = tuple(m for m in MODES if m != "auto")


def _padded(horizon: int) -> int:
    return 1 << max(0, (horizon - 1).bit_length())


def _check_start(start: Any, func: str) -> str | None:
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
    raise ParameterError(_validate.message("start", func, "an ISO date or datetime", start))


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
    randomizer : str
        The resolved randomizer (``"auto"`` is resolved by :func:`make_params`).
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
    >>> p = make_params(horizon=8, max_changes=2, epsilon=1.0, randomizer="rr")
    >>> ProtocolParams.from_json(p.to_json()) == p
    True
    >>> p.orders, p.changes_at_order(3)
    (4, 2)
    """

    horizon: int
    padded_horizon: int
    max_changes: int
    epsilon: float
    randomizer: str
    c_gap: float
    certificate: float
    per_order_sparsity: bool = False
    order_c_gaps: tuple[float, ...] = ()
    start: str | None = None
    period: str | None = None
    version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "order_c_gaps", tuple(float(c) for c in self.order_c_gaps))
        self._validate()

    def _validate(self) -> None:
        func = "ProtocolParams"
        if self.version != PROTOCOL_VERSION:
            raise DataError(_validate.message(
                "version", func, f"the supported protocol version {PROTOCOL_VERSION}",
                self.version))
        d0 = _validate.check_int(self.horizon, "horizon", func, minimum=1)
        if d0 > MAX_HORIZON:
            raise ParameterError(_validate.message("horizon", func,
                                                   f"an integer in 1..{MAX_HORIZON}", d0))
        k = _validate.check_int(self.max_changes, "max_changes", func, minimum=1)
        if k > MAX_CHANGES:
            raise ParameterError(_validate.message("max_changes", func,
                                                   f"an integer in 1..{MAX_CHANGES}", k))
        _validate.check_epsilon(self.epsilon, "epsilon", func)
        if self.padded_horizon != _padded(d0):
            raise ParameterError(_validate.message(
                "padded_horizon", func, "the power of two >= horizon", self.padded_horizon))
        _validate.check_choice(self.randomizer, "randomizer", func, _RESOLVED)
        c = _validate.check_positive_float(self.c_gap, "c_gap", func)
        if c > 1:
            raise ParameterError(_validate.message("c_gap", func, "in (0, 1]", self.c_gap))
        if not (isinstance(self.certificate, float | int)
                and 0 <= self.certificate <= self.epsilon):
            raise ParameterError(_validate.message(
                "certificate", func, f"in [0, epsilon = {self.epsilon!r}]", self.certificate))
        if not isinstance(self.per_order_sparsity, bool):
            raise ParameterError(_validate.message("per_order_sparsity", func, "a bool",
                                                   self.per_order_sparsity))
        if self.per_order_sparsity:
            if self.randomizer == "erlingsson":
                raise ParameterError(
                    "per_order_sparsity of ProtocolParams applies to distance-based randomizers "
                    "only; got randomizer 'erlingsson'.")
            if len(self.order_c_gaps) != self.orders or not all(
                    0 < g <= 1 for g in self.order_c_gaps):
                raise ParameterError(_validate.message(
                    "order_c_gaps", func, f"{self.orders} gaps in (0, 1], one per order",
                    self.order_c_gaps))
        elif self.order_c_gaps:
            raise ParameterError(_validate.message(
                "order_c_gaps", func, "empty without per_order_sparsity", self.order_c_gaps))
        if (self.start is None) != (self.period is None):
            raise ParameterError(f"start and period of {func} go together: give both or "
                                 "neither.")
        if self.start is not None:
            if _check_start(self.start, func) != self.start:
                raise ParameterError(_validate.message("start", func, "an ISO date or datetime",
                                                       self.start))
            parse_period(self.period, func)

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
        """Sealed JSON text (format version and SHA-256 checksum) including ``param_id``."""
        return seal_json({**asdict(self), "param_id": self.param_id}, kind=_PARAMS_KIND,
                         version=PROTOCOL_VERSION)

    @classmethod
    def from_json(cls, text: str | bytes, *, label: str = "the parameters") -> ProtocolParams:
        """Open sealed text from :meth:`to_json`, check every field and the ``param_id``.

        Raises
        ------
        DataError
            Not text :meth:`to_json` wrote, edited or corrupted text, a field out of range, or a
            ``param_id`` that does not match the content. ``label`` names the source.
        """
        _, raw = open_json(text, kind=_PARAMS_KIND, versions=(PROTOCOL_VERSION,), label=label)
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


def make_params(*, horizon: int, max_changes: int, epsilon: float, randomizer: str,
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
    randomizer : str, keyword-only
        ``"auto"`` (largest exact ``c_gap``; recommended), ``"futurerand"`` (paper constants,
        the reference), ``"calibrated"``, ``"threshold"``, ``"rr"`` or ``"erlingsson"``.
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
        [1e-6, 1000]), or parameters for which no randomizer of this mode is certified.

    Notes
    -----
    No parameter is derived from data. The randomizer's exact ``c_gap`` and privacy certificate
    are computed here, on the law the devices sample.

    Examples
    --------
    >>> p = make_params(horizon=30, max_changes=4, epsilon=1.0, randomizer="auto")
    >>> p.padded_horizon, p.orders, p.randomizer
    (32, 6, 'threshold')
    >>> p.certificate <= p.epsilon
    True
    """
    func = "make_params"
    d0 = _validate.check_int(horizon, "horizon", func, minimum=1)
    if d0 > MAX_HORIZON:
        raise ParameterError(_validate.message("horizon", func, f"an integer in 1..{MAX_HORIZON}",
                                               horizon))
    k = _validate.check_int(max_changes, "max_changes", func, minimum=1)
    if k > MAX_CHANGES:
        raise ParameterError(_validate.message("max_changes", func,
                                               f"an integer in 1..{MAX_CHANGES}", max_changes))
    epsilon = _validate.check_epsilon(epsilon, "epsilon", func)
    randomizer = _validate.check_choice(randomizer, "randomizer", func, MODES)
    if not isinstance(per_order_sparsity, bool):
        raise ParameterError(_validate.message("per_order_sparsity", func, "a bool",
                                               per_order_sparsity))
    start_text = _check_start(start, func)
    if (start_text is None) != (period is None):
        raise ParameterError(f"start and period of {func} go together: give both or neither.")
    if period is not None:
        parse_period(period, func)
    d = _padded(d0)
    if randomizer == "erlingsson":
        if per_order_sparsity:
            raise ParameterError(f"per_order_sparsity of {func} applies to distance-based "
                                 "randomizers only; got randomizer 'erlingsson'.")
        name, c_gap = "erlingsson", erlingsson_c_gap(k, epsilon)
        cert = float(epsilon_to_fraction(epsilon))  # exact RR uses γ ≤ ε
    else:
        law = distance_law(randomizer, k, epsilon)
        name, c_gap, cert = law.name, law.c_gap, law.certificate
    gaps: tuple[float, ...] = ()
    if per_order_sparsity:
        laws = [distance_law(name, min(k, d >> h), epsilon) for h in range(d.bit_length())]
        gaps = tuple(lw.c_gap for lw in laws)
        cert = max(lw.certificate for lw in laws)
    return ProtocolParams(d0, d, k, epsilon, name, c_gap, cert, per_order_sparsity, gaps,
                          start_text, period)


class LongitudinalClient:
    """One device: call :meth:`step` with ``X[t]`` for t = 1, 2, ... and send what it returns.

    Parameters
    ----------
    params : ProtocolParams
        The versioned parameter bundle shared with the server (:func:`make_params`).
    rng : None, int or numpy.random.Generator, keyword-only
        Where the device secret comes from: ``None`` (production) is the operating system's
        CSPRNG (:func:`os.urandom`); a seed or generator is for tests and simulations only and
        marks the device ``seeded``.

    Notes
    -----
    * **Randomness.** At construction the device creates its 32-byte secret; every random
      choice afterwards is a keyed function of (secret, ``param_id``, purpose, slot)
      (:mod:`dpfreq.longitudinal.keyed`): the order, the vector ``v``, the kept change of
      Erlingsson et al., and each interval's coin. A device restored from any saved state
      therefore sends bit-identical reports for the periods it reports again. The secret is
      in :meth:`to_json`'s state: it must stay on the device.
    * **Enrolment.** The ``order`` h is uniform on ``{0..log d}`` (independent of the data);
      the randomizer has ``L = d/2^h`` coordinates: FutureRand's vector ``v = CR(1^k)``,
      Erlingsson et al.'s ``r ~ U{1..k}``. :meth:`enrolment` is the message to send.
    * **Reports.** One report ``{"param_id", "order", "interval", "bit"}`` at **every** multiple
      of ``2^h`` (interval ``j = t/2^h``), zero partial sums included; ``bit ∈ {0, 1}``
      encodes ``y ∈ {−1, +1}``. The collector adds the device's id (wire column ``device``).
    * **Change budget.** ``X[0] = 0``, so a device starting at 1 spends one change. Changes
      beyond the k-th are **frozen**: the device keeps reporting the value it had after its
      k-th change, so its reports are those of an admissible sequence; ``v`` is never redrawn.
      ``frozen`` counts the ignored changes (the estimate is then biased, privacy is kept).
    * **Horizon.** The step of the last period (``params.horizon``) also feeds the last value
      up to the padded horizon and returns every report still due (a list); :meth:`finish`
      is then a no-op kept for devices that stop early.
    * **Persistence.** :meth:`to_json` / :meth:`from_json` (sealed, every field checked).

    Privacy
    -------
    Unit: the device's whole sequence ``X[1..d]``; neighbouring: any two sequences with at most
    ``k`` changes each (device level). The transcript (order and every report) is ε-local-DP,
    with ε = ``params.epsilon`` and the exact certificate ``params.certificate ≤ ε``.

    Examples
    --------
    >>> p = make_params(horizon=4, max_changes=2, epsilon=1.0, randomizer="rr")
    >>> c = LongitudinalClient(p, rng=7)
    >>> reports = [r for x in (0, 1, 1, 0) for r in c.step(x)]
    >>> len(reports) == 4 >> c.order
    True
    >>> sorted(reports[0])
    ['bit', 'interval', 'order', 'param_id']
    >>> LongitudinalClient.from_json(c.to_json()).v == c.v
    True
    >>> c.seeded
    True
    """

    def __init__(self, params: ProtocolParams, *, rng: RNGLike = None) -> None:
        if not isinstance(params, ProtocolParams):
            raise ParameterError(_validate.message("params", "LongitudinalClient",
                                                   "a ProtocolParams", type(params).__name__))
        self.params = params
        p = params
        self.key = DeviceKey.create(p.param_id, rng, "LongitudinalClient")
        self.order = self.key.stream("order").uniform_below(p.orders)
        self.t = 0  # last period seen
        self.prev = 0  # reported (frozen) X at the previous checkpoint of this order
        self.last_x = 0  # reported (frozen) X[t]
        self.raw_x = 0  # X[t] as read
        self.changes_used = 0  # changes of the reported sequence (≤ k)
        self.frozen = 0  # changes ignored because the budget k was spent
        self.r = 0  # Erlingsson et al.: index of the kept change
        self.kept: list[int] | None = None  # Erlingsson et al.: [time, sign] of the r-th change
        if p.randomizer == "erlingsson":
            self.r = 1 + self.key.stream("kept-change").uniform_below(p.max_changes)
        self.randomizer = make_randomizer(
            p.randomizer, length=p.padded_horizon >> self.order,
            max_changes=p.changes_at_order(self.order), epsilon=p.epsilon, key=self.key)
        self._check_gap()

    @property
    def seeded(self) -> bool:
        """True when the device secret came from a seed (testing only, not private)."""
        return self.key.seeded

    def _check_gap(self) -> None:
        expected = self.params.c_gaps[self.order]
        if self.randomizer.name != self.params.randomizer or not math.isclose(
                self.randomizer.c_gap, expected, rel_tol=1e-12):
            raise ParameterError(
                f"params of LongitudinalClient: c_gap of {self.params.randomizer!r} does not "
                "match this library's exact value (server and devices must use the same "
                "parameters and library)."
            )

    @property
    def v(self) -> list[int]:
        """The pre-computed vector (distance-based randomizers; empty for Erlingsson et al.)."""
        return list(getattr(self.randomizer, "v", []))

    @property
    def used(self) -> int:
        """Non-zero partial sums already sent through the randomizer."""
        return self.randomizer.used

    def enrolment(self) -> dict[str, Any]:
        """Enrolment message ``{"protocol_version", "param_id", "order"}``."""
        return {"protocol_version": self.params.version, "param_id": self.params.param_id,
                "order": self.order}

    def step(self, x: int) -> list[dict[str, Any]]:
        """Read ``X[t]`` for the next period t; return the reports due at t (often none).

        At the last period (``t = params.horizon``) the sequence is padded with ``x`` up to
        the power-of-two horizon and every report still due is returned with the report of t
        (the top order's only report among them).

        Raises
        ------
        DataError
            ``x`` not 0/1, or a step after the last period.
        """
        if isinstance(x, bool) or x not in (0, 1):
            raise DataError(_validate.message("x", "LongitudinalClient.step", "0 or 1", x))
        if self.t >= self.params.horizon:
            raise DataError("LongitudinalClient.step called after the last period of the "
                            "horizon.")
        rep = self._advance(int(x))
        out = [] if rep is None else [rep]
        if self.t == self.params.horizon:
            out += self.finish()
        return out

    def _advance(self, x: int) -> dict[str, Any] | None:
        """One period of the protocol (``t ≤`` padded horizon); the report due, if any."""
        p = self.params
        self.t += 1
        t = self.t
        if x != self.raw_x:
            self.raw_x = int(x)
            if self.changes_used < p.max_changes:
                self.changes_used += 1
                self.last_x = int(x)
                if p.randomizer == "erlingsson" and self.changes_used == self.r:
                    self.kept = [t, 1 if x == 1 else -1]
            else:
                self.frozen += 1
        if t % (1 << self.order):
            return None
        j = t >> self.order
        if p.randomizer == "erlingsson":
            s = 0
            if self.kept is not None and t - (1 << self.order) < self.kept[0] <= t:
                s = self.kept[1]
        else:
            s = self.last_x - self.prev
        self.prev = self.last_x
        y = self.randomizer.step(j, s)
        return {"param_id": p.param_id, "order": self.order, "interval": j,
                "bit": (y + 1) // 2}

    def finish(self) -> list[dict[str, Any]]:
        """Pad to the power-of-two horizon with the last value; return the reports.

        :meth:`step` calls it at the last period; call it yourself only to stop a device
        before the horizon (its last value is then reported for the remaining periods).
        """
        out = []
        while self.t < self.params.padded_horizon:
            rep = self._advance(self.raw_x)
            if rep is not None:
                out.append(rep)
        return out

    def to_json(self) -> str:
        """Sealed state: parameters, the device secret, order, counters and the randomizer's
        counters.

        The state holds the device secret: store it on the device only (a file of mode 0600).
        """
        state = {**self.key.to_state(), "order": self.order, "t": self.t, "prev": self.prev,
                 "last_x": self.last_x, "raw_x": self.raw_x, "changes_used": self.changes_used,
                 "frozen": self.frozen, "r": self.r, "kept": self.kept,
                 "randomizer": self.randomizer.state()}
        params = {**asdict(self.params), "param_id": self.params.param_id}
        return seal_json({"params": params, "state": state}, kind=_CLIENT_KIND,
                         version=PROTOCOL_VERSION)

    @classmethod
    def from_json(cls, text: str | bytes, *,
                  label: str = "the client state") -> LongitudinalClient:
        """Restore a device from :meth:`to_json` output: same secret, so the same order,
        vector and coins (nothing is redrawn).

        Raises
        ------
        DataError
            Edited or corrupted text, or any field out of range (one message naming ``label``).
        """
        _, raw = open_json(text, kind=_CLIENT_KIND, versions=(PROTOCOL_VERSION,), label=label)
        try:
            params = ProtocolParams._from_payload(dict(raw["params"]), label)
            obj = cls.__new__(cls)
            obj.params = params
            obj._restore(raw["state"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise DataError(f"{label} is not a valid LongitudinalClient state: missing or "
                            f"mistyped field {exc}.") from None
        except DataError as exc:
            raise DataError(f"{label} is not a valid LongitudinalClient state: {exc}") from None
        return obj

    def _restore(self, st: dict[str, Any]) -> None:
        p = self.params
        k, d = p.max_changes, p.padded_horizon

        def field(key: str, low: int, high: int) -> int:
            value = st[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise DataError(f"field {key!r} must be an integer in {low}..{high}.")
            return value

        self.key = DeviceKey.from_state(st, p.param_id)
        self.order = field("order", 0, p.orders - 1)
        if self.order != self.key.stream("order").uniform_below(p.orders):
            raise DataError("field 'order' does not match the device secret.")
        self.t = field("t", 0, d)
        self.prev, self.last_x, self.raw_x = (field(n, 0, 1) for n in ("prev", "last_x", "raw_x"))
        self.changes_used = field("changes_used", 0, min(k, self.t))
        self.frozen = field("frozen", 0, self.t)
        erl = p.randomizer == "erlingsson"
        self.r = field("r", 1, k) if erl else field("r", 0, 0)
        if erl and self.r != 1 + self.key.stream("kept-change").uniform_below(k):
            raise DataError("field 'r' does not match the device secret.")
        kept = st["kept"]
        if kept is not None and not (erl and isinstance(kept, list) and len(kept) == 2
                                     and all(isinstance(a, int) for a in kept)
                                     and 1 <= kept[0] <= self.t and kept[1] in (-1, 1)):
            raise DataError("field 'kept' must be null or [time, sign] of the kept change.")
        self.kept = kept
        self.randomizer = restore_randomizer(
            p.randomizer, length=d >> self.order, max_changes=p.changes_at_order(self.order),
            epsilon=p.epsilon, state=st["randomizer"], key=self.key)
        if self.randomizer.j != self.t >> self.order:
            raise DataError("the randomizer's report count does not match the period 't'.")
        self._check_gap()
