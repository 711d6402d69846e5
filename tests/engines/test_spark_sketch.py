"""The distributed profile sketch on Spark local[2]: the in-memory noise block by block,
determinism, updates, save/open, overflow and tamper cases, refusals that spend nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpfreq.budget import Accountant, PrivacyBudget  # noqa: E402
from dpfreq.errors import (  # noqa: E402
    BudgetExceededError,
    DataError,
    EngineUnavailableError,
    ParameterError,
)
from dpfreq.noise import discrete_laplace_gamma  # noqa: E402
from dpfreq.profile import DistributedProfileSketch, ProfileSketch  # noqa: E402
from dpfreq.profile.histogram_noise import domain_noise, master_key  # noqa: E402
from dpfreq.profile.reconstruct import noisy_profile_counts  # noqa: E402
from dpfreq.rng import resolve_rng  # noqa: E402

pytestmark = pytest.mark.spark


def test_blocks_are_the_in_memory_noise(spark: Any, seed: int) -> None:
    """Every block's noise on the executors is exactly :func:`domain_noise` under the same
    master key (4 blocks, 2 partitions): the law is the one the in-memory sketch's chi-square
    test checks (``tests/unit/test_profile_sketch.py::test_sketch_noise_law``)."""
    d, bs = 4_000, 1_000
    sketch = DistributedProfileSketch.create(engine=spark, domain_size=d, max_count=5,
                                             epsilon=1.0, rng=seed, block_size=bs,
                                             num_partitions=2)
    key = master_key(resolve_rng(seed))
    expected = domain_noise(key, d, discrete_laplace_gamma(1.0), block_size=bs)
    np.testing.assert_array_equal(sketch.to_numpy(), expected)


def test_noise_deterministic_across_partitionings(spark: Any, seed: int) -> None:
    """Noise depends on (key, block) only: same seed ⇒ same table for any partition count."""
    a = DistributedProfileSketch.create(engine=spark, domain_size=3_000, max_count=3,
                                        epsilon=0.5, rng=seed, block_size=1_000, num_partitions=1)
    b = DistributedProfileSketch.create(engine=spark, domain_size=3_000, max_count=3,
                                        epsilon=0.5, rng=seed, block_size=1_000, num_partitions=3)
    na, nb = a.to_numpy(), b.to_numpy()
    assert np.array_equal(na, nb)
    assert np.array_equal(na, a.to_numpy())  # recomputation reproduces the noise
    # distinct blocks use distinct streams
    assert not np.array_equal(na[:1000], na[1000:2000])
    c = DistributedProfileSketch.create(engine=spark, domain_size=3_000, max_count=3,
                                        epsilon=0.5, rng=seed + 1, block_size=1_000)
    assert not np.array_equal(na, c.to_numpy())
    assert a.seeded
    assert a.gamma == discrete_laplace_gamma(0.5)


def test_data_update_save_open_and_profile(spark: Any, seed: int, tmp_path: Path) -> None:
    """Data, update, save and open in one chain, with a Spark job only where one is checked:
    the noise is the in-memory :func:`domain_noise` (see the first test), the table is read
    back once after the data and once after save/open (which also holds the update)."""
    d, n = 2_000, 4
    items = np.array([0, 0, 0, 0, 0, 0, 7, 7, 1999, 5], dtype=np.int64)  # item 0 clamped to 4
    pq.write_table(pa.table({"user": items}), tmp_path / "events.parquet")
    with_data = DistributedProfileSketch.create(str(tmp_path / "events.parquet"), engine=spark,
                                                domain_size=d, max_count=n, epsilon=1.0,
                                                rng=seed, block_size=700,
                                                item="user")
    exact = np.zeros(d, dtype=np.int64)
    np.add.at(exact, items, 1)
    exact = np.minimum(exact, n)
    noise = domain_noise(master_key(resolve_rng(seed)), d, discrete_laplace_gamma(1.0),
                         block_size=700)
    assert np.array_equal(with_data.to_numpy(), noise + exact)

    inc = spark.createDataFrame([(3, 2), (7, 1)], "item long, count long")
    updated = with_data.update(inc)
    expect = noise + exact
    expect[3] += 2
    expect[7] += 1

    updated.save(tmp_path / "sketch")
    meta = json.loads((tmp_path / "sketch" / "dpfreq_sketch.json").read_text())["payload"]
    assert meta["gamma"] == str(discrete_laplace_gamma(1.0))
    assert (meta["domain_size"], meta["max_count"], meta["seeded"]) == (d, n, True)
    assert "key" not in json.dumps(meta).lower()
    reopened = DistributedProfileSketch.open(tmp_path / "sketch", engine=spark)
    assert np.array_equal(reopened.to_numpy(), expect)
    assert (reopened.domain_size, reopened.max_count, reopened.epsilon) == (d, n, 1.0)

    for B in (0, 9):
        got = reopened.noisy_profile_counts(B)
        assert got.shape == (n + 2 * B + 1,)
        assert np.array_equal(got, noisy_profile_counts(expect, max_count=n, B=B))

    release = reopened.reconstruct(confidence=0.8)
    r = np.asarray(release.value)
    assert r.shape == (n + 1,)
    assert abs(r.sum() - 1.0) < 1e-9
    assert release.seeded
    assert release.unit == "event"
    assert release.error.kind == "interval"
    assert release.l1_bound is not None


def test_errors_and_budget(spark: Any, seed: int, tmp_path: Path) -> None:
    acc = Accountant(PrivacyBudget(1.0))
    DistributedProfileSketch.create(engine=spark, domain_size=10, max_count=2,
                                    epsilon=0.6, rng=seed, accountant=acc)
    with pytest.raises(BudgetExceededError):
        DistributedProfileSketch.create(engine=spark, domain_size=10, max_count=2,
                                        epsilon=0.6, rng=seed, accountant=acc)
    sk = DistributedProfileSketch.create(engine=spark, domain_size=10, max_count=2,
                                         epsilon=1.0, rng=seed)
    with pytest.raises(DataError, match="item ids in the public domain"):
        sk.update(spark.createDataFrame([(10, 1)], "item long, count long"))
    with pytest.raises(DataError, match="'user'"):
        sk.update(spark.createDataFrame([(1, 1)], "item long, count long"), item="user")
    with pytest.raises(DataError, match=r"holds no dpfreq_sketch\.json"):
        DistributedProfileSketch.open(tmp_path, engine=spark)
    sk.save(tmp_path / "s")
    with pytest.raises(ParameterError, match="overwrite its own input"):
        DistributedProfileSketch.open(tmp_path / "s", engine=spark).update(
            spark.createDataFrame([(1, 1)], "item long, count long")).save(tmp_path / "s")


def test_same_noise_as_the_in_memory_sketch(spark: Any, seed: int) -> None:
    """One noise implementation: the same seed gives the in-memory sketch's counters."""
    d = 5_000
    dist = DistributedProfileSketch.create(engine=spark, domain_size=d, max_count=3,
                                           epsilon=0.7, rng=seed)
    mem = ProfileSketch(d, max_count=3, epsilon=0.7, rng=seed)
    np.testing.assert_array_equal(dist.to_numpy(), mem.noisy_counts())
    a = dist.reconstruct(confidence=0.9)
    b = mem.reconstruct(confidence=0.9)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.error.band_upper, b.error.band_upper)


