"""The public parameters every party of one cross-party measurement agrees on.

A measurement is named (``measurement``) and fixes: the number of registers ``R`` of the shared
virtual-ID space, the VID sampling interval ``[start, start + width)`` of that space, the
frequency cap ``K``, the privacy parameters of the two noisy registers a party publishes (the
reach bits at ``epsilon_reach``, the frequency registers at ``epsilon_frequency``, or none) and
the fingerprint of the secret hash key the parties share (:mod:`dpfreq.crossparty.vid`). Nothing
here is read from data and nothing has a default: the same file goes to every party and to
whoever merges, and sketches made under different parameters are never merged.

The file is public and sealed with a plain SHA-256 digest (never signed: the merger need not
hold the parties' artefact key), in the format of :func:`dpfreq.artifacts.seal_json`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq._validate import check_epsilon, check_int, message
from dpfreq.accounting import exact_fraction
from dpfreq.crossparty.public_file import PublicParamsFile
from dpfreq.errors import ParameterError, public_errors

__all__ = ["HASH_NAME", "MAX_FREQUENCY_LIMIT", "REGISTER_LIMIT", "SAMPLING_BITS",
           "UNIFORMITY_BITS", "CrossPartyParams", "RegisterSpaceFields"]

#: The keyed hash of the virtual-ID space (:mod:`dpfreq.crossparty.vid`), by name and version.
HASH_NAME = "sha256-prefix/v1"
#: Bits of the hash that place a user in the VID space (the sampling coordinate).
SAMPLING_BITS = 60
#: The sampling interval holds at least 2^UNIFORMITY_BITS VIDs per register.
UNIFORMITY_BITS = 20
#: Largest register count (a sketch holds one bit and one integer per register).
REGISTER_LIMIT = 2**30
#: Largest frequency cap (frequency classes ``1..K−1`` and ``K+``).
MAX_FREQUENCY_LIMIT = 1000
_KIND = "crossparty-params"
_VERSION = 1
_KEY_ID = re.compile(r"[0-9a-f]{32}")
_FIELDS = ("measurement", "registers", "sampling_start", "sampling_width", "max_frequency",
           "epsilon_reach", "epsilon_frequency", "hash", "key_id")


def _fraction(value: Any, param: str, *, low: Fraction, high: Fraction,
              closed_low: bool) -> Fraction:
    """A number or ``"s/t"`` text as an exact fraction (a float is read as its shortest
    decimal, ``0.1`` = 1/10) in ``[low, high]`` (``(low, high]`` unless ``closed_low``)."""
    rule = (f"a number or fraction text in {'[' if closed_low else '('}{low}, {high}]")
    try:
        if isinstance(value, Fraction):
            x = value
        elif isinstance(value, str):
            x = Fraction(value.strip())
        elif (isinstance(value, bool) or not isinstance(value, int | float)
              or (isinstance(value, float) and not math.isfinite(value))):
            raise ValueError
        else:
            x = exact_fraction(float(value)) if isinstance(value, float) else Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise ParameterError(message(param, rule, value)) from None
    if x > high or x < low or (x == low and not closed_low):
        raise ParameterError(message(param, rule, value))
    return x


@dataclass(frozen=True, kw_only=True)
class RegisterSpaceFields(PublicParamsFile):
    """The first fields of every cross-party parameters file: the measurement's name and its
    register space (``R``, the VID sampling interval as exact fractions, the cap ``K``).

    The rules are :class:`CrossPartyParams`'s; a subclass adds its privacy fields, the hash and
    the key's fingerprint after these.
    """

    FRACTIONS = ("sampling_start", "sampling_width")

    measurement: str
    registers: int
    sampling_start: Fraction | float | str
    sampling_width: Fraction | float | str
    max_frequency: int


@dataclass(frozen=True, kw_only=True)
class CrossPartyParams(RegisterSpaceFields):
    """The public parameters of one cross-party reach and frequency measurement.

    Parameters
    ----------
    measurement : str
        A public name of the measurement (1–200 printable characters); sketches of different
        measurements are never merged.
    registers : int
        Number of registers ``R`` of the virtual-ID space, ``1 <= R <= 2^30``.
    sampling_start, sampling_width : float, Fraction or str
        The VID sampling interval ``[start, start + width)`` as fractions of the VID space
        (``0 <= start < 1``, ``registers / 2^40 <= width <= 1 - start``; a float is read as its
        shortest decimal, ``"1/8"`` as the fraction). Only users whose VID falls in it are
        counted.
    max_frequency : int
        The frequency cap ``K`` (``1 <= K <= 1000``): frequencies are reported as ``1..K−1``
        and ``K+``; a register's count is capped at ``K`` before noise.
    epsilon_reach : float
        ε of the reach bits (randomized response per register).
    epsilon_frequency : float or None
        ε of the frequency registers (discrete Laplace per register), or None for a reach-only
        sketch (then only reach is estimated). Given explicitly either way.
    hash : str
        The keyed hash of the VID space, ``"sha256-prefix/v1"`` (the only one: a secret-prefix
        SHA-256, :mod:`dpfreq.crossparty.vid`).
    key_id : str
        Fingerprint of the shared hash key (32 hex digits,
        :func:`dpfreq.crossparty.key_fingerprint`): a party whose key has another fingerprint
        is refused, and so are sketches made with different keys.

    Attributes
    ----------
    epsilon : float
        ε of one party's sketch: ``epsilon_reach + epsilon_frequency`` (sequential
        composition).

    Raises
    ------
    ParameterError
        If a field breaks its rule (one line naming it).

    Examples
    --------
    >>> params = CrossPartyParams(
    ...     measurement="spring-campaign", registers=4096, sampling_start=0,
    ...     sampling_width="1/2", max_frequency=5, epsilon_reach=1.0, epsilon_frequency=None,
    ...     hash="sha256-prefix/v1", key_id="0" * 32)
    >>> params.sampling_rate, params.epsilon
    (Fraction(1, 2), 1.0)
    >>> CrossPartyParams.from_json(params.to_json()) == params
    True
    """

    KIND = _KIND
    VERSION = _VERSION
    FIELDS = _FIELDS
    WHAT = "cross-party parameters"

    epsilon_reach: float
    epsilon_frequency: float | None
    hash: str
    key_id: str

    @public_errors("CrossPartyParams")
    def __post_init__(self) -> None:
        name = self.measurement
        if not isinstance(name, str) or not 1 <= len(name) <= 200 or not name.isprintable():
            raise ParameterError(message("measurement", "a name of 1 to 200 printable "
                                         "characters", name))
        check_int(self.registers, "registers", minimum=1, maximum=REGISTER_LIMIT)
        start = _fraction(self.sampling_start, "sampling_start", low=Fraction(0),
                          high=Fraction(1), closed_low=True)
        if start == 1:
            raise ParameterError(message("sampling_start", "below 1", self.sampling_start))
        given_width = self.sampling_width  # as given, for a message that echoes it
        width = _fraction(given_width, "sampling_width", low=Fraction(0),
                          high=1 - start, closed_low=False)
        object.__setattr__(self, "registers", int(self.registers))
        object.__setattr__(self, "sampling_start", start)
        object.__setattr__(self, "sampling_width", width)
        lo, hi = self.sampling_bounds
        if hi - lo < self.registers * 2**UNIFORMITY_BITS:
            raise ParameterError(message(
                "sampling_width", f"at least registers / 2^{SAMPLING_BITS - UNIFORMITY_BITS}"
                f" (registers uniform within the interval to 2^-{UNIFORMITY_BITS})",
                given_width))
        object.__setattr__(self, "max_frequency", check_int(
            self.max_frequency, "max_frequency", minimum=1, maximum=MAX_FREQUENCY_LIMIT))
        object.__setattr__(self, "epsilon_reach",
                           check_epsilon(self.epsilon_reach, "epsilon_reach"))
        if self.epsilon_frequency is not None:
            object.__setattr__(self, "epsilon_frequency", check_epsilon(
                self.epsilon_frequency, "epsilon_frequency"))
        if self.hash != HASH_NAME:
            raise ParameterError(message("hash", repr(HASH_NAME), self.hash))
        if not isinstance(self.key_id, str) or not _KEY_ID.fullmatch(self.key_id):
            raise ParameterError(message("key_id", "32 lower-case hex digits (the key's "
                                         "fingerprint)", self.key_id))

    # -- derived ---------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of one party's sketch, ``epsilon_reach + epsilon_frequency`` (exact sum)."""
        total = exact_fraction(self.epsilon_reach)
        if self.epsilon_frequency is not None:
            total += exact_fraction(self.epsilon_frequency)
        return float(total)

    @property
    def sampling_bounds(self) -> tuple[int, int]:
        """``(lo, hi)``: a user is sampled when its sampling coordinate ``u`` (the first
        :data:`SAMPLING_BITS` bits of its hash) has ``lo <= u < hi``."""
        scale = 2**SAMPLING_BITS
        start, width = Fraction(self.sampling_start), Fraction(self.sampling_width)
        return math.floor(start * scale), math.floor((start + width) * scale)

    @property
    def sampling_rate(self) -> Fraction:
        """The exact probability that a user is sampled, ``(hi − lo) / 2^60``."""
        lo, hi = self.sampling_bounds
        return Fraction(hi - lo, 2**SAMPLING_BITS)

    @property
    def has_frequency(self) -> bool:
        """Whether sketches carry frequency registers (``epsilon_frequency`` is not None)."""
        return self.epsilon_frequency is not None

    # -- files -----------------------------------------------------------------------------
