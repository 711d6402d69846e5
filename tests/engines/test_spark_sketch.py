"""The distributed profile sketch on Spark local[2]: noise law, determinism, updates, save/open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpfreq.budget import Accountant, PrivacyBudget  # noqa: E402
from dpfreq.engines.spark_sketch import DistributedProfileSketch  # noqa: E402
from dpfreq.errors import BudgetExceededError, DataError, ParameterError  # noqa: E402
from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf  # noqa: E402
from dpfreq.profile.reconstruct import noisy_profile_counts  # noqa: E402

pytestmark = pytest.mark.spark

ALPHA = 1e-6
D = 10_000


def _chi_square_bins(d: int, gamma: Any) -> tuple[np.ndarray, int]:
    """Support points z in [-K, K] with expected count >= 20, plus two tail bins."""
    k = 1
    while d * float(discrete_laplace_pmf(k + 1, gamma)[()]) >= 20:
        k += 1
    return np.arange(-k, k + 1), k


def _probs(z: np.ndarray, gamma: Any) -> np.ndarray:
    p = discrete_laplace_pmf(z, gamma)
    tail = (1.0 - p.sum()) / 2.0
    return np.r_[tail, p, tail]


def _binned(values: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(np.clip(values, -k - 1, k + 1) + k + 1, minlength=2 * k + 3)


@pytest.mark.statistical
def test_noise_law_is_discrete_laplace(spark: Any, seed: int) -> None:
    """Chi-square of d = 10^4 per-item noises (4 blocks, 2 partitions) against the exact pmf.

    Power calculation: with d = 10^4 and bins of expected count >= 20 (13 bins for ε = 1), a
    sampler whose γ is off by 10% has noncentrality λ = d·Σ(p1−p0)²/p0 ≈ 94 and is rejected at
    α = 1e-6 with probability > 0.99 (computed below, asserted as a design check).
    """
    eps = 1.0
    gamma = discrete_laplace_gamma(eps)
    sketch = DistributedProfileSketch.create(spark, domain_size=D, max_count=5, epsilon=eps,
                                             rng=seed, block_size=2_500, num_partitions=2)
    noisy = sketch.to_numpy()
    assert noisy.shape == (D,)
    z, k = _chi_square_bins(D, gamma)
    p0 = _probs(z, gamma)
    p1 = _probs(z, float(gamma) * 1.1)
    df = len(p0) - 1
    crit = scipy.stats.chi2.isf(ALPHA, df)
    power = scipy.stats.ncx2.sf(crit, df, D * ((p1 - p0) ** 2 / p0).sum())
    assert power > 0.99
    observed = _binned(noisy, k)
    stat = ((observed - D * p0) ** 2 / (D * p0)).sum()
    assert scipy.stats.chi2.sf(stat, df) > ALPHA


def test_noise_deterministic_across_partitionings(spark: Any, seed: int) -> None:
    """Noise depends on (key, block) only: same seed ⇒ same table for any partition count."""
    a = DistributedProfileSketch.create(spark, domain_size=3_000, max_count=3, epsilon=0.5,
                                        rng=seed, block_size=1_000, num_partitions=1)
    b = DistributedProfileSketch.create(spark, domain_size=3_000, max_count=3, epsilon=0.5,
                                        rng=seed, block_size=1_000, num_partitions=3)
    na, nb = a.to_numpy(), b.to_numpy()
    assert np.array_equal(na, nb)
    assert np.array_equal(na, a.to_numpy())  # recomputation reproduces the noise
    # distinct blocks use distinct streams
    assert not np.array_equal(na[:1000], na[1000:2000])
    c = DistributedProfileSketch.create(spark, domain_size=3_000, max_count=3, epsilon=0.5,
                                        rng=seed + 1, block_size=1_000)
    assert not np.array_equal(na, c.to_numpy())
    assert a.seeded
    assert a.gamma == discrete_laplace_gamma(0.5)


def test_data_update_save_open_and_profile(spark: Any, seed: int, tmp_path: Path) -> None:
    d, n = 2_000, 4
    items = np.array([0, 0, 0, 0, 0, 0, 7, 7, 1999, 5], dtype=np.int64)  # item 0 clamped to 4
    pq.write_table(pa.table({"user": items}), tmp_path / "events.parquet")
    base = DistributedProfileSketch.create(spark, domain_size=d, max_count=n, epsilon=1.0,
                                           rng=seed, block_size=700)
    with_data = DistributedProfileSketch.create(spark, domain_size=d, max_count=n, epsilon=1.0,
                                                rng=seed, block_size=700,
                                                data=str(tmp_path / "events.parquet"),
                                                item="user")
    exact = np.zeros(d, dtype=np.int64)
    np.add.at(exact, items, 1)
    exact = np.minimum(exact, n)
    noise = base.to_numpy()
    assert np.array_equal(with_data.to_numpy(), noise + exact)

    inc = spark.createDataFrame([(3, 2), (7, 1)], "item long, count long")
    updated = with_data.update(inc)
    expect = noise + exact
    expect[3] += 2
    expect[7] += 1
    assert np.array_equal(updated.to_numpy(), expect)

    updated.save(tmp_path / "sketch")
    meta = json.loads((tmp_path / "sketch" / "dpfreq_sketch.json").read_text())
    assert meta["gamma"] == str(discrete_laplace_gamma(1.0))
    assert (meta["domain_size"], meta["max_count"], meta["seeded"]) == (d, n, True)
    assert "key" not in json.dumps(meta).lower()
    reopened = DistributedProfileSketch.open(tmp_path / "sketch", spark=spark)
    assert np.array_equal(reopened.to_numpy(), expect)
    assert (reopened.domain_size, reopened.max_count, reopened.epsilon) == (d, n, 1.0)

    for B in (0, 3, 9):
        got = reopened.noisy_profile_counts(B)
        assert got.shape == (n + 2 * B + 1,)
        assert np.array_equal(got, noisy_profile_counts(expect, max_count=n, B=B))

    release = reopened.reconstruct(eta=0.1)
    r = np.asarray(release.value)
    assert r.shape == (n + 1,)
    assert abs(r.sum() - 1.0) < 1e-9
    assert release.seeded


def test_errors_and_budget(spark: Any, seed: int, tmp_path: Path) -> None:
    acc = Accountant(PrivacyBudget(1.0))
    DistributedProfileSketch.create(spark, domain_size=10, max_count=2, epsilon=0.6, rng=seed,
                                    accountant=acc)
    with pytest.raises(BudgetExceededError):
        DistributedProfileSketch.create(spark, domain_size=10, max_count=2, epsilon=0.6,
                                        rng=seed, accountant=acc)
    sk = DistributedProfileSketch.create(spark, domain_size=10, max_count=2, epsilon=1.0,
                                         rng=seed)
    with pytest.raises(DataError, match="outside the public domain"):
        sk.update(spark.createDataFrame([(10, 1)], "item long, count long"))
    with pytest.raises(DataError, match="'user'"):
        sk.update(spark.createDataFrame([(1, 1)], "item long, count long"), item="user")
    with pytest.raises(DataError, match=r"dpfreq_sketch\.json"):
        DistributedProfileSketch.open(tmp_path, spark=spark)
    sk.save(tmp_path / "s")
    with pytest.raises(ParameterError, match="overwrite its own input"):
        DistributedProfileSketch.open(tmp_path / "s", spark=spark).update(
            spark.createDataFrame([(1, 1)], "item long, count long")).save(tmp_path / "s")
