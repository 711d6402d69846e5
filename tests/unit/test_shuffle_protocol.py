"""The shuffle protocol in one process: parameters, shares, worker outputs, reconstruction,
the aggregator's checks and the release (deterministic; seeded draws)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpfreq.crossparty import Coverage
from dpfreq.crossparty.shuffle import (
    ShuffleParams,
    dummy_law,
    make_plan,
    reconstruct_histogram,
    release_from_histograms,
    run_protocol,
    run_shares,
    share_registers,
    simulate_shuffle,
)
from dpfreq.crossparty.shuffle.aggregate import output_frame, read_output
from dpfreq.crossparty.shuffle.party import read_party_share, share_words
from dpfreq.crossparty.shuffle.plan import Plan
from dpfreq.crossparty.shuffle.shares import decode_frame, encode_frame, expand_mask
from dpfreq.crossparty.shuffle.worker import PeerDraws, shared_order, worker_output
from dpfreq.errors import DataError, ParameterError


def make_params(**changes: object) -> ShuffleParams:
    fields = {"measurement": "m", "registers": 1024, "sampling_start": 0, "sampling_width": 1,
              "max_frequency": 3, "epsilon": math.log(3), "delta": 1e-9,
              "parties": ["tv", "web", "app"], "per_party": False, "coverage": Coverage(),
              "deadline": "2030-01-01T00:00:00Z", "hash": "sha256-prefix/v1",
              "key_id": "0" * 32}
    return ShuffleParams(**{**fields, **changes})  # type: ignore[arg-type]


def registers(params: ShuffleParams, rng: np.random.Generator) -> np.ndarray:
    return rng.poisson(0.4, (len(params.parties), params.registers)).clip(
        0, params.max_frequency)


# -- parameters ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "words"), [
    ("measurement", "Spring Campaign", "measurement of ShuffleParams must be an id"),
    ("delta", 0.0, "delta of ShuffleParams must be a number in (0, 1e-3]"),
    ("delta", 0.01, "delta of ShuffleParams must be a number in [0, 1e-3]"),
    ("epsilon", -1.0, "epsilon of ShuffleParams"),
    ("parties", ["tv", "tv"], "parties of ShuffleParams must be a list of 1 to 1000 distinct"),
    ("parties", [], "parties of ShuffleParams"),
    ("per_party", 1, "per_party of ShuffleParams must be True or False"),
    ("deadline", "next week", "deadline of ShuffleParams must be an ISO date"),
    ("registers", 0, "registers of ShuffleParams must be an integer >= 1"),
    ("hash", "md5", "hash of ShuffleParams"),
    ("coverage", None, "coverage of ShuffleParams must be a Coverage (the period and "
     "campaigns every party counts; Coverage(): every row); got 'NoneType'."),
    ("coverage", {"period": None, "period_unit": None, "campaigns": None},
     "coverage of ShuffleParams must be a Coverage"),
])
def test_parameters_refuse_in_one_line(field: str, value: object, words: str) -> None:
    with pytest.raises(ParameterError) as info:
        make_params(**{field: value})
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_parameters_round_trip_and_name_their_digest(tmp_path) -> None:
    params = make_params(per_party=True, deadline="2030-01-01T01:00:00+01:00")
    assert params.deadline == "2030-01-01T00:00:00+00:00"
    assert ShuffleParams.load(params.save(tmp_path / "p.json")) == params
    assert params.histograms == 4
    eps, delta = params.histogram_budget
    assert float(eps * 4) == math.log(3)
    assert float(delta * 4) == 1e-9
    other = make_params(deadline="2030-01-02")
    assert other.param_id != params.param_id
    edited = params.to_json().replace('"per_party": true', '"per_party": false')
    with pytest.raises(DataError, match="checksum"):
        ShuffleParams.from_json(edited)


# -- shares -------------------------------------------------------------------------------------
def test_shares_reconstruct_the_registers_and_frames_are_checked(rng) -> None:
    params = make_params()
    x = registers(params, rng)[1]
    shares = share_registers(x, params=params, party="web", rng=rng)
    assert shares.seed_worker == 1  # party 1 sends its seed to worker 1
    frames = [read_party_share(shares.frame(w), params, party="web") for w in (0, 1)]
    assert [f.header["form"] for f in frames] == ["vector", "seed"]
    total = share_words(frames[0], params) + share_words(frames[1], params)
    assert np.array_equal(total, x)
    with pytest.raises(DataError, match="names another party"):
        read_party_share(shares.frame(0), params, party="tv")
    with pytest.raises(DataError, match="other parameters"):
        read_party_share(shares.frame(0), make_params(deadline="2031-01-01"))
    data = bytearray(shares.frame(0))
    data[-1] ^= 1
    with pytest.raises(DataError, match="checksum"):
        read_party_share(bytes(data), params)
    short = encode_frame({**frames[0].header, "kind": "party-share"}, frames[0].payload[:-4])
    with pytest.raises(DataError, match="not a seed of 32 bytes or a vector"):
        read_party_share(short, params)
    for junk in (b"", b"DPFQSHF1\xff\xff\xff\xff", b"DPFQSHF1\x00\x00\x00\x02{}" + b"x"):
        with pytest.raises(DataError, match="not a dpfreq shuffle frame"):
            decode_frame(junk, kinds=("party-share",))
    with pytest.raises(ParameterError, match="values of share_registers"):
        share_registers(x + 4, params=params, party="web", rng=1)
    with pytest.raises(ParameterError, match="party of share_registers"):
        share_registers(x, params=params, party="radio", rng=1)


def test_mask_is_the_same_bytes_everywhere() -> None:
    """The keystream is AES's: pinned here, so both workers and parties agree across machines
    and numpy versions (golden values of AES-256-CTR under the derived key)."""
    assert expand_mask(bytes(32), 3, "golden").tolist() == expand_mask(
        bytes(32), 5, "golden")[:3].tolist()
    assert expand_mask(bytes(32), 3, "golden").tolist() != expand_mask(
        bytes(32), 3, "other").tolist()
    order = shared_order(bytes(32), bytes(range(32)), "label", 1000)
    assert sorted(order.tolist()) == list(range(1000))
    assert not np.array_equal(order, np.arange(1000))
    assert np.array_equal(order, shared_order(bytes(32), bytes(range(32)), "label", 1000))
    assert not np.array_equal(order, shared_order(bytes(range(32)), bytes(32), "label", 1000))


# -- the protocol -------------------------------------------------------------------------------
@pytest.mark.parametrize("per_party", [False, True])
def test_histograms_are_the_registers_plus_both_workers_dummies(rng, per_party) -> None:
    params = make_params(per_party=per_party)
    x = registers(params, rng)
    run = run_protocol(x, params=params, confidence=0.95, rng=rng)
    rel = run.release
    assert len(rel.histograms) == params.histograms
    entities = params.entities()
    for i, hist in enumerate(rel.histograms):
        V = params.max_frequency * len(entities[i])
        truth = np.bincount(x[list(entities[i])].sum(axis=0), minlength=V + 1)
        dummies = run.draws[0].dummies[i] + run.draws[1].dummies[i]
        assert np.array_equal(hist, truth + dummies)
    # the release is a function of the histograms alone: the same bits again
    again = release_from_histograms(rel.histograms, params=params,
                                    plan=make_plan(params, *[dict.fromkeys(params.parties,
                                                                           "0" * 32)] * 2),
                                    confidence=0.95, seeded=True)
    assert np.array_equal(again.value, rel.value)
    assert np.array_equal(again.frequency, rel.frequency, equal_nan=True)
    if per_party:
        assert np.all(rel.value[0] >= rel.party_kplus_reach[:, 0])
        assert rel.value[0] <= rel.party_kplus_reach[:, 0].sum() + 1e-9


def test_aggregator_inbox_holds_uniform_looking_words_whose_sums_are_the_histogram(rng):
    params = make_params(registers=4096)
    x = registers(params, rng)
    run = run_protocol(x, params=params, confidence=0.95, rng=rng)
    frames = [read_output(m, params) for m in run.aggregator_inbox]
    assert [f.header["position"] for f in frames] == [0, 1]
    public = {"kind", "measurement", "param_id", "position", "entity", "plan", "values",
              "length", "sha256"}
    for f in frames:
        assert set(f.header) == public
        included = f.header["plan"]["included"]
        assert [p for p, _ in included] == list(params.parties)
        assert all(len(sid) == 32 and int(sid, 16) >= 0 for _, sid in included)
    a, b = (np.frombuffer(f.payload, dtype="<u4") for f in frames)
    y = a + b
    assert np.array_equal(np.bincount(y, minlength=10), run.release.histograms[0])
    # the registers are not where they were: the first R words are not the union's registers
    assert not np.array_equal(y[: params.registers], x.sum(axis=0))


def test_simulation_equals_the_protocol_on_the_same_draws(rng) -> None:
    """simulate_shuffle skips shares and permutation: same histograms for the same dummies."""
    params = make_params(per_party=True)
    x = registers(params, rng)
    sim = simulate_shuffle(x, params=params, confidence=0.9, rng=5)
    law = dummy_law(params)
    for i, hist in enumerate(sim.histograms):
        V = params.max_frequency * len(params.entities()[i])
        truth = np.bincount(x[list(params.entities()[i])].sum(axis=0), minlength=V + 1)
        noise = hist - truth
        assert noise.min() >= 0
        assert noise.max() <= 4 * law.shift


def _tampered(params, run, change):
    frames = [read_output(m, params) for m in run.aggregator_inbox]
    words = [np.frombuffer(f.payload, dtype="<u4").copy() for f in frames]
    change(words[1])
    return [output_frame(w.astype(np.uint32), params=params, plan=Plan.from_dict(
        f.header["plan"], params), position=f.header["position"], entity=0)
        for w, f in zip(words, frames, strict=True)]


@pytest.mark.parametrize("change", [
    lambda w: w.__setitem__(5, w[5] + 1000),             # a worker shifts one word
    lambda w: w.__setitem__(slice(0, 2), w[1::-1]),      # a worker swaps two words
    lambda w: w.__setitem__(slice(None), np.roll(w, 1)),  # another permutation
], ids=["shifted", "swapped", "rolled"])
def test_a_deviating_worker_is_detected_and_nothing_released(rng, change) -> None:
    params = make_params(registers=2048)
    run = run_protocol(registers(params, rng), params=params, confidence=0.95, rng=rng)
    a, b = (np.frombuffer(read_output(m, params).payload, dtype="<u4")
            for m in _tampered(params, run, change))
    with pytest.raises(DataError, match=r"do not reconstruct register values in 0\.\.9: a "
                                        r"worker or a party deviated"):
        reconstruct_histogram(a, b, 9)


def test_a_party_out_of_range_is_detected(rng) -> None:
    """A party that shares a value above K: the aggregator refuses to release."""
    params = make_params(registers=256, parties=["tv"])
    shares = share_registers(np.zeros(256, dtype=np.int64), params=params, party="tv", rng=rng)
    bad = shares.vector.copy()
    bad[7:8] += np.uint32(2**31)  # the party's share of register 7 stands for a huge value
    words = [bad, expand_mask(shares.seed, 256, f"party|{params.param_id}|tv|"
                                                f"{shares.share_id}")]
    with pytest.raises(DataError, match="deviated"):
        reconstruct_histogram(words[0], words[1], params.max_frequency)


@pytest.mark.parametrize("lazy", [0, 1])
def test_a_worker_without_dummies_still_gives_a_release(rng, lazy) -> None:
    """Corrupt worker that adds no dummies: the other worker's alone (the guarantee's case,
    enumerated in tests/audit/test_shuffle_privacy.py) reconstruct and estimate; the histogram
    is the registers plus the honest worker's dummies."""
    params = make_params()
    x = registers(params, rng)
    noise = (lazy != 0, lazy != 1)
    run = run_protocol(x, params=params, confidence=0.95, rng=rng, worker_noise=noise)
    truth = np.bincount(x.sum(axis=0), minlength=10)
    assert np.array_equal(run.release.histograms[0] - truth, run.draws[1 - lazy].dummies[0])
    assert not run.draws[lazy].dummies[0].any()


