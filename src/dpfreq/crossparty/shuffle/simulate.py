"""The whole protocol in one process: for simulations, tests and the evaluation harness.

:func:`run_protocol` (and :func:`run_shares`, from the parties' shares) plays every role
with the same functions the services run — each party splits its registers
(:mod:`~dpfreq.crossparty.shuffle.party`), each worker sums its shares, draws its dummies and
permutes (:mod:`~dpfreq.crossparty.shuffle.worker`), the aggregator reconstructs the
histograms (:mod:`~dpfreq.crossparty.shuffle.aggregate`) and estimates
(:mod:`~dpfreq.crossparty.shuffle.estimate`) — and returns the messages the aggregator
received beside the release. :func:`simulate_shuffle` skips the shares and the permutation,
which do not change the histograms: it adds each worker's dummies to the exact histogram of
the summed registers, drawn exactly as a worker draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.crossparty.shuffle.aggregate import output_frame, read_output, reconstruct_histogram
from dpfreq.crossparty.shuffle.estimate import dummy_law, release_from_histograms
from dpfreq.crossparty.shuffle.params import ShuffleParams
from dpfreq.crossparty.shuffle.party import (
    PartyShares,
    read_party_share,
    share_values,
    share_words,
)
from dpfreq.crossparty.shuffle.plan import Plan, make_plan
from dpfreq.crossparty.shuffle.result import ShuffleRelease
from dpfreq.crossparty.shuffle.worker import (
    PeerDraws,
    WorkerDraws,
    draw_worker,
    sum_shares,
    worker_output,
)
from dpfreq.errors import ParameterError, public_errors
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["ProtocolRun", "run_protocol", "run_shares", "simulate_shuffle"]


def _registers(registers: Any, params: ShuffleParams) -> NDArray[np.int64]:
    x = np.asarray(registers)
    shape = (len(params.parties), params.registers)
    if x.shape != shape or x.dtype.kind not in "iu" or (
            x.size and (x.min() < 0 or x.max() > params.max_frequency)):
        raise ParameterError(message("registers", f"an integer array of shape {shape} "
                                     f"with values in 0..{params.max_frequency}", x))
    return x.astype(np.int64)


def _check_noise(noise: Any) -> tuple[bool, bool]:
    """``worker_noise``: two bools, at least one True (the release states the guarantee that
    one worker's dummies give; with none it would state a guarantee it does not have)."""
    if (not isinstance(noise, tuple | list) or len(noise) != 2
            or not all(isinstance(b, bool) for b in noise) or not any(noise)):
        raise ParameterError(message("worker_noise", "a pair of bools with at least one True "
                                     "(the guarantee needs one worker's dummies)", noise))
    return bool(noise[0]), bool(noise[1])


def _draws(params: ShuffleParams, plan: Plan, gen: np.random.Generator,
           noise: tuple[bool, bool]) -> list[WorkerDraws]:
    law, values = dummy_law(params), plan.values(params)
    out = []
    for position in (0, 1):
        draws = draw_worker(law, values, position=position, rng=gen)
        if not noise[position]:  # a worker that adds no dummies (tests of the guarantee)
            draws = WorkerDraws(position=position, secret=draws.secret,
                                dummies=tuple(np.zeros_like(d) for d in draws.dummies),
                                masks=draws.masks)
        out.append(draws)
    return out


@public_errors("simulate_shuffle")
def simulate_shuffle(registers: Any, *, params: ShuffleParams, confidence: float,
                     rng: RNGLike = None, worker_noise: tuple[bool, bool] = (True, True)
                     ) -> ShuffleRelease:
    """The release of a shuffled measurement of every party's exact registers (simulation).

    Parameters
    ----------
    registers : array of int, shape ``(P, R)``
        Each declared party's capped register frequencies (values ``0..K``).
    params : ShuffleParams
    confidence : float
        Confidence level of the intervals.
    rng : None, int or numpy.random.Generator, keyword-only
        Source of both workers' draws (a seed for reproducible simulations).
    worker_noise : (bool, bool)
        Whether each worker adds its dummies (tests: the guarantee holds with one).

    Returns
    -------
    ShuffleRelease

    Notes
    -----
    **Privacy.** As the protocol's release: ``(params.epsilon, params.delta)`` for one user
    with all their impressions at every party, with either worker's dummies alone.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=2048, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["a", "b"], per_party=True,
    ...     coverage=Coverage(),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    >>> regs = np.random.default_rng(0).poisson(0.3, (2, 2048)).clip(0, 3)
    >>> rel = simulate_shuffle(regs, params=params, confidence=0.95, rng=4)
    >>> rel.party_kplus_reach.shape, bool(rel.reach >= rel.party_kplus_reach[:, 0].max())
    ((2, 3), True)
    """
    x = _registers(registers, params)
    _check_noise(worker_noise)
    resolved = resolve_rng(rng)
    everyone = dict.fromkeys(params.parties, "0" * 32)
    plan = make_plan(params, everyone, everyone)
    draws = _draws(params, plan, resolved.generator, worker_noise)
    hists = []
    for i, (_, parties) in enumerate(plan.entities):
        V = params.max_frequency * len(parties)
        h = np.bincount(x[list(parties)].sum(axis=0), minlength=V + 1).astype(np.int64)
        hists.append(h + draws[0].dummies[i] + draws[1].dummies[i])
    return release_from_histograms(hists, params=params, plan=plan, confidence=confidence,
                                   seeded=resolved.seeded)


@dataclass(frozen=True)
class ProtocolRun:
    """A run of :func:`run_protocol`: the release and every message the aggregator got.

    Attributes
    ----------
    release : ShuffleRelease
    aggregator_inbox : tuple of bytes
        The worker outputs, as sent (frames), in the order received.
    draws : tuple of WorkerDraws
        Both workers' draws (what an offline recomputation of the noise needs).

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=128, sampling_start=0, sampling_width=1,
    ...     max_frequency=2, epsilon=1.0, delta=1e-9, parties=["a"], per_party=False,
    ...     coverage=Coverage(),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    >>> run = run_protocol(np.ones((1, 128), dtype=np.int64), params=params,
    ...                    confidence=0.9, rng=0)
    >>> truth = np.bincount(np.ones(128, dtype=np.int64), minlength=3)
    >>> bool((run.release.histograms[0] - truth == run.draws[0].dummies[0]
    ...       + run.draws[1].dummies[0]).all())
    True
    """

    release: ShuffleRelease
    aggregator_inbox: tuple[bytes, ...]
    draws: tuple[WorkerDraws, ...]


@public_errors("run_protocol")
def run_protocol(registers: Any, *, params: ShuffleParams, confidence: float,
                 rng: RNGLike = None, worker_noise: tuple[bool, bool] = (True, True)
                 ) -> ProtocolRun:
    """Every role of the protocol in this process, from each party's exact registers.

    Each party splits its registers (:func:`~dpfreq.crossparty.shuffle.share_registers`),
    then :func:`run_shares` plays the workers and the aggregator.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=512, sampling_start=0, sampling_width=1,
    ...     max_frequency=2, epsilon=1.0, delta=1e-9, parties=["a", "b"], per_party=False,
    ...     coverage=Coverage(),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    >>> regs = np.random.default_rng(0).poisson(0.3, (2, 512)).clip(0, 2)
    >>> run = run_protocol(regs, params=params, confidence=0.95, rng=2)
    >>> len(run.aggregator_inbox), run.release.parties
    (2, ('a', 'b'))
    """
    x = _registers(registers, params)
    _check_noise(worker_noise)
    resolved = resolve_rng(rng)
    shares = [share_values(x[i], params=params, party=p, rng=resolved.generator)
              for i, p in enumerate(params.parties)]
    return run_shares(shares, confidence=confidence, rng=resolved.generator,
                      worker_noise=worker_noise)


@public_errors("run_shares")
def run_shares(shares: Sequence[PartyShares], *, confidence: float, rng: RNGLike = None,
               worker_noise: tuple[bool, bool] = (True, True)) -> ProtocolRun:
    """The workers and the aggregator in this process, from the parties' shares.

    Each worker reads its share of each party (the frames the parties would send), the plan
    is made from what both hold, each worker draws its dummies and computes its outputs, and
    the aggregator reconstructs the noisy histograms and estimates — with the functions the
    services run (``dpfreq serve --role worker|aggregator``).

    Parameters
    ----------
    shares : list of PartyShares
        One per party that uploads (of one measurement; declared parties without shares are
        missing from the release).
    confidence : float
        Confidence level of the intervals.
    rng : None, int or numpy.random.Generator, keyword-only
        Source of both workers' draws; None is the secure default.
    worker_noise : (bool, bool)
        Whether each worker adds its dummies (tests: the guarantee holds with one).

    Returns
    -------
    ProtocolRun

    Notes
    -----
    **Privacy.** The release is ``(params.epsilon, params.delta)``-DP for one user with all
    their impressions at every party, by either worker's dummies alone.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=256, sampling_start=0, sampling_width=1,
    ...     max_frequency=2, epsilon=1.0, delta=1e-9, parties=["a", "b", "c"],
    ...     per_party=False,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> regs = np.random.default_rng(0).poisson(0.3, (2, 256)).clip(0, 2)
    >>> shares = [share_values(regs[i], params=params, party=p, rng=i)
    ...           for i, p in enumerate(["a", "b"])]
    >>> run_shares(shares, confidence=0.9, rng=1).release.missing
    (('c', 'none'),)
    """
    if not shares or not all(isinstance(s, PartyShares) for s in shares):
        raise ParameterError(message("shares", "a non-empty list of "
                                     "PartyShares", type(shares).__name__))
    params = shares[0].params
    if any(s.params != params for s in shares):
        raise ParameterError(message("shares", "shares of one measurement",
                                     "shares of several"))
    _check_noise(worker_noise)
    resolved = resolve_rng(rng)
    held = [[read_party_share(s.frame(w), params, party=s.party) for s in shares]
            for w in (0, 1)]
    ids = [{f.header["party"]: f.header["share_id"] for f in frames} for frames in held]
    plan = make_plan(params, ids[0], ids[1])
    draws = _draws(params, plan, resolved.generator, worker_noise)
    inbox = []
    for w in (0, 1):
        peer = PeerDraws.from_public(draws[1 - w].public(), entities=len(plan.entities))
        words = {f.header["party"]: share_words(f, params) for f in held[w]}
        for i, (entity, parties) in enumerate(plan.entities):
            combined = sum_shares([words[params.parties[j]] for j in parties],
                                  params.registers)
            out = worker_output(combined, own=draws[w], peer=peer, entity=entity, index=i,
                                param_id=params.param_id)
            inbox.append(output_frame(out, params=params, plan=plan, position=w,
                                      entity=entity))
    frames = [read_output(m, params) for m in inbox]
    hists = []
    for i, V in enumerate(plan.values(params)):
        a, b = frames[i], frames[len(plan.entities) + i]
        hists.append(reconstruct_histogram(np.frombuffer(a.payload, dtype="<u4"),
                                           np.frombuffer(b.payload, dtype="<u4"), V))
    release = release_from_histograms(hists, params=params, plan=plan, confidence=confidence,
                                      seeded=resolved.seeded or any(s.seeded for s in shares))
    return ProtocolRun(release=release, aggregator_inbox=tuple(inbox), draws=tuple(draws))
