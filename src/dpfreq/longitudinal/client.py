"""The device-side state machine of the longitudinal protocol."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import numpy as np

from dpfreq import _validate
from dpfreq.artifacts import seal_json
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.rng import RNGLike

from .keyed import DeviceKey
from .params import PROTOCOL_VERSION, ProtocolParams, open_protocol_json
from .randomizers import make_randomizer, restore_randomizer

__all__ = ["LongitudinalClient"]

_CLIENT_KIND = "dpfreq.longitudinal.client"


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
    * **Restored from an older state.** Fed the same inputs, a restored device returns the
      same bits for the slots it reports again. Fed *other* inputs, a slot's bit may differ
      from the one sent before the restore, and two bits for one slot tell whoever sees both
      that the inputs differed (docs/protocol.md §7): no ε covers the pair. Tell the client
      what was already sent (:meth:`note_sent`: the slots the server holds, an uploader's
      log) and it **withholds** every report whose bit differs from the one sent: the report
      is not returned, its interval is added to :attr:`withheld`, and the device's counters
      advance as usual. What the client is not told, it cannot know.

    Privacy
    -------
    Unit: the device's whole sequence ``X[1..d]``; neighbouring: any two sequences with at most
    ``k`` changes each (device level). The transcript (order and every report) is ε-local-DP,
    with ε = ``params.epsilon`` and the exact certificate ``params.certificate ≤ ε``.

    Examples
    --------
    >>> from dpfreq.longitudinal import make_params
    >>> p = make_params(horizon=4, max_changes=2, epsilon=1.0, method="rr")
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

    @public_errors("LongitudinalClient")
    def __init__(self, params: ProtocolParams, *, rng: RNGLike = None) -> None:
        if not isinstance(params, ProtocolParams):
            raise ParameterError(_validate.message("params",
                                                   "a ProtocolParams", type(params).__name__))
        self.params = params
        p = params
        self.key = DeviceKey.create(p.param_id, rng)
        self.order = self.key.stream("order").uniform_below(p.orders)
        self.t = 0  # last period seen
        self.prev = 0  # reported (frozen) X at the previous checkpoint of this order
        self.last_x = 0  # reported (frozen) X[t]
        self.raw_x = 0  # X[t] as read
        self.changes_used = 0  # changes of the reported sequence (≤ k)
        self.frozen = 0  # changes ignored because the budget k was spent
        self.r = 0  # Erlingsson et al.: index of the kept change
        self.kept: list[int] | None = None  # Erlingsson et al.: [time, sign] of the r-th change
        self.ahead: dict[int, int] = {}  # interval -> bit already sent, for intervals to come
        self.withheld: list[int] = []  # intervals whose report was withheld (see note_sent)
        if p.method == "erlingsson":
            self.r = 1 + self.key.stream("kept-change").uniform_below(p.max_changes)
        self.randomizer = make_randomizer(
            p.method, length=p.padded_horizon >> self.order,
            max_changes=p.changes_at_order(self.order), epsilon=p.epsilon, key=self.key)
        self._check_gap()

    @property
    def seeded(self) -> bool:
        """True when the device secret came from a seed (testing only, not private)."""
        return self.key.seeded

    def _check_gap(self) -> None:
        expected = self.params.c_gaps[self.order]
        if self.randomizer.name != self.params.method or not math.isclose(
                self.randomizer.c_gap, expected, rel_tol=1e-12):
            raise ParameterError(
                f"params of LongitudinalClient: c_gap of {self.params.method!r} does not "
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

    @public_errors("LongitudinalClient.note_sent")
    def note_sent(self, slots: Iterable[tuple[int, int]]) -> None:
        """Tell the client that reports of this device were already sent: ``(interval, bit)``
        pairs of its order (e.g. the slots the server holds for it).

        A report this client computes later for such an interval is returned when its bit is
        the one sent (a harmless resend) and **withheld** otherwise (not returned; its interval
        is appended to :attr:`withheld`). Intervals this client has already passed are ignored:
        their reports were computed before and cannot be withheld any more.

        Raises
        ------
        DataError
            An interval out of ``1..d >> order``, a bit not 0/1, or two different bits for
            one interval.
        """
        limit, done = self.params.padded_horizon >> self.order, self.t >> self.order
        known = dict(self.ahead)
        for pair in slots:
            j, bit = pair
            if isinstance(j, bool) or not isinstance(j, int | np.integer) or not 1 <= j <= limit:
                raise DataError(_validate.message("interval",
                                                  f"an integer in 1..{limit}", j))
            if isinstance(bit, bool) or bit not in (0, 1):
                raise DataError(_validate.message("bit",
                                                  "0 or 1", bit))
            if j <= done:
                continue
            if known.setdefault(int(j), int(bit)) != bit:
                raise DataError("slots of LongitudinalClient.note_sent must hold one bit per "
                                f"interval; got two for interval {int(j)}.")
        self.ahead = known

    @public_errors("LongitudinalClient.step")
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
            raise DataError(_validate.message("x", "0 or 1", x))
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
                if p.method == "erlingsson" and self.changes_used == self.r:
                    self.kept = [t, 1 if x == 1 else -1]
            else:
                self.frozen += 1
        if t % (1 << self.order):
            return None
        j = t >> self.order
        if p.method == "erlingsson":
            s = 0
            if self.kept is not None and t - (1 << self.order) < self.kept[0] <= t:
                s = self.kept[1]
        else:
            s = self.last_x - self.prev
        self.prev = self.last_x
        bit = (self.randomizer.step(j, s) + 1) // 2
        if self.ahead.pop(j, bit) != bit:  # another bit was sent for this slot: withhold
            self.withheld.append(j)
            return None
        return {"param_id": p.param_id, "order": self.order, "interval": j, "bit": bit}

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
                 "ahead": sorted(self.ahead.items()), "withheld": list(self.withheld),
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
        raw = open_protocol_json(text, kind=_CLIENT_KIND, label=label)
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
        erl = p.method == "erlingsson"
        self.r = field("r", 1, k) if erl else field("r", 0, 0)
        if erl and self.r != 1 + self.key.stream("kept-change").uniform_below(k):
            raise DataError("field 'r' does not match the device secret.")
        kept = st["kept"]
        if kept is not None and not (erl and isinstance(kept, list) and len(kept) == 2
                                     and all(isinstance(a, int) for a in kept)
                                     and 1 <= kept[0] <= self.t and kept[1] in (-1, 1)):
            raise DataError("field 'kept' must be null or [time, sign] of the kept change.")
        self.kept = kept
        limit, done = d >> self.order, self.t >> self.order
        ahead, withheld = st["ahead"], st["withheld"]
        if not (isinstance(ahead, list) and all(
                isinstance(a, list) and len(a) == 2 and all(type(v) is int for v in a)
                and done < a[0] <= limit and a[1] in (0, 1) for a in ahead)
                and len({a[0] for a in ahead}) == len(ahead)):
            raise DataError("field 'ahead' must list [interval, bit] of intervals still to come.")
        if not (isinstance(withheld, list) and all(type(j) is int and 1 <= j <= done
                                                   for j in withheld)):
            raise DataError("field 'withheld' must list intervals already passed.")
        self.ahead = {a[0]: a[1] for a in ahead}
        self.withheld = list(withheld)
        self.randomizer = restore_randomizer(
            p.method, length=d >> self.order, max_changes=p.changes_at_order(self.order),
            epsilon=p.epsilon, state=st["randomizer"], key=self.key)
        if self.randomizer.j != self.t >> self.order:
            raise DataError("the randomizer's report count does not match the period 't'.")
        self._check_gap()
