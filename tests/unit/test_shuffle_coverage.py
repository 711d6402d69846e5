"""The shuffle's parameters fix what every party counts (the period and the campaigns): a
party's shares count only those rows of its log, exactly as a sketch's build does; shares of
another coverage are refused by the workers; the release states the coverage (deterministic;
seeded draws)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import numpy as np
import pytest

from dpfreq.artifacts import seal_json
from dpfreq.cli.sketch_shuffle import _lines
from dpfreq.crossparty import Coverage, CrossPartyParams, build_sketch, key_fingerprint
from dpfreq.crossparty.shuffle import ShuffleParams, share_log, simulate_shuffle
from dpfreq.crossparty.shuffle.party import read_party_share, share_words
from dpfreq.crossparty.sketch import draw_sketch
from dpfreq.errors import DataError, ParameterError
from dpfreq.rng import resolve_rng

KEY = bytes(range(32))
R, K = 64, 3
#: days 10..19 of campaigns x and z (a party's log spans days 0..29 and campaigns x, y, z)
COVERAGE = Coverage(period=(10, 20), period_unit="integer", campaigns=("z", "x"))


def make_params(coverage: Coverage = COVERAGE, **changes: object) -> ShuffleParams:
    fields: dict[str, object] = {
        "measurement": "m", "registers": R, "sampling_start": 0, "sampling_width": 1,
        "max_frequency": K, "epsilon": 1.0, "delta": 1e-9, "parties": ["tv", "web"],
        "per_party": False, "coverage": coverage, "deadline": "2030-01-01",
        "hash": "sha256-prefix/v1", "key_id": key_fingerprint(KEY)}
    return ShuffleParams(**{**fields, **changes})  # type: ignore[arg-type]


def log(seed: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(seed)
    users = g.integers(0, 300, 2000)
    return {"user": users, "day": g.integers(0, 30, users.size),
            "campaign": g.choice(np.array(["x", "y", "z"]), users.size)}


def exact(shares, params: ShuffleParams) -> np.ndarray:
    """The registers the two shares stand for (what the workers sum)."""
    a, b = (share_words(read_party_share(shares.frame(i), params), params) for i in (0, 1))
    return (a + b).astype(np.int64)


def test_a_share_counts_the_rows_a_build_of_the_same_coverage_counts() -> None:
    """The share of the whole log equals the share of the rows inside the period and
    campaigns alone; a build of the same log with the same --start/--end/--campaigns records
    the same coverage and draws, from the same seed, the sketch of exactly these registers."""
    params = make_params()
    rows = log(1)
    shared = exact(share_log(rows, user="user", time="day", campaign="campaign", party="tv",
                             params=params, key=KEY, rng=0), params)
    inside = ((rows["day"] >= 10) & (rows["day"] < 20)
              & np.isin(rows["campaign"], ["x", "z"]))
    every = make_params(Coverage())
    kept = exact(share_log({"user": rows["user"][inside]}, user="user", party="tv",
                           params=every, key=KEY, rng=0), every)
    assert shared.tolist() == kept.tolist()
    unfiltered = exact(share_log({"user": rows["user"]}, user="user", party="tv",
                                 params=every, key=KEY, rng=0), every)
    assert shared.sum() < unfiltered.sum()  # the events outside do not count

    local = CrossPartyParams(measurement="m", registers=R, sampling_start=0, sampling_width=1,
                             max_frequency=K, epsilon_reach=1.0, epsilon_frequency=1.0,
                             hash="sha256-prefix/v1", key_id=key_fingerprint(KEY))
    built = build_sketch(rows, user="user", party="tv", params=local, key=KEY, time="day",
                         period=(10, 20), campaign="campaign", campaigns=["x", "z"], rng=7)
    assert built.coverage == params.coverage
    drawn = draw_sketch(shared, params=local, party="tv", rng=resolve_rng(7),
                        engine=built.engine, coverage=params.coverage)
    assert drawn.reach_bits.tobytes() == built.reach_bits.tobytes()
    assert drawn.frequency is not None
    assert built.frequency is not None
    assert drawn.frequency.tobytes() == built.frequency.tobytes()


def test_a_period_of_timestamps_is_applied_to_a_timestamp_column() -> None:
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    us = int((start - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).total_seconds()) * 10**6
    params = make_params(Coverage(period=(us, us + 86_400 * 10**6),
                                  period_unit="microseconds"))
    when = np.array(["2026-02-28T23:59:59", "2026-03-01T00:00:00", "2026-03-01T23:59:59",
                     "2026-03-02T00:00:00"], dtype="datetime64[us]")
    shared = exact(share_log({"user": np.array([1, 2, 2, 3]), "t": when}, user="user",
                             time="t", party="web", params=params, key=KEY, rng=0), params)
    assert int(shared.sum()) == 2  # user 2's two impressions of March 1st


@pytest.mark.parametrize(("coverage", "columns", "words"), [
    (COVERAGE, {"campaign": "campaign"}, "time of share_log must be this party's time column "
     "(the parameters' coverage is period [10, 20) of the time column; campaigns x, z)"),
    (COVERAGE, {"time": "day"}, "campaign of share_log must be this party's campaign column"),
    (Coverage(), {"time": "day"}, "time of share_log must be None (the parameters' coverage "
     "is every row of the log"),
    (Coverage(period=(0, 5), period_unit="integer"), {"time": "day", "campaign": "campaign"},
     "campaign of share_log must be None"),
])
def test_a_party_cannot_choose_its_own_rows(coverage: Coverage, columns: dict[str, str],
                                             words: str) -> None:
    """share_log has no period or campaign list of its own: the columns that would apply the
    parameters' coverage are required with it and refused without it, in one line."""
    with pytest.raises(ParameterError) as info:
        share_log(log(2), user="user", party="tv", params=make_params(coverage), key=KEY,
                  rng=0, **columns)  # type: ignore[arg-type]
    assert str(info.value).startswith(words)
    assert "\n" not in str(info.value)
    with pytest.raises(TypeError):
        share_log(log(2), user="user", party="tv", params=make_params(), key=KEY,
                  time="day", campaign="campaign", period=(0, 30))  # type: ignore[call-arg]