def test_overflowing_update_is_refused_and_the_old_sketch_kept(spark: Any, seed: int) -> None:
    sk = DistributedProfileSketch.create(engine=spark, domain_size=10, max_count=2,
                                         epsilon=1.0, rng=seed)
    big = 2**52 - 1
    with pytest.raises(DataError, match="below 2\\^52") as info:
        sk.update(spark.createDataFrame([(1, big), (1, 1)], "item long, count long"))
    assert str(big) not in str(info.value)
    # counters near the int64 limit (as after ~2048 maximal updates): one more update gives a
    # null counter (try_add), never a wrapped value, and the reductions refuse it
    from dpfreq.engines import get_engine

    tables = get_engine(spark).tables()
    near = tables.domain_table(domain_size=10, block_size=4,
                               block_values=lambda b, n: np.full(n, 2**63 - 10, np.int64))
    step = tables.checked_counts(spark.createDataFrame([(3, 9), (4, 10)], "item long, count long"),
                                 item="item", count="count", domain_size=10, clamp=None)
    over = tables.add_counts(near, step)
    _, nulls, _ = tables.value_counts(over, low=0, high=2)
    assert nulls == 1  # item 4 overflowed; item 3 reached 2^63 − 1 exactly
    sk.table = over
    with pytest.raises(DataError, match="beyond the int64 range"):
        sk.reconstruct()