@pytest.mark.parametrize("corrupt", [0, 1])
def test_a_corrupt_workers_view_does_not_depend_on_the_registers(corrupt) -> None:
    """Corrupt worker: what it receives — one share of each party and the other worker's
    public draws — for two unrelated data sets under the same randomness. Seeds and draws are
    the same bytes (they never depend on the data); the vector shares differ, and each is
    uniform alone (tests/statistical/test_shuffle_statistical.py)."""
    params = make_params()
    views = []
    for data_seed in (1, 2):
        x = registers(params, np.random.default_rng(data_seed))
        shares = [share_registers(x[i], params=params, party=p, rng=100 + i)
                  for i, p in enumerate(params.parties)]
        run = run_shares(shares, confidence=0.95, rng=7)
        frames = [read_party_share(s.frame(corrupt), params) for s in shares]
        seeds = [f.payload for f in frames if f.header["form"] == "seed"]
        vectors = [f.payload for f in frames if f.header["form"] == "vector"]
        views.append((seeds, vectors, run.draws[1 - corrupt].public()))
    (seeds1, vec1, peer1), (seeds2, vec2, peer2) = views
    assert seeds1 == seeds2
    assert peer1 == peer2
    assert len(vec1) == len(vec2) >= 1
    assert vec1 != vec2  # masked registers: different bytes, the same (uniform) law