@pytest.mark.parametrize("other", [
    Coverage(period=(10, 21), period_unit="integer", campaigns=("x", "z")),
    Coverage(period=(10, 20), period_unit="microseconds", campaigns=("x", "z")),
    Coverage(period=(10, 20), period_unit="integer", campaigns=("x",)),
    Coverage(period=(10, 20), period_unit="integer"),
    Coverage(),
])
def test_shares_of_another_coverage_are_refused_by_the_workers(other: Coverage) -> None:
    """The coverage is in the sealed parameters, so in the digest every share names: a worker
    holding the measurement's parameters refuses a share made under another coverage."""
    params = make_params()
    mine = dataclasses.replace(params, coverage=other)
    assert mine.param_id != params.param_id
    days = (np.array([10, 11], dtype="datetime64[us]")  # a time column of its period's kind
            if other.period_unit == "microseconds" else [10, 11])
    shares = share_log({"user": [1, 2], "day": days, "campaign": ["x", "x"]},
                       user="user", time="day" if other.period else None,
                       campaign="campaign" if other.campaigns else None, party="tv",
                       params=mine, key=KEY, rng=0)
    for position in (0, 1):
        with pytest.raises(DataError, match="made for other parameters"):
            read_party_share(shares.frame(position), params, party="tv")


def test_the_parameters_file_holds_the_coverage_and_an_old_one_is_refused(tmp_path) -> None:
    params = make_params()
    assert ShuffleParams.load(params.save(tmp_path / "p.json")) == params
    assert json.loads(params.to_json())["payload"]["coverage"] == {
        "period": [10, 20], "period_unit": "integer", "campaigns": ["x", "z"]}
    old = {k: v for k, v in params.to_dict().items() if k != "coverage"}
    (tmp_path / "old.json").write_text(seal_json(old, kind=ShuffleParams.KIND, version=1,
                                                 sign=False), encoding="utf-8")
    with pytest.raises(DataError) as info:
        ShuffleParams.load(tmp_path / "old.json")
    text = str(info.value)
    assert text.startswith(f"{tmp_path / 'old.json'} are not valid shuffle parameters")
    assert "(missing coverage: write the file again with this dpfreq)" in text
    assert "\n" not in text
    bad = {**params.to_dict(), "coverage": {"period": [20, 10], "period_unit": "integer",
                                            "campaigns": None}}
    with pytest.raises(DataError, match="not valid shuffle parameters: period of"):
        ShuffleParams.from_dict(bad)


def test_the_release_states_the_coverage() -> None:
    params = make_params(Coverage(period=(0, 28), period_unit="integer"))
    regs = np.random.default_rng(3).poisson(0.3, (2, R)).clip(0, K)
    rel = simulate_shuffle(regs, params=params, confidence=0.9, rng=1)
    doc = json.loads(rel.to_json())
    assert doc["mechanism_params"]["coverage"] == {"period": [0, 28], "period_unit": "integer",
                                                   "campaigns": None}
    assert doc["mechanism_params"]["params"]["coverage"] == doc["mechanism_params"]["coverage"]
    assert "  covers      period [0, 28) of the time column\n" in str(rel)
    assert _lines(doc)[1] == "# measurement 'm' covering period [0, 28) of the time column"