def test_tampered_saved_sketch_is_refused(spark: Any, seed: int, tmp_path: Path) -> None:
    sk = DistributedProfileSketch.create(engine=spark, domain_size=100, max_count=2,
                                         epsilon=1.0, rng=seed)
    sk.save(tmp_path / "s")
    meta_path = tmp_path / "s" / "dpfreq_sketch.json"
    crc = tmp_path / "s" / ".dpfreq_sketch.json.crc"
    text = meta_path.read_text()
    meta_path.write_text(text + " ")  # the local file system's own checksum catches an edit
    with pytest.raises(DataError, match=r"dpfreq_sketch\.json is unreadable or corrupted"):
        DistributedProfileSketch.open(tmp_path / "s", engine=spark)
    crc.unlink()  # as on a file system without checksums (e.g. object stores): ours catches it
    DistributedProfileSketch.open(tmp_path / "s", engine=spark).noisy_profile_counts(2)
    for old, new in (('"epsilon": 1.0', '"epsilon": 1000.0'), ('"seeded": true', '"seeded": false'),
                     ('"max_count": 2', '"max_count": 3')):
        assert old in text
        meta_path.write_text(text.replace(old, new))
        with pytest.raises(DataError, match=r"dpfreq_sketch\.json .*checksum does not match"):
            DistributedProfileSketch.open(tmp_path / "s", engine=spark)
    meta_path.write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match=r"dpfreq_sketch\.json is not a valid"):
        DistributedProfileSketch.open(tmp_path / "s", engine=spark)
    # a well-sealed file whose fields break the rules
    from dpfreq.artifacts import open_json, seal_json

    _, payload = open_json(text, kind="DistributedProfileSketch", versions=(1,))
    for field, value, match in (("gamma", "1/3", "gamma is not the noise fraction"),
                                ("rows", 99, "one row per domain item"),
                                ("domain_size", -1, "domain_size is not an integer"),
                                ("epsilon", 0.0, "epsilon of DistributedProfileSketch.open")):
        meta_path.write_text(seal_json({**payload, field: value},
                                       kind="DistributedProfileSketch", version=1))
        with pytest.raises(DataError, match=match):
            DistributedProfileSketch.open(tmp_path / "s", engine=spark)
    meta_path.write_text(text)
    # the table edited after saving: refused at the first reduction
    other = DistributedProfileSketch.create(engine=spark, domain_size=100, max_count=2,
                                            epsilon=1.0, rng=seed + 1)
    other.save(tmp_path / "t")
    table = tmp_path / "s" / "noisy_counts.parquet"
    import shutil

    shutil.rmtree(table)
    shutil.copytree(tmp_path / "t" / "noisy_counts.parquet", table)
    reopened = DistributedProfileSketch.open(tmp_path / "s", engine=spark)
    with pytest.raises(DataError, match="does not match its digest"):
        reopened.reconstruct()


def test_bad_parameters_spend_nothing(spark: Any, seed: int, tmp_path: Path) -> None:
    acc = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=r"domain_size of DistributedProfileSketch\.create"):
        DistributedProfileSketch.create(engine=spark, domain_size=2**63 + 500, max_count=2,
                                        epsilon=1.0, accountant=acc)
    with pytest.raises(ParameterError, match=r"max_count of DistributedProfileSketch\.create"):
        DistributedProfileSketch.create(engine=spark, domain_size=100, max_count=10**9,
                                        epsilon=1.0, accountant=acc)
    bad = spark.createDataFrame([(1,), (500,)], "item long")
    with pytest.raises(DataError, match="item ids in the public domain") as info:
        DistributedProfileSketch.create(bad, engine=spark, domain_size=100, max_count=2,
                                        epsilon=1.0, accountant=acc)
    assert "500" not in str(info.value)
    with pytest.raises(ParameterError, match=r"engine of DistributedProfileSketch\.create"):
        DistributedProfileSketch.create(engine="duckdb", domain_size=100, max_count=2,
                                        epsilon=1.0, accountant=acc)
    assert (acc.spent.epsilon, acc.spent.delta) == (0.0, 0.0)


def test_without_pyspark_the_pip_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "pyspark", None)
    for name in [m for m in sys.modules if m.startswith("dpfreq.engines.spark")]:
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(EngineUnavailableError, match=r"pip install 'dpfreq\[spark\]'"):
        DistributedProfileSketch.create(domain_size=10, max_count=2, epsilon=1.0)
