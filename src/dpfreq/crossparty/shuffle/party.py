"""The party's side: capped register frequencies, split into two additive shares.

A party computes its exact capped register frequencies where its log lives (the same
computation as a local-noise sketch, :func:`dpfreq.crossparty.registers.register_frequencies`,
with the measurement's register space and the rows of its coverage: the period and campaigns
the parameters fix, never the party's own choice), splits them into a seed share and a vector share
(:mod:`dpfreq.crossparty.shuffle.shares`) and sends one to each worker: party ``i`` (its index
in the parameters) sends the seed to worker ``i mod 2`` and the vector to the other, so the
two workers receive about equal volumes. No noise is added here and no budget is spent: the
workers add the noise once, for every party together. The shares must reach the workers only:
together they are the party's exact registers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq._validate import message
from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.registers import LogSpec, check_log_spec, register_frequencies
from dpfreq.crossparty.shuffle.params import (
    EXAMPLE_ONE_PARTY,
    EXAMPLE_TWO_PARTIES,
    ShuffleParams,
)
from dpfreq.crossparty.shuffle.shares import (
    SEED_BYTES,
    Frame,
    decode_frame,
    encode_frame,
    expand_mask,
    split_vector,
)
from dpfreq.crossparty.vid import vid_hash
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["PARTY_KIND", "PartyShares", "coverage_spec", "party_mask_label", "read_party_share",
           "share_log", "share_registers", "share_values", "share_words"]

PARTY_KIND = "party-share"
_FUNC = "share_log"


def party_mask_label(param_id: str, party: str, share_id: str) -> str:
    """The label of a party's mask (:func:`~dpfreq.crossparty.shuffle.shares.expand_mask`).

    Examples
    --------
    >>> party_mask_label("ab", "tv", "cd")
    'party|ab|tv|cd'
    """
    return f"party|{param_id}|{party}|{share_id}"


@fill_doc(two_parties=EXAMPLE_TWO_PARTIES)
@dataclass(frozen=True, repr=False)
class PartyShares:
    """One party's two shares of its register frequencies (secret: together they are the
    exact registers).

    Attributes
    ----------
    params : ShuffleParams
    party : str
    share_id : str
        32 hex digits drawn with the shares: both workers must hold the same upload.
    seed : bytes
        The seed share (32 bytes).
    vector : numpy.ndarray of uint32
        The vector share, ``R`` words.
    seeded : bool
        Whether the shares came from a seed (tests only).

    Examples
    --------
    [[two_parties]]
    >>> s = share_registers(np.array([0, 1, 3, 0, 0, 2, 0, 1]), params=params, party="web",
    ...                     rng=1)
    >>> s.seed_worker, len(s.frame(0)) > len(s.frame(1))
    (1, True)
    """

    params: ShuffleParams
    party: str
    share_id: str
    seed: bytes
    vector: NDArray[np.uint32]
    seeded: bool

    def __repr__(self) -> str:
        return (f"PartyShares(party={self.party!r}, measurement={self.params.measurement!r}, "
                f"registers={self.params.registers}, share_id={self.share_id!r})")

    @property
    def seed_worker(self) -> int:
        """The worker (0 or 1) that receives the seed share: the party's index mod 2."""
        return self.params.party_index(self.party) % 2

    def frame(self, position: int) -> bytes:
        """The message for worker ``position``: its share, framed with the public header."""
        form = "seed" if position == self.seed_worker else "vector"
        payload = self.seed if form == "seed" else self.vector.astype("<u4").tobytes()
        return encode_frame({"kind": PARTY_KIND, "measurement": self.params.measurement,
                             "param_id": self.params.param_id, "party": self.party,
                             "share_id": self.share_id, "form": form,
                             "registers": self.params.registers}, payload)


