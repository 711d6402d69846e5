"""Protocol parameters and the device-side state machine (futurerand.md §3.1, §7.1, §7.2)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import randomized_response
from dpfreq.rng import resolve_rng

from .laws import distance_law, erlingsson_c_gap

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
    version: int = PROTOCOL_VERSION

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


def make_params(periods: int, changes: int, epsilon: float, randomizer: str) -> ProtocolParams:
    """Protocol parameters; no default for any privacy parameter, horizon or change budget."""
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
        name, c_gap, cert = "erlingsson", erlingsson_c_gap(k, epsilon), epsilon
    else:
        law = distance_law(randomizer, k, epsilon)
        name, c_gap, cert = law.name, law.c_gap, law.log_ratio
    return ProtocolParams(d0, d, k, epsilon, name, c_gap, cert)


class LongitudinalClient:
    """One device (Algorithm 1, §3.1): call :meth:`step` with ``X[t]`` for t = 1, 2, ...

    At construction the device draws its order ``h`` uniformly from {0..log d} and its
    pre-computed vector ``v = R(1^k)`` once (§5.3; Erlingsson: ``r ~ U[1..k]``). A report
    ``{param_id, h, j, bit}`` is returned at every multiple of ``2^h``, zero partial sums included
    (pitfall 7). Non-zero partial sums of its order beyond the k-th are treated as 0 (pitfall 4:
    the output is then the law of a valid input; ``v`` is never redrawn). ``X[0] = 0``, so a
    device starting at 1 spends one change (pitfall 3). The state (without the RNG) round-trips
    through :meth:`to_json` / :meth:`from_json`.

    Privacy
    -------
    Unit: this device's whole sequence; neighbouring: any two sequences with at most k changes;
    the transcript (h and all reports) is ε-local-DP (Theorem 4.5, certificate in the params).
    """

    def __init__(self, params: ProtocolParams, *, rng: Any = None, _state: dict | None = None):
        if not isinstance(params, ProtocolParams):
            raise ParameterError(
                f"params of LongitudinalClient must be a ProtocolParams; got {params!r}."
            )
        self.params = params
        self._gen = resolve_rng(rng, "LongitudinalClient").generator
        if _state is not None:
            self.__dict__.update(_state)
            return
        p = params
        self.h = int(self._gen.integers(0, p.orders))
        self.t = 0  # last period seen
        self.prev = 0  # X at the previous checkpoint of order h
        self.last_x = 0  # X[t]
        self.changes_seen = 0  # order-0 changes (informational)
        self.used = 0  # non-zero partial sums already reported (≤ k)
        self.frozen = 0  # non-zero partial sums treated as 0 after the budget ran out
        if p.randomizer == "erlingsson":
            self.r = int(self._gen.integers(1, p.changes + 1))
            self.kept: list[int] | None = None  # [time, sign] of the r-th change
            self.v: list[int] = []
        else:
            law = distance_law(p.randomizer, p.changes, p.epsilon)
            self.v = [int(b) for b in law.sample(1, rng=self._gen)[0]]
            self.r = 0
            self.kept = None

    def enrolment(self) -> dict:
        """Enrolment message ``{protocol_version, param_id, h}`` (§7.2)."""
        return {
            "protocol_version": self.params.version,
            "param_id": self.params.param_id,
            "h": self.h,
        }

    def _coin(self) -> int:
        return 1 if self._gen.integers(0, 2) else -1

    def step(self, x: int) -> dict | None:
        """Read ``X[t]`` for the next period t; return the report due at t, if any."""
        if x not in (0, 1) or isinstance(x, bool):
            raise DataError(f"x of LongitudinalClient.step must be 0 or 1; got {x!r}.")
        p = self.params
        if self.t >= p.padded_periods:
            raise DataError(
                f"LongitudinalClient.step called after the last period {p.padded_periods}."
            )
        self.t += 1
        t = self.t
        if x != self.last_x:
            self.changes_seen += 1
            if p.randomizer == "erlingsson" and self.changes_seen == self.r:
                self.kept = [t, 1 if x == 1 else -1]
        self.last_x = int(x)
        if t % (1 << self.h):
            return None
        j = t >> self.h
        if p.randomizer == "erlingsson":
            s = 0
            if self.kept is not None and t - (1 << self.h) < self.kept[0] <= t:
                s = self.kept[1]
            if s == 0:
                y = self._coin()
            else:
                keep = int(randomized_response(np.array([1], np.int8), p.epsilon, rng=self._gen)[0])
                y = s if keep else -s
        else:
            s = int(x) - self.prev
            self.prev = int(x)
            if s != 0 and self.used >= p.changes:
                self.frozen += 1
                s = 0
            if s == 0:
                y = self._coin()
            else:
                y = self.v[self.used] * s
                self.used += 1
        return {"param_id": p.param_id, "h": self.h, "j": j, "bit": (y + 1) // 2}

    def finish(self) -> list[dict]:
        """Pad to the power-of-two horizon with the last value (pitfall 6); return the reports."""
        out = []
        while self.t < self.params.padded_periods:
            rep = self.step(self.last_x)
            if rep is not None:
                out.append(rep)
        return out

    def to_json(self) -> str:
        """Persistable state (parameters and counters, not the RNG)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("params", "_gen")}
        return json.dumps({"params": json.loads(self.params.to_json()), "state": state})

    @classmethod
    def from_json(cls, text: str, *, rng: Any = None) -> LongitudinalClient:
        """Restore a device from :meth:`to_json` output."""
        raw = json.loads(text)
        params = ProtocolParams.from_json(json.dumps(raw["params"]))
        return cls(params, rng=rng, _state=raw["state"])
