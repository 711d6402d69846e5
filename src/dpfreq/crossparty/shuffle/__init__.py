"""Cross-party reach and frequency with noise added once: the two-worker secret-shared shuffle.

Local noise (:func:`dpfreq.crossparty.build_sketch`) adds up over parties; here the noise is
added once, after the union, inside a protocol in which nobody sees the unnoised union. Three
roles (the services of ``dpfreq serve --role worker|aggregator``; docs/guide/crossparty.md):

* each **party** computes its capped register frequencies, splits them into two additive
  shares modulo ``2^32`` and sends one to each worker (:func:`share_log`); a share alone is
  uniformly random;
* each of the two **workers** sums its shares, adds its own dummy registers (an exact,
  truncated discrete Laplace number per value: :mod:`~dpfreq.crossparty.shuffle.dummies`),
  secret-shared with the other worker, permutes everything with a permutation only the two
  workers can compute, and sends its output to the aggregator;
* the **aggregator** adds the two outputs: it learns the shuffled multiset of register
  values, i.e. a noisy histogram, and estimates the deduplicated reach, the k+ reach and the
  frequency distribution with intervals (:func:`release_from_histograms`).

The trust model (honest majority: no two of the three roles collude) and the proofs are in
docs/theory/crossparty.md; :func:`simulate_shuffle`, :func:`run_protocol` and :func:`run_shares` run
everything in one process.
"""

from dpfreq.crossparty.shuffle.aggregate import reconstruct_histogram
from dpfreq.crossparty.shuffle.dummies import DummyLaw, calibrate_dummies, sample_dummies
from dpfreq.crossparty.shuffle.estimate import dummy_law, release_from_histograms
from dpfreq.crossparty.shuffle.params import ShuffleParams
from dpfreq.crossparty.shuffle.party import PartyShares, share_log, share_registers
from dpfreq.crossparty.shuffle.plan import Plan, make_plan
from dpfreq.crossparty.shuffle.result import ShuffleRelease
from dpfreq.crossparty.shuffle.simulate import (
    ProtocolRun,
    run_protocol,
    run_shares,
    simulate_shuffle,
)

__all__ = [
    "DummyLaw",
    "PartyShares",
    "Plan",
    "ProtocolRun",
    "ShuffleParams",
    "ShuffleRelease",
    "calibrate_dummies",
    "dummy_law",
    "make_plan",
    "reconstruct_histogram",
    "release_from_histograms",
    "run_protocol",
    "run_shares",
    "sample_dummies",
    "share_log",
    "share_registers",
    "simulate_shuffle",
]