@fill_doc(one_party=EXAMPLE_ONE_PARTY)
@public_errors("share_values")
def share_values(values: NDArray[Any], *, params: ShuffleParams, party: str,
                 rng: RNGLike = None) -> PartyShares:
    """Split checked register frequencies (``R`` values in ``0..K``) into two shares.

    Draws the share id, then the seed; the vector share is the values minus the seed's mask.

    Examples
    --------
    [[one_party]]
    >>> share_values(np.array([0, 1, 2, 0]), params=params, party="tv", rng=3).vector.dtype
    dtype('uint32')
    """
    params.party_index(party)
    x = np.asarray(values)
    if x.shape != (params.registers,) or x.dtype.kind not in "iu" or (
            x.size and (int(x.min()) < 0 or int(x.max()) > params.max_frequency)):
        raise ParameterError(message("values", f"{params.registers} integers in "
                                     f"0..{params.max_frequency}", x))
    resolved = resolve_rng(rng)
    gen = resolved.generator
    share_id = gen.bytes(16).hex()
    seed = gen.bytes(SEED_BYTES)
    label = party_mask_label(params.param_id, party, share_id)
    return PartyShares(params=params, party=party, share_id=share_id, seed=seed,
                       vector=split_vector(x, seed, label), seeded=resolved.seeded)


@fill_doc(one_party=EXAMPLE_ONE_PARTY)
@public_errors("share_registers")
def share_registers(values: NDArray[Any], *, params: ShuffleParams, party: str,
                    rng: RNGLike = None) -> PartyShares:
    """The shares of register frequencies a party already holds (see :func:`share_log`).

    Examples
    --------
    [[one_party]]
    >>> share_registers(np.array([0, 1, 2, 0]), params=params, party="tv", rng=3).party
    'tv'
    """
    return share_values(values, params=params, party=party, rng=rng)


@public_errors(_FUNC)
def share_log(source: Any, *, user: str, party: str, params: ShuffleParams, key: bytes,
              time: str | None = None, campaign: str | None = None, engine: Any = None,
              rng: RNGLike = None) -> PartyShares:
    """One party's shares of its impression log for a shuffled measurement.

    Only the rows of the parameters' coverage count (``params.coverage``: the measurement
    period and the campaigns), filtered exactly as :func:`dpfreq.crossparty.build_sketch`
    filters them: the parameters fix them for every party, so the workers never sum shares
    of different periods or campaigns.

    Parameters
    ----------
    source : mapping, path, SQL, DataFrame, DuckDB relation or Spark DataFrame
        The party's impression log, one row per impression.
    user, engine
        As in :func:`dpfreq.crossparty.build_sketch`.
    time : str or None
        This party's time column: required when the coverage has a period, None when it
        has none.
    campaign : str or None
        This party's campaign column: required when the coverage lists campaigns, None when
        it lists none.
    party : str
        This party's name: one of ``params.parties``.
    params : ShuffleParams
        The measurement's public parameters.
    key : bytes
        The parties' shared hash key (its fingerprint must be ``params.key_id``).
    rng : None, int or numpy.random.Generator, keyword-only
        Source of the shares' randomness; None is the secure default (a seed is for tests).

    Returns
    -------
    PartyShares
        Send :meth:`PartyShares.frame` ``(0)`` to worker 0 and ``(1)`` to worker 1.

    Raises
    ------
    ParameterError
        A parameter breaks its rule, the party is not one of the measurement's, the key is
        not the one the parameters name, ``time`` or ``campaign`` is given without a period
        or campaign list in the coverage (or missing with one).
    DataError
        The log cannot be read or holds values of the wrong type.

    Notes
    -----
    **Privacy.** Nothing is released here: each share alone is uniformly distributed, and
    the noise is added by the workers (:mod:`dpfreq.crossparty.shuffle.dummies`). The two
    shares together are the party's exact registers: send each to its worker only.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage, key_fingerprint
    >>> key = bytes(32)
    >>> params = ShuffleParams(
    ...     measurement="m", registers=64, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
    ...     per_party=False, coverage=Coverage(period=(0, 7), period_unit="integer"),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id=key_fingerprint(key))
    >>> shares = share_log({"u": [1, 1, 2, 7], "day": [0, 3, 6, 7]}, user="u", time="day",
    ...                    party="tv", params=params, key=key, rng=0)
    >>> a, b = (share_words(read_party_share(shares.frame(i), params), params) for i in (0, 1))
    >>> int((a + b).sum())  # user 7's impression on day 7 is outside the period
    3
    """
    if not isinstance(params, ShuffleParams):
        raise ParameterError(message("params", "a ShuffleParams", type(params).__name__))
    params.party_index(party)
    spec = coverage_spec(params.coverage, user=user, time=time, campaign=campaign)
    space = params.register_space()
    vid_hash(key, space)
    counts = register_frequencies(source, spec=spec, params=space, key=bytes(key),
                                  engine=engine)
    return share_values(counts.values, params=params, party=party, rng=rng)


