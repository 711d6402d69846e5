"""One party's ε-DP sketch: noisy reach bits and frequency registers over the shared registers.

:func:`build_sketch` runs the release pipeline (:mod:`dpfreq.pipeline`): every parameter is
checked, the budget is checked, the log is aggregated where it lives
(:func:`dpfreq.crossparty.registers.register_frequencies`), the budget is spent, and only then
is the noise drawn (:mod:`dpfreq.crossparty.local_noise`). The :class:`PartySketch` holds the
noisy vectors alone — the exact frequencies are dropped — so saving, sending and merging it is
post-processing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.budget import BudgetAccountant
from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.files import read_sketch, write_sketch
from dpfreq.crossparty.local_noise import LocalNoise, calibrate, draw_noise
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.crossparty.registers import (
    LogSpec,
    RegisterCounts,
    check_log_spec,
    register_frequencies,
)
from dpfreq.crossparty.vid import vid_hash
from dpfreq.errors import ParameterError, public_errors
from dpfreq.pipeline import Charge, Reading, run_release
from dpfreq.release import RELATIONS
from dpfreq.resources import check_memory
from dpfreq.rng import ResolvedRNG, RNGLike

__all__ = ["MECHANISM", "UNIT", "PartySketch", "build_sketch", "check_party", "draw_sketch"]

MECHANISM = "crossparty-local-noise"
#: The unit of privacy of a sketch: one user with all their impressions at that party.
UNIT = "item"
_FUNC = "build_sketch"
_SKETCH_ID = re.compile(r"[0-9a-f]{32}")


def check_party(value: Any) -> str:
    """A party name: 1 to 200 printable characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= 200 or not value.isprintable():
        raise ParameterError(message("party", "a name of 1 to 200 printable characters",
                                     value))
    return value


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class PartySketch:
    """One party's ε-DP sketch of its register frequencies (a release: see Notes).

    Build with :func:`build_sketch`; read a saved one with :meth:`load`.

    Attributes
    ----------
    params : CrossPartyParams
        The measurement's public parameters.
    party : str
        The party's public name.
    coverage : Coverage
        The rows counted: the measurement period and the campaigns (public; a merge refuses
        sketches that cover other ones).
    sketch_id : str
        32 random hex digits drawn with the noise: a sketch is merged at most once.
    reach_bits : numpy.ndarray of uint8
        The randomized-response bits, one per register (0/1).
    frequency : numpy.ndarray of signed integers or None
        The noisy capped frequencies, one per register (None for a reach-only sketch; int64
        when built, the narrowest type that holds them when read from a file).
    seeded : bool
        True when the noise came from a seed (reproducible, not for production).
    engine : str
        The engine that aggregated the log.

    Notes
    -----
    **Privacy.** The sketch is ``epsilon``-DP (pure, δ = 0) with unit of privacy ``"item"``:
    one user with all their impressions at this party (neighbouring logs differ by all the rows
    of one user). Such a change moves one register, by at most 1 in its bit and ``K`` in its
    capped frequency, so randomized response at ``epsilon_reach`` per bit and discrete Laplace
    noise at ``epsilon_frequency / K`` per register make the two vectors
    ``epsilon_reach``-DP and ``epsilon_frequency``-DP (:mod:`dpfreq.crossparty.local_noise`).
    Everything computed from sketches — files, merges, estimates — is post-processing. A person
    present at ``j`` parties is protected at ``j·epsilon`` across them.

    Examples
    --------
    >>> import math
    >>> from dpfreq.crossparty import CrossPartyParams, build_sketch, key_fingerprint
    >>> key = bytes(32)  # a fixed key: for this example only
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=1024, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon_reach=math.log(3), epsilon_frequency=None,
    ...     hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    >>> sketch = build_sketch({"user": np.arange(300)}, user="user", party="tv",
    ...                       params=params, key=key, rng=1)
    >>> sketch.reach_bits.shape, sketch.unit, round(sketch.epsilon, 4)
    ((1024,), 'item', 1.0986)
    """

    params: CrossPartyParams
    party: str
    coverage: Coverage
    sketch_id: str
    reach_bits: NDArray[np.uint8]
    frequency: NDArray[np.signedinteger[Any]] | None
    seeded: bool
    engine: str

    @public_errors("PartySketch")
    def __post_init__(self) -> None:
        if not isinstance(self.params, CrossPartyParams):
            raise ParameterError(message("params", "a CrossPartyParams",
                                         type(self.params).__name__))
        check_party(self.party)
        if not isinstance(self.coverage, Coverage):
            raise ParameterError(message("coverage", "a Coverage", type(self.coverage).__name__))
        if not isinstance(self.sketch_id, str) or not _SKETCH_ID.fullmatch(self.sketch_id):
            raise ParameterError(message("sketch_id", "32 lower-case hex digits",
                                         self.sketch_id))
        if not isinstance(self.seeded, bool):
            raise ParameterError(message("seeded", "True or False", self.seeded))
        if not isinstance(self.engine, str):
            raise ParameterError(message("engine", "an engine's name (str)", self.engine))
        R = self.params.registers
        bits = np.asarray(self.reach_bits)
        if (bits.shape != (R,) or bits.dtype.kind not in "biu"
                or (bits.size and not 0 <= int(bits.min()) <= int(bits.max()) <= 1)):
            raise ParameterError(message("reach_bits", f"{R} bits (0 or 1), one per register",
                                         bits))
        object.__setattr__(self, "reach_bits", bits.astype(np.uint8, copy=False))
        if self.params.has_frequency:
            freq = None if self.frequency is None else np.asarray(self.frequency)
            if freq is None or freq.shape != (R,) or freq.dtype.kind != "i":
                raise ParameterError(message(
                    "frequency", f"{R} signed integers, one per register (the parameters have "
                    "frequency registers)", freq))
        elif self.frequency is not None:
            raise ParameterError(message("frequency", "None (the parameters are reach-only)",
                                         np.asarray(self.frequency)))
        for name in ("reach_bits", "frequency"):
            arr = getattr(self, name)
            if arr is not None:
                view = arr.view()
                view.flags.writeable = False
                object.__setattr__(self, name, view)

    @property
    def epsilon(self) -> float:
        """ε of the sketch (``params.epsilon``)."""
        return self.params.epsilon

    @property
    def delta(self) -> float:
        """δ of the sketch: 0 (pure ε-DP)."""
        return 0.0

    @property
    def unit(self) -> str:
        """The unit of privacy, ``"item"``: one user with all their impressions at the party."""
        return UNIT

    @property
    def relation(self) -> str:
        """The neighbouring relation in words."""
        return (f"{RELATIONS[UNIT]} (item = one user; rows = their impressions at party "
                f"{self.party!r})")

    @property
    def mechanism(self) -> str:
        """The mechanism's name."""
        return MECHANISM

    @property
    def noise(self) -> LocalNoise:
        """The exact noise laws (:func:`dpfreq.crossparty.local_noise.calibrate`)."""
        return calibrate(self.params)

    def __repr__(self) -> str:
        seeded = ", seeded (not for production)" if self.seeded else ""
        kind = "reach and frequency" if self.frequency is not None else "reach only"
        return (f"PartySketch(party={self.party!r}, measurement={self.params.measurement!r}, "
                f"registers={self.params.registers}, {kind}, "
                f"covers={self.coverage.describe()!r}, epsilon={self.epsilon:g}, "
                f"unit={UNIT!r}{seeded})")

    def save(self, path: str | Path) -> Path:
        """Write the sketch to ``path`` (signed when ``DPFREQ_ARTIFACT_KEY`` is set).

        The file is the same ε-DP release as the sketch; writing it spends nothing.
        """
        return write_sketch(self, path)

    @classmethod
    def load(cls, path: str | Path) -> PartySketch:
        """Read a sketch written by :meth:`save` (digest, kind, version and every field
        checked; a tampered file is refused in one line)."""
        return cls(**read_sketch(path))

    def replace(self, **changes: Any) -> PartySketch:
        """A copy with some fields changed (for tests of the merge's refusals)."""
        return dataclasses.replace(self, **changes)


