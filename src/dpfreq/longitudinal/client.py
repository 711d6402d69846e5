"""Protocol parameters and the device-side state machine (futurerand.md §3.1, §7.1, §7.2)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import RNGLike, resolve_rng

from .laws import CERTIFICATE_TOLERANCE, distance_law, erlingsson_c_gap
from .randomizers import make_randomizer, restore_randomizer

__all__ = ["PROTOCOL_VERSION", "LongitudinalClient", "ProtocolParams", "make_params"]

PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class ProtocolParams:
    """Versioned parameters shared by devices and server (§7.1, pitfall 9).

    ``periods`` is the user-facing horizon; ``padded_periods`` the power of two the dyadic
    decomposition uses (pitfall 6). ``randomizer`` is the resolved mode (auto is resolved at
    :func:`make_params`), ``c_gap`` its exact gap and ``certificate`` its exact ln(p_max/p_min).
    """

    periods: int
    padded_periods: int
    changes: int
    epsilon: float
    randomizer: str
    c_gap: float
    certificate: float
    per_order_sparsity: bool = False
    order_c_gaps: tuple[float, ...] = ()
    version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        func = "ProtocolParams"
        object.__setattr__(self, "order_c_gaps", tuple(float(c) for c in self.order_c_gaps))
        if self.version != PROTOCOL_VERSION:
            raise DataError(
                _validate.message("version", func, f"the supported protocol version "
                                  f"{PROTOCOL_VERSION}", self.version)
            )
        d0 = _validate.check_int(self.periods, "periods", func, minimum=1)
        _validate.check_int(self.changes, "changes", func, minimum=1)
        _validate.check_epsilon(self.epsilon, "epsilon", func)
        if self.padded_periods != 1 << max(0, (d0 - 1).bit_length()):
            raise ParameterError(
                _validate.message("padded_periods", func, "the power of two ≥ periods",
                                  self.padded_periods)
            )
        _validate.check_choice(self.randomizer, "randomizer", func,
                               ("calibrated", "erlingsson", "futurerand", "rr", "threshold"))
        c = _validate.check_positive_float(self.c_gap, "c_gap", func)
        if c > 1:
            raise ParameterError(_validate.message("c_gap", func, "in (0, 1]", self.c_gap))
        if not 0 <= self.certificate <= self.epsilon * (1 + CERTIFICATE_TOLERANCE):
            raise ParameterError(
                _validate.message("certificate", func, f"in [0, epsilon = {self.epsilon!r}]",
                                  self.certificate)
            )
        if not isinstance(self.per_order_sparsity, bool):
            raise ParameterError(
                _validate.message("per_order_sparsity", func, "a bool", self.per_order_sparsity)
            )
        if self.per_order_sparsity:
            if self.randomizer == "erlingsson":
                raise ParameterError(
                    "per_order_sparsity of ProtocolParams applies to distance-based randomizers "
                    "only; got randomizer 'erlingsson'."
                )
            if len(self.order_c_gaps) != self.orders or not all(
                0 < c <= 1 for c in self.order_c_gaps
            ):
                raise ParameterError(
                    _validate.message("order_c_gaps", func,
                                      f"{self.orders} gaps in (0, 1], one per order",
                                      self.order_c_gaps)
                )
        elif self.order_c_gaps:
            raise ParameterError(
                _validate.message("order_c_gaps", func, "empty without per_order_sparsity",
                                  self.order_c_gaps)
            )

    @property
    def c_gaps(self) -> tuple[float, ...]:
        """The gap of each order h = 0..log d (all equal to ``c_gap`` unless per-order)."""
        return self.order_c_gaps if self.per_order_sparsity else (self.c_gap,) * self.orders

    def changes_at_order(self, h: int) -> int:
        """Non-zero budget of the randomizer of order h: ``min(k, d/2^h)`` per order, else k."""
        return min(self.changes, self.padded_periods >> h) if self.per_order_sparsity else (
            self.changes)

    @property
    def orders(self) -> int:
        """Number of orders ``log d + 1``."""
        return self.padded_periods.bit_length()

    @property
    def param_id(self) -> str:
        """Content hash identifying the parameter set (first 16 hex digits of SHA-256)."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_json(self) -> str:
        """JSON text including ``param_id``."""
        return json.dumps({**asdict(self), "param_id": self.param_id}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ProtocolParams:
        """Parse and check the ``param_id`` against the content."""
        try:
            raw = json.loads(text)
            pid = raw.pop("param_id", None)
            p = cls(**raw)
        except (TypeError, ValueError) as exc:
            raise DataError(
                f"protocol parameters are not valid JSON of ProtocolParams: {exc}"
            ) from None
        if pid is not None and pid != p.param_id:
            raise DataError(
                f"param_id {pid!r} does not match the parameters (expected {p.param_id!r})."
            )
        return p


def make_params(
    periods: int,
    changes: int,
    epsilon: float,
    randomizer: str,
    *,
    per_order_sparsity: bool = False,
) -> ProtocolParams:
    """The versioned protocol parameters shared by devices and server (§7.1).

    Parameters
    ----------
    periods : int
        Horizon ``d`` (padded to the next power of two, pitfall 6).
    changes : int
        Change budget ``k`` per device (``X[0] = 0``: starting at 1 is a change).
    epsilon : float
        Each device's local ε over its whole sequence.
    randomizer : str
        ``"auto"`` (largest exact ``c_gap``; recommended), ``"futurerand"`` (paper constants,
        the reference), ``"calibrated"``, ``"threshold"``, ``"rr"`` or ``"erlingsson"``.
    per_order_sparsity : bool, keyword-only
        Pitfall 5 (an option, not in the paper): order h has only ``L = d/2^h`` coordinates, so
        its randomizer is built for ``min(k, L)`` non-zeros (larger gap at high orders); the
        per-order gaps are recorded in ``order_c_gaps`` and the server uses them. Distance-based
        randomizers only; ``auto`` is resolved once, at k.

    No parameter has a default and none is derived from data. The randomizer's exact ``c_gap``
    and privacy certificate are computed here (construction refuses a certificate above ε).
    """
    func = "make_params"
    d0 = _validate.check_int(periods, "periods", func, minimum=1)
    k = _validate.check_int(changes, "changes", func, minimum=1)
    epsilon = _validate.check_epsilon(epsilon, "epsilon", func)
    randomizer = _validate.check_choice(
        randomizer,
        "randomizer",
        func,
        ("auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"),
    )
    d = 1 << max(0, (d0 - 1).bit_length())
    if randomizer == "erlingsson":
        name, c_gap = "erlingsson", erlingsson_c_gap(k, epsilon)
        cert = float(epsilon_to_fraction(epsilon))  # exact RR uses γ ≤ ε (§4.4)
    else:
        law = distance_law(randomizer, k, epsilon)
        name, c_gap, cert = law.name, law.c_gap, law.certificate
    gaps: tuple[float, ...] = ()
    if per_order_sparsity is True and name != "erlingsson":
        laws = [distance_law(name, min(k, d >> h), epsilon) for h in range(d.bit_length())]
        gaps = tuple(lw.c_gap for lw in laws)
        cert = max(lw.certificate for lw in laws)
    return ProtocolParams(d0, d, k, epsilon, name, c_gap, cert, per_order_sparsity, gaps)


class LongitudinalClient:
    """One device (Algorithm 1, §3.1, §7.1): call :meth:`step` with ``X[t]`` for t = 1, 2, ...

    Parameters
    ----------
    params : ProtocolParams
        The versioned parameter bundle shared with the server (:func:`make_params`).
    rng : None, int or numpy.random.Generator, keyword-only
        The device's randomness; ``None`` (production) is the secure default of
        :mod:`dpfreq.rng`. Seeds are for tests and simulations only.

    Notes
    -----
    * **Enrolment.** At construction the device draws its order ``h`` uniformly from
      ``{0..log d}`` (independent of the data, pitfall 12) and calls ``init(L, k, ε)`` of its
      randomizer with ``L = d/2^h`` (:mod:`dpfreq.longitudinal.randomizers`): FutureRand draws
      its vector ``v = CR(1^k)`` here, once; Erlingsson et al. draw ``r ~ U{1..k}``.
    * **Reports.** One report ``{param_id, h, j, bit}`` at **every** multiple of ``2^h``, zero
      partial sums included (pitfall 7); ``bit ∈ {0, 1}`` encodes ``y ∈ {−1, +1}``.
    * **Change budget.** ``X[0] = 0``, so a device starting at 1 spends one change (pitfall 3).
      Changes beyond the k-th are **frozen**: the device keeps reporting the value it had after
      its k-th change, so its reports are those of an admissible sequence; ``v`` is never
      redrawn (pitfall 4). ``frozen`` counts the ignored changes (the estimate is then biased
      for this device, privacy is kept).
    * **Horizon.** ``d`` is padded to a power of two; :meth:`finish` feeds the last value up to
      the padded horizon (pitfall 6).
    * **Persistence.** The state (order, counters, ``v``, parameters; not the generator) round
      -trips through :meth:`to_json` / :meth:`from_json`.

    Privacy
    -------
    Unit: the device's whole sequence ``X[1..d]``; neighbouring: any two sequences with at most
    ``k`` changes each (user-level). The transcript (``h`` and every report) is ε-local-DP
    (Theorem 4.5), with ε = ``params.epsilon`` and the randomizer's exact certificate
    ``params.certificate ≤ ε``.
    """

    def __init__(self, params: ProtocolParams, *, rng: RNGLike = None) -> None:
        if not isinstance(params, ProtocolParams):
            raise ParameterError(
                f"params of LongitudinalClient must be a ProtocolParams; got {params!r}."
            )
        self.params = params
        self._gen = resolve_rng(rng, "LongitudinalClient").generator
        p = params
        self.h = int(self._gen.integers(0, p.orders))
        self.t = 0  # last period seen
        self.prev = 0  # reported (frozen) X at the previous checkpoint of order h
        self.last_x = 0  # reported (frozen) X[t]
        self.raw_x = 0  # X[t] as read
        self.changes_used = 0  # changes of the reported sequence (≤ k)
        self.frozen = 0  # changes ignored because the budget k was spent
        self.r = 0  # Erlingsson et al.: index of the kept change
        self.kept: list[int] | None = None  # Erlingsson et al.: [time, sign] of the r-th change
        if p.randomizer == "erlingsson":
            self.r = int(self._gen.integers(1, p.changes + 1))
        self.randomizer = make_randomizer(
            p.randomizer,
            p.padded_periods >> self.h,
            p.changes_at_order(self.h),
            p.epsilon,
            rng=self._gen,
        )
        expected = p.c_gaps[self.h]
        if self.randomizer.name != p.randomizer or not math.isclose(
            self.randomizer.c_gap, expected, rel_tol=1e-12
        ):
            raise ParameterError(
                f"params of LongitudinalClient: c_gap {expected!r} of {p.randomizer!r} (order "
                f"{self.h}) does not match this library's exact value {self.randomizer.c_gap!r} "
                "(pitfall 9)."
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
        """Enrolment message ``{protocol_version, param_id, h}`` (§7.2)."""
        return {
            "protocol_version": self.params.version,
            "param_id": self.params.param_id,
            "h": self.h,
        }

    def step(self, x: int) -> dict[str, Any] | None:
        """Read ``X[t]`` for the next period t; return the report due at t, if any.

        Raises
        ------
        DataError
            ``x`` not 0/1, or a step after the padded horizon.
        """
        if isinstance(x, bool) or x not in (0, 1):
            raise DataError(f"x of LongitudinalClient.step must be 0 or 1; got {x!r}.")
        p = self.params
        if self.t >= p.padded_periods:
            raise DataError(
                f"LongitudinalClient.step called after the last period {p.padded_periods}."
            )
        self.t += 1
        t = self.t
        if x != self.raw_x:
            self.raw_x = int(x)
            if self.changes_used < p.changes:
                self.changes_used += 1
                self.last_x = int(x)
                if p.randomizer == "erlingsson" and self.changes_used == self.r:
                    self.kept = [t, 1 if x == 1 else -1]
            else:
                self.frozen += 1
        if t % (1 << self.h):
            return None
        j = t >> self.h
        if p.randomizer == "erlingsson":
            s = 0
            if self.kept is not None and t - (1 << self.h) < self.kept[0] <= t:
                s = self.kept[1]
        else:
            s = self.last_x - self.prev
        self.prev = self.last_x
        y = self.randomizer.step(j, s)
        return {"param_id": p.param_id, "h": self.h, "j": j, "bit": (y + 1) // 2}

    def finish(self) -> list[dict[str, Any]]:
        """Pad to the power-of-two horizon with the last value (pitfall 6); return the reports."""
        out = []
        while self.t < self.params.padded_periods:
            rep = self.step(self.raw_x)
            if rep is not None:
                out.append(rep)
        return out

    def to_json(self) -> str:
        """Persistable state: parameters, order, counters and the randomizer's state (no RNG)."""
        state = {
            "h": self.h,
            "t": self.t,
            "prev": self.prev,
            "last_x": self.last_x,
            "raw_x": self.raw_x,
            "changes_used": self.changes_used,
            "frozen": self.frozen,
            "r": self.r,
            "kept": self.kept,
            "randomizer": self.randomizer.state(),
        }
        return json.dumps({"params": json.loads(self.params.to_json()), "state": state})

    @classmethod
    def from_json(cls, text: str, *, rng: RNGLike = None) -> LongitudinalClient:
        """Restore a device from :meth:`to_json` output (``v`` is restored, never redrawn)."""
        try:
            raw = json.loads(text)
            params = ProtocolParams.from_json(json.dumps(raw["params"]))
            st = raw["state"]
            obj = cls.__new__(cls)
            obj.params = params
            obj._gen = resolve_rng(rng, "LongitudinalClient.from_json").generator
            for key in ("h", "t", "prev", "last_x", "raw_x", "changes_used", "frozen", "r"):
                setattr(obj, key, int(st[key]))
            obj.kept = None if st["kept"] is None else [int(a) for a in st["kept"]]
            obj.randomizer = restore_randomizer(
                params.randomizer,
                params.padded_periods >> obj.h,
                params.changes_at_order(obj.h),
                params.epsilon,
                st["randomizer"],
                rng=obj._gen,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ParameterError):
                raise
            raise DataError(f"client state is not valid LongitudinalClient JSON: {exc!r}") from None
        return obj