def coverage_spec(coverage: Coverage, *, user: Any, time: Any, campaign: Any) -> LogSpec:
    """The rows of a log that ``coverage`` counts, in a party's columns (``time`` and
    ``campaign`` are its own column names: given exactly when the coverage has a period or
    a campaign list), checked as :func:`dpfreq.crossparty.build_sketch` checks them.

    Examples
    --------
    >>> coverage_spec(Coverage(campaigns=("x",)), user="u", time=None, campaign="c")
    LogSpec(user='u', time=None, period=None, campaign='c', campaigns=('x',), \
period_unit=None)
    """
    covers = f"the parameters' coverage is {coverage.describe()}"
    for name, column, needed in (("time", time, coverage.period is not None),
                                 ("campaign", campaign, coverage.campaigns is not None)):
        if (column is not None) != needed:
            rule = f"this party's {name} column" if needed else "None"
            raise ParameterError(message(name, f"{rule} ({covers})", column))
    return check_log_spec(user=user, time=time, period=coverage.period, campaign=campaign,
                          campaigns=coverage.campaigns, period_unit=coverage.period_unit)


@fill_doc(one_party=EXAMPLE_ONE_PARTY)
def read_party_share(data: bytes, params: ShuffleParams, *, party: str | None = None,
                     label: str = "the share") -> Frame:
    """Check a party's share message against the parameters (and the sending party).

    Raises
    ------
    DataError
        Malformed frame, another measurement or parameters, an unknown or other party, a
        form or size that is not the parameters'.

    Examples
    --------
    [[one_party]]
    >>> s = share_values(np.array([0, 1, 2, 0]), params=params, party="tv", rng=3)
    >>> read_party_share(s.frame(0), params, party="tv").header["form"]
    'seed'
    """
    frame = decode_frame(data, kinds=(PARTY_KIND,), label=label)
    h = frame.header
    fields = {"kind", "measurement", "param_id", "party", "share_id", "form", "registers",
              "sha256"}

    def bad(reason: str) -> DataError:
        return DataError(f"{label} is refused: {reason}.")

    if set(h) != fields:
        raise bad("its header has other fields than a party share's")
    if h["measurement"] != params.measurement or h["param_id"] != params.param_id:
        raise bad("it was made for other parameters (param_id differs)")
    if h["party"] not in params.parties or (party is not None and h["party"] != party):
        raise bad("it names another party than the sender's")
    sid = h["share_id"]
    if not isinstance(sid, str) or len(sid) != 32 or any(c not in "0123456789abcdef"
                                                         for c in sid):
        raise bad("its share id is not 32 hex digits")
    size = {"seed": SEED_BYTES, "vector": 4 * params.registers}.get(h["form"])
    if size is None or h["registers"] != params.registers or len(frame.payload) != size:
        raise bad(f"it is not a seed of {SEED_BYTES} bytes or a vector of "
                  f"{params.registers} words")
    return frame


@fill_doc(one_party=EXAMPLE_ONE_PARTY)
def share_words(frame: Frame, params: ShuffleParams) -> NDArray[np.uint32]:
    """The ``R`` words a checked party share stands for (a seed expanded to its mask).

    Examples
    --------
    [[one_party]]
    >>> s = share_values(np.array([0, 1, 2, 0]), params=params, party="tv", rng=3)
    >>> a, b = (share_words(read_party_share(s.frame(i), params), params) for i in (0, 1))
    >>> (a + b).tolist()
    [0, 1, 2, 0]
    """
    h = frame.header
    if h["form"] == "seed":
        return expand_mask(frame.payload, params.registers,
                           party_mask_label(params.param_id, h["party"], h["share_id"]))
    return np.frombuffer(frame.payload, dtype="<u4").astype(np.uint32)