@public_errors("draw_sketch")
def draw_sketch(values: NDArray[np.int64], *, params: CrossPartyParams, party: str,
                rng: ResolvedRNG, engine: str, coverage: Coverage | None = None) -> PartySketch:
    """The sketch of exact register frequencies ``values`` (length ``R``, each in ``0..K``).

    The mechanism alone, for callers that already hold checked frequencies and have charged
    the budget (:func:`build_sketch`; simulations): draws the sketch id, then the noise.
    ``coverage`` describes the rows the values count (None: every row of the log).

    Examples
    --------
    >>> from dpfreq.rng import resolve_rng
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=4, sampling_start=0, sampling_width=1, max_frequency=2,
    ...     epsilon_reach=1.0, epsilon_frequency=1.0, hash="sha256-prefix/v1", key_id="0" * 32)
    >>> s = draw_sketch(np.array([0, 1, 2, 0]), params=params, party="web",
    ...                 rng=resolve_rng(3), engine="simulation")
    >>> s.party, s.frequency.shape, len(s.sketch_id)
    ('web', (4,), 32)
    """
    x = np.asarray(values)
    K = params.max_frequency
    if (x.shape != (params.registers,) or x.dtype.kind not in "iu"
            or (x.size and not 0 <= int(x.min()) <= int(x.max()) <= K)):
        # the noise is calibrated to values in 0..K: anything else would void the guarantee
        raise ParameterError(message("values", f"{params.registers} integers in 0..{K} (the "
                                     "capped register frequencies)",
                                     f"an array of shape {x.shape} and dtype {x.dtype}"))
    gen = rng.generator
    sketch_id = gen.bytes(16).hex()
    bits, freq = draw_noise(x.astype(np.int64), calibrate(params), gen)
    return PartySketch(params=params, party=party, coverage=coverage or Coverage(),
                       sketch_id=sketch_id, reach_bits=bits, frequency=freq,
                       seeded=rng.seeded, engine=engine)


