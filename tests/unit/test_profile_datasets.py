"""Synthetic impression logs (dpfreq.profile.datasets): shape, determinism, tail, exact profile."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest
from scipy import stats

from dpfreq.errors import DataError, ParameterError
from dpfreq.profile.datasets import (
    DEFAULT_CAMPAIGNS,
    ImpressionLog,
    make_impressions,
    true_profile,
    write_impressions,
)

Z = 5.5  # two-sided normal quantile with tail probability < 1e-7 per assertion


def test_shape_and_columns(seed):
    log = make_impressions(3000, domain_size=10_000, rng=seed)
    rows = len(log)
    assert log.user.shape == log.timestamp.shape == log.campaign.shape == (rows,)
    assert log.user.dtype == np.int64
    assert log.timestamp.dtype == np.dtype("datetime64[us]")
    assert log.domain_size == 10_000
    assert log.campaigns == DEFAULT_CAMPAIGNS
    assert np.unique(log.user).size == 3000  # exactly n_users distinct users are reached
    assert log.user.min() >= 0
    assert log.user.max() < 10_000
    assert log.campaign.min() >= 0
    assert log.campaign.max() < len(DEFAULT_CAMPAIGNS)
    assert np.all(np.diff(log.timestamp.astype(np.int64)) >= 0)  # time order
    start = np.datetime64("2024-01-01T00:00", "us")
    assert log.timestamp[0] >= start
    assert log.timestamp[-1] < start + np.timedelta64(7, "D")
    counts = log.counts()
    assert counts.shape == (10_000,)
    assert counts.sum() == rows
    assert (counts > 0).sum() == 3000
    cols = log.columns()
    assert set(cols) == {"user_id", "timestamp", "campaign"}
    assert set(cols["campaign"].tolist()) <= set(DEFAULT_CAMPAIGNS)


def test_default_domain_and_string_ids(seed):
    log = make_impressions(50, rng=seed)
    assert log.domain_size == 100
    ids = log.user_ids()
    assert ids.shape == log.user.shape
    assert all(s.startswith("u") and len(s) == 8 for s in ids.tolist())
    assert [int(s[1:]) for s in ids.tolist()] == log.user.tolist()
    assert log.columns(string_ids=True)["user_id"].tolist() == ids.tolist()
    wide = make_impressions(5, domain_size=123_456_789, rng=seed)
    assert wide.id_width == 9
    assert len(wide.user_ids()[0]) == 10


def test_same_seed_same_log_and_different_seeds_differ(seed):
    a = make_impressions(2000, rng=seed)
    b = make_impressions(2000, rng=seed)
    c = make_impressions(2000, rng=seed + 1)
    for name in ("user", "timestamp", "campaign"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.counts(), c.counts())


def test_parameters_shape_the_log(seed):
    log = make_impressions(4000, max_impressions=30, days=2, start="2023-06-01",
                           campaigns=["only"], rng=seed)
    counts = log.counts()
    assert counts.max() <= 30
    assert counts.max() == 30  # the heavy tail reaches the cap (P(miss) < 1e-30)
    assert log.timestamp[-1] < np.datetime64("2023-06-03", "us")
    assert log.timestamp[0] >= np.datetime64("2023-06-01", "us")
    assert log.campaigns == ("only",)
    assert np.all(log.campaign == 0)


@pytest.mark.statistical
def test_heavy_tail_and_light_mass_match_the_mixture_law(seed):
    """P(count = 1) and P(count > 20) among reached users against the exact mixture law."""
    n, heavy, mean, r, median, sigma = 40_000, 0.2, 2.5, 1.5, 8.0, 1.0
    counts = make_impressions(n, rng=seed).counts()
    reached = counts[counts > 0]
    assert reached.size == n
    p = r / (r + mean)
    nb = stats.nbinom(r, p)
    light_zero = nb.pmf(0)
    ln = stats.norm(math.log(median), sigma)

    def heavy_sf(k: int) -> float:  # P(ceil(exp(N)) > k) = P(N > ln k)
        return float(ln.sf(math.log(k)))

    expected = {
        "one": (1 - heavy) * nb.pmf(1) / (1 - light_zero) + heavy * (1 - heavy_sf(1)),
        "over20": (1 - heavy) * nb.sf(20) / (1 - light_zero) + heavy * heavy_sf(20),
    }
    observed = {"one": float(np.mean(reached == 1)), "over20": float(np.mean(reached > 20))}
    for key, q in expected.items():
        sd = math.sqrt(q * (1 - q) / n)
        assert abs(observed[key] - q) <= Z * sd, (key, observed[key], q)
    # heavy tail sanity: counts far above the light users' scale occur
    assert reached.max() > 100


def test_true_profile_hand_values_and_clamping():
    f = true_profile([0, 1, 1, 5], domain_size=5, max_count=3)
    assert f.tolist() == [0.4, 0.4, 0.0, 0.2]
    assert true_profile([7, 7], domain_size=2, max_count=0).tolist() == [1.0]
    assert true_profile([], domain_size=4, max_count=2).tolist() == [1.0, 0.0, 0.0]


def test_true_profile_sums_to_one_and_ignores_trailing_zeros(seed):
    log = make_impressions(5000, domain_size=12_345, rng=seed)
    counts = log.counts()
    f = true_profile(counts, log.domain_size, 50)
    assert f.shape == (51,)
    assert math.isclose(f.sum(), 1.0, rel_tol=0, abs_tol=1e-12)
    assert f[0] == (12_345 - 5000) / 12_345
    assert np.array_equal(f, true_profile(counts[counts > 0], log.domain_size, 50))
    exact_tail = (counts >= 50).sum() / log.domain_size
    assert f[50] == exact_tail


@pytest.mark.parametrize(
    ("counts", "d", "n", "exc"),
    [
        ([1, 2, 3], 2, 5, DataError),
        ([1, -1], 5, 5, DataError),
        ([1.5], 5, 5, DataError),
        ([1], 0, 5, ParameterError),
        ([1], 5, -1, ParameterError),
    ],
)
def test_true_profile_bad_input(counts, d, n, exc):
    with pytest.raises(exc, match="true_profile"):
        true_profile(counts, d, n)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"n_users": 0}, "n_users"),
        ({"n_users": 10, "domain_size": 9}, "domain_size"),
        ({"n_users": 10, "heavy_fraction": 1.0}, "heavy_fraction"),
        ({"n_users": 10, "light_mean": -1.0}, "light_mean"),
        ({"n_users": 10, "max_impressions": 0}, "max_impressions"),
        ({"n_users": 10, "days": 0}, "days"),
        ({"n_users": 10, "start": "not a date"}, "start"),
        ({"n_users": 10, "campaigns": []}, "campaigns"),
        ({"n_users": 10, "rng": -3}, "rng"),
    ],
)
def test_make_impressions_bad_parameters(kwargs, param):
    with pytest.raises(ParameterError, match=f"^{param} of make_impressions"):
        make_impressions(**kwargs)


def test_write_impressions_round_trip(tmp_path, seed):
    log = make_impressions(300, domain_size=1000, rng=seed)
    path = write_impressions(tmp_path / "out", log)
    assert path == tmp_path / "out" / "impressions.parquet"
    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM read_parquet('{path}')")
    assert rel.columns == ["user_id", "timestamp", "campaign"]
    assert [str(t) for t in rel.types] == ["VARCHAR", "TIMESTAMP", "VARCHAR"]
    got = rel.fetchnumpy()
    assert got["user_id"].tolist() == log.user_ids().tolist()
    assert np.array_equal(np.asarray(got["timestamp"]).astype("datetime64[us]"), log.timestamp)
    assert got["campaign"].tolist() == log.columns()["campaign"].tolist()


def test_write_impressions_generates_and_checks_arguments(tmp_path, seed):
    path = write_impressions(tmp_path, n_users=100, rng=seed, filename="log.parquet")
    assert path.name == "log.parquet"
    n = duckdb.connect().sql(f"SELECT count(DISTINCT user_id) FROM '{path}'").fetchall()
    assert n == [(100,)]
    log = make_impressions(10, rng=seed)
    with pytest.raises(ParameterError, match="write_impressions"):
        write_impressions(tmp_path, log, n_users=5)
    with pytest.raises(ParameterError, match="write_impressions"):
        write_impressions(tmp_path, "not a log")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="write_impressions"):
        write_impressions(tmp_path, log, filename="a/b.parquet")
    assert isinstance(log, ImpressionLog)