def test_plan_reasons_and_checks() -> None:
    params = make_params(per_party=True)
    plan = make_plan(params, {"tv": "a" * 32, "web": "b" * 32},
                     {"tv": "a" * 32, "web": "c" * 32, "app": "d" * 32})
    assert plan.included == (("tv", "a" * 32),)
    assert plan.missing == (("web", "mismatch"), ("app", "one"))
    assert plan.entities == ((0, (0,)), (1, (0,)))
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict())), params) == plan
    forged = plan.to_dict()
    forged["entities"] = [[0, [0, 1]]]
    with pytest.raises(DataError, match="does not fit"):
        Plan.from_dict(forged, params)
    nobody = make_plan(params, {}, {})
    with pytest.raises(DataError, match="no party is measured"):
        release_from_histograms([], params=params, plan=nobody, confidence=0.9)


def test_peer_draws_are_checked(rng) -> None:
    from dpfreq.crossparty.shuffle.worker import draw_worker

    draws = draw_worker(dummy_law(make_params()), [3], position=0, rng=rng)
    public = draws.public()
    assert "counts" not in public  # the other worker never learns the counts per value
    assert public["dummies"][0]["count"] == int(draws.dummies[0].sum())
    for bad in ({**public, "secret": "00"}, {**public, "dummies": []}, {"x": 1}):
        with pytest.raises(DataError, match="malformed"):
            PeerDraws.from_public(bad, entities=1)
    peer = PeerDraws.from_public(public, entities=1)
    out = worker_output(np.zeros(8, dtype=np.uint32), own=draw_worker(
        dummy_law(make_params()), [3], position=1, rng=rng), peer=peer, entity=0, index=0,
        param_id="p")
    assert out.dtype == np.uint32
    assert out.size > 8


def test_noise_free_estimates_recover_a_compound_poisson_union() -> None:
    """With the offsets and no noise around them, the estimators see the exact classes:
    reach and frequency match the compound Poisson law they invert (exact expectation)."""
    params = make_params(registers=100_000, parties=["tv"], max_frequency=4)
    law = dummy_law(params)
    lam, g = 0.3, np.array([0.5, 0.3, 0.2])  # users per register; frequency 1, 2, 3
    p = np.zeros(5)
    p[0] = math.exp(-lam)
    for t in range(1, 4):  # Panjer's recursion
        p[t] = lam / t * sum(j * g[j - 1] * p[t - j] for j in range(1, t + 1))
    p[4] = 1 - p[:4].sum()
    hist = p * params.registers + 2 * law.shift
    plan = make_plan(params, {"tv": "a" * 32}, {"tv": "a" * 32})
    # the histogram must be integers: scale the registers so that it is exact enough
    rel = release_from_histograms([np.rint(hist).astype(np.int64)], params=params, plan=plan,
                                  confidence=0.95)
    assert rel.reach == pytest.approx(lam * params.registers, rel=2e-4)
    assert rel.frequency[:3] == pytest.approx(g, abs=2e-3)