@dataclass(frozen=True)
class _SketchSteps:
    """The pipeline steps of :func:`build_sketch`."""

    source: Any
    spec: LogSpec
    party: str
    params: CrossPartyParams
    coverage: Coverage
    key: bytes
    engine: Any

    def plan(self) -> None:
        check_memory(24 * self.params.registers, param="registers",
                     value=self.params.registers, what="a sketch (about 24 bytes per register)")

    def charge(self, plan: None) -> Charge:
        return Charge(self.params.epsilon, 0.0, UNIT, _FUNC,
                      loss=calibrate(self.params).privacy_loss())

    def read(self, plan: None) -> Reading[RegisterCounts]:
        counts = register_frequencies(self.source, spec=self.spec, params=self.params,
                                      key=self.key, engine=self.engine)
        return Reading(counts, counts.engine)

    def draw(self, plan: None, data: RegisterCounts, rng: ResolvedRNG) -> PartySketch:
        return draw_sketch(data.values, params=self.params, party=self.party, rng=rng,
                           engine=data.engine, coverage=self.coverage)

    def build(self, plan: None, noisy: PartySketch) -> PartySketch:
        return noisy


@public_errors(_FUNC)
def build_sketch(
    source: Any,
    *,
    user: str,
    party: str,
    params: CrossPartyParams,
    key: bytes,
    time: str | None = None,
    period: tuple[Any, Any] | None = None,
    campaign: str | None = None,
    campaigns: Any = None,
    engine: Any = None,
    rng: RNGLike = None,
    accountant: BudgetAccountant | None = None,
) -> PartySketch:
    """Build one party's ε-DP sketch of its impression log for a cross-party measurement.

    Parameters
    ----------
    source : mapping, path, SQL, DataFrame, DuckDB relation or Spark DataFrame
        The party's impression log, one row per impression: a mapping ``{column: array}``
        (memory engine), a CSV/Parquet path, SQL, a pandas/Polars/Arrow table or DuckDB
        relation (DuckDB), or a Spark DataFrame (Spark).
    user : str
        The user column (integers or text; CSV identifiers are read as text).
    party : str
        This party's public name (1–200 printable characters).
    params : CrossPartyParams
        The measurement's public parameters, the same for every party. ε is
        ``params.epsilon``; nothing is defaulted.
    key : bytes
        The hash key shared by the parties (never by whoever merges); its fingerprint must be
        ``params.key_id``.
    time : str, optional
        The time column (integers, or timestamps/dates as µs since the epoch, UTC); with
        ``period``.
    period : (start, end), optional
        Only rows with ``start <= time < end`` count: integers, or datetimes/dates for
        timestamp columns (naive ones read as UTC). Given with ``time``.
    campaign : str, optional
        The campaign column; with ``campaigns``.
    campaigns : list of str or int, optional
        The public list of campaigns counted (compared as text).
    engine : None, "memory", "duckdb", "spark", an engine or a SparkSession
        Where the log is aggregated (None: from the kind of ``source``).
    rng : None, int or numpy.random.Generator, keyword-only
        Noise source; None is the secure default. A seed is for tests only.
    accountant : Accountant or Ledger, optional
        Charged ``(params.epsilon, 0)`` at unit ``"item"`` after every check has passed and
        before any noise is drawn; a refused call spends nothing.

    Returns
    -------
    PartySketch
        The sketch, recording its ``coverage`` (the period and campaigns: public); save it
        with :meth:`PartySketch.save`; merge with :func:`merge_sketches`.

    Raises
    ------
    ParameterError
        A parameter breaks its rule, or the key is not the one the parameters name.
    DataError
        The log cannot be read, lacks a column, or holds nulls or values of the wrong type.
    BudgetExceededError
        The accountant cannot afford ``params.epsilon``.

    Notes
    -----
    **Privacy.** ε-DP with ε = ``params.epsilon`` (pure), unit of privacy ``"item"``: one user
    with all their impressions at this party; neighbouring logs differ by every row of one
    user. See :class:`PartySketch` for the argument and :mod:`dpfreq.crossparty.local_noise`
    for the exact laws. The sketch alone is published; merging and estimating are
    post-processing.

    Examples
    --------
    >>> import math
    >>> from dpfreq.crossparty import CrossPartyParams, key_fingerprint, merge_sketches
    >>> key = bytes(32)  # a fixed key: for this example only (use new_hash_key())
    >>> params = CrossPartyParams(
    ...     measurement="demo", registers=2048, sampling_start=0, sampling_width=1,
    ...     max_frequency=4, epsilon_reach=math.log(3), epsilon_frequency=None,
    ...     hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    >>> tv = build_sketch({"user": np.arange(0, 600)}, user="user", party="tv",
    ...                   params=params, key=key, rng=1)
    >>> web = build_sketch({"user": np.arange(300, 900)}, user="user", party="web",
    ...                    params=params, key=key, rng=2)
    >>> rel = merge_sketches([tv, web], confidence=0.95)  # 900 users in all
    >>> rel.parties, bool(rel.error.lower[0] < rel.reach < rel.error.upper[0])
    (('tv', 'web'), True)
    """
    if not isinstance(params, CrossPartyParams):
        raise ParameterError(message("params", "a CrossPartyParams",
                                     type(params).__name__))
    name = check_party(party)
    spec = check_log_spec(user=user, time=time, period=period, campaign=campaign,
                          campaigns=campaigns)
    vid_hash(key, params)  # the key's fingerprint, before anything is read or spent
    coverage = Coverage.of(spec.period, period, spec.campaigns)
    steps = _SketchSteps(source=source, spec=spec, party=name, params=params,
                         coverage=coverage, key=bytes(key), engine=engine)
    return run_release(steps, accountant=accountant, rng=rng)
