"""release_profile (issue 3 item 5): sources, clamping, exact paths, bad input, noise law."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.stats

import dpfreq.profile
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf
from dpfreq.profile import (
    ProfileRelease,
    default_bound_parameter,
    reconstruct_profile,
    release_profile,
)
from dpfreq.profile.api import noisy_profile_counts_from_classes

# per-item counts of 7 items (keys 10..16) in a domain of 12; cap n = 4 clamps the two 9s
COUNTS = np.array([3, 1, 0, 2, 9, 9, 1])
KEYS = np.arange(10, 17)
D, N = 12, 4
TRUE_PROFILE = np.array([6, 2, 1, 1, 2]) / D  # 5 implied zeros + the 0 entry; 9 -> 4
HUGE_EPS = 60.0  # Pr[any noise != 0] <= d * 2e^-60: the exact path (STYLE rule 18)


def _events() -> np.ndarray:
    return np.repeat(KEYS, COUNTS)


def _csv(tmp_path: Path) -> Path:
    p = tmp_path / "events.csv"
    ev = _events()
    p.write_text("user,item\n" + "".join(f"{i},{k}\n" for i, k in enumerate(ev)))
    return p


def _parquet(tmp_path: Path) -> Path:
    p = tmp_path / "events.parquet"
    ev = _events()
    pq.write_table(pa.table({"user": np.arange(ev.size), "item": ev}), p)
    return p


def _sources(tmp_path: Path) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The same data as every supported source kind: (source, extra kwargs)."""
    csv, parquet = _csv(tmp_path), _parquet(tmp_path)
    con = duckdb.connect()
    out: dict[str, tuple[Any, dict[str, Any]]] = {
        "numpy": (COUNTS, {}),
        "numpy-padded": (np.concatenate([COUNTS, np.zeros(D - COUNTS.size, dtype=int)]), {}),
        "list": (COUNTS.tolist(), {}),
        "float-integral": (COUNTS.astype(float), {}),
        "mapping": ({"item": _events()}, {"item": "item"}),
        "csv": (str(csv), {"item": "item"}),
        "csv-path": (csv, {"item": "item"}),
        "parquet": (str(parquet), {"item": "item"}),
        "duckdb-relation": (con.sql(f"SELECT * FROM read_parquet('{parquet}')"),
                            {"item": "item"}),
        "sql": (f"SELECT item FROM read_csv('{csv}')", {"item": "item"}),
        "csv-memory-engine-mapping": ({"item": _events().astype(str)}, {"item": "item"}),
    }
    try:  # pandas is not a test dependency; use it when present
        import pandas as pd
    except ImportError:  # pragma: no cover
        return out
    out["pandas-series"] = (pd.Series(COUNTS), {})
    return out


# ---------------------------------------------------------------------------------- exports


def test_package_exports() -> None:
    names = dpfreq.profile.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(dpfreq.profile, name)
    ns: dict[str, Any] = {}
    exec("from dpfreq.profile import *", ns)
    assert set(names) <= set(ns)
    for required in ("ProfileRelease", "ProfileSketch", "release_profile", "naive_profile",
                     "lp_profile", "unfold_clipped", "noisy_profile_counts"):
        assert required in names


def test_docstring_states_privacy() -> None:
    doc = release_profile.__doc__ or ""
    assert "**Privacy.**" in doc
    assert "ε-DP" in doc
    assert "per *event*" in doc
    assert "clamped" in doc


# ---------------------------------------------------------------------------------- sources


def test_every_source_gives_the_same_release(tmp_path: Path, seed: int) -> None:
    releases = {name: release_profile(src, domain_size=D, max_count=N, epsilon=0.7, rng=seed,
                                      **kw)
                for name, (src, kw) in _sources(tmp_path).items()}
    ref = releases["numpy"]
    assert isinstance(ref, ProfileRelease)
    for name, rel in releases.items():
        np.testing.assert_array_equal(rel.value, ref.value, err_msg=name)
        np.testing.assert_array_equal(rel.noisy_profile, ref.noisy_profile, err_msg=name)
        assert rel.seeded
        assert rel.B == ref.B
        assert rel.epsilon == 0.7
    assert releases["parquet"].mechanism_params["engine"] == "duckdb"
    assert releases["mapping"].mechanism_params["engine"] == "memory"
    assert releases["numpy"].mechanism_params["engine"] == "none (count vector)"


def test_explicit_engine(tmp_path: Path, seed: int) -> None:
    p = str(_parquet(tmp_path))
    a = release_profile(p, item="item", domain_size=D, max_count=N, epsilon=1.0, rng=seed,
                        engine="duckdb")
    b = release_profile({"item": _events()}, item="item", domain_size=D, max_count=N,
                        epsilon=1.0, rng=seed, engine="memory")
    np.testing.assert_array_equal(a.value, b.value)
    c = release_profile(p, item="item", domain_size=D, max_count=N, epsilon=1.0, rng=seed,
                        engine=get_engine("duckdb", connection=duckdb.connect()))
    np.testing.assert_array_equal(a.value, c.value)
    assert c.mechanism_params["engine"] == "duckdb"
    with pytest.raises(ParameterError, match="engine of get_engine"):
        release_profile(p, item="item", domain_size=D, max_count=N, epsilon=1.0,
                        engine=3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="engine of get_engine"):
        release_profile(p, item="item", domain_size=D, max_count=N, epsilon=1.0, engine="nope")


@pytest.mark.parametrize("name", ["numpy", "mapping", "csv", "parquet", "duckdb-relation", "sql"])
def test_exact_path_every_source(tmp_path: Path, seed: int, name: str) -> None:
    src, kw = _sources(tmp_path)[name]
    rel = release_profile(src, domain_size=D, max_count=N, epsilon=HUGE_EPS, rng=seed, **kw)
    np.testing.assert_allclose(rel.value, TRUE_PROFILE, rtol=0, atol=1e-12)
    assert rel.B == 0


def test_same_seed_same_release_other_seed_other_noise(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 30, size=5000)
    kw: dict[str, Any] = {"domain_size": 8000, "max_count": 20, "epsilon": 0.5}
    a = release_profile(counts, rng=seed, **kw)
    b = release_profile(counts, rng=seed, **kw)
    c = release_profile(counts, rng=seed + 1, **kw)
    np.testing.assert_array_equal(a.value, b.value)
    assert not np.array_equal(a.noisy_profile, c.noisy_profile)


def test_order_of_items_does_not_matter(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 9, size=300)
    kw: dict[str, Any] = {"domain_size": 400, "max_count": 6, "epsilon": 1.0, "rng": seed}
    a = release_profile(counts, **kw)
    b = release_profile(counts[::-1].copy(), **kw)
    np.testing.assert_array_equal(a.value, b.value)


def test_secure_default_is_not_seeded() -> None:
    rel = release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0)
    assert rel.seeded is False
    assert rel.value.shape == (N + 1,)
    assert math.isclose(float(rel.value.sum()), 1.0, rel_tol=1e-12)


def test_release_fields(seed: int) -> None:
    rel = release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, eta=0.1, norm=2,
                          method="mle", rng=seed)
    assert rel.domain_size == D
    assert rel.max_count == N
    assert rel.norm == "2"
    assert rel.eta == 0.1
    assert rel.method == "mle"
    assert rel.delta == 0.0
    assert default_bound_parameter(D, N, 1.0, 0.1) == rel.B
    params = rel.mechanism_params
    assert "clamp" in params["clamping"]
    assert params["gamma"] == str(discrete_laplace_gamma(1.0))
    assert not any("distinct" in k for k in params)  # data-dependent: never recorded
    assert rel.error.confidence is not None
    assert 0 < rel.error.confidence <= 1
    rel.to_json()


# ---------------------------------------------------------------------------------- clamping


def test_clamping_equals_pre_clamped_input(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 50, size=1000)
    kw: dict[str, Any] = {"domain_size": 1500, "max_count": 10, "epsilon": 0.8, "rng": seed}
    a = release_profile(counts, **kw)
    b = release_profile(np.minimum(counts, 10), **kw)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.noisy_profile, b.noisy_profile)


def test_clamping_exact(seed: int) -> None:
    rel = release_profile([100, 5, 4, 0], domain_size=4, max_count=4, epsilon=HUGE_EPS,
                          rng=seed)
    np.testing.assert_allclose(rel.value, [0.25, 0, 0, 0, 0.75], atol=1e-12)


def test_max_count_zero(seed: int) -> None:
    rel = release_profile([3, 0], domain_size=5, max_count=0, epsilon=HUGE_EPS, rng=seed)
    np.testing.assert_allclose(rel.value, [1.0])


def test_distribution_matches_reconstruct_profile_on_exact_path(seed: int) -> None:
    """At ε → ∞ both routes see the exact clamped histogram (same B, same counts)."""
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 12, size=200)
    a = release_profile(counts, domain_size=200, max_count=8, epsilon=HUGE_EPS, rng=seed)
    b = reconstruct_profile(np.minimum(counts, 8), max_count=8, epsilon=HUGE_EPS)
    np.testing.assert_array_equal(a.noisy_profile, b.noisy_profile)
    np.testing.assert_allclose(a.value, b.value, atol=1e-12)


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon(eps: Any) -> None:
    with pytest.raises(ParameterError, match="epsilon of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=eps)


@pytest.mark.parametrize("eta", [0, 1, -0.1, 1.5, float("nan"), "0.1"])
def test_bad_eta(eta: Any) -> None:
    with pytest.raises(ParameterError, match="eta of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, eta=eta)


@pytest.mark.parametrize("norm", [3, 0, "l2", None, True, -math.inf])
def test_bad_norm(norm: Any) -> None:
    with pytest.raises(ParameterError, match="norm of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, norm=norm)


@pytest.mark.parametrize("method", ["lp", "FFT", None])
def test_bad_method(method: Any) -> None:
    with pytest.raises(ParameterError, match="method of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, method=method)


@pytest.mark.parametrize(("param", "value"), [("domain_size", 0), ("domain_size", 2.0),
                                              ("max_count", -1), ("max_count", None)])
def test_bad_domain_or_cap(param: str, value: Any) -> None:
    kw: dict[str, Any] = {"domain_size": D, "max_count": N, "epsilon": 1.0}
    kw[param] = value
    with pytest.raises(ParameterError, match=f"{param} of release_profile"):
        release_profile(COUNTS, **kw)


@pytest.mark.parametrize(("counts", "shown"), [([1, -2, 3], "-2"), ([1, 2.5], "2.5"),
                                               ([1, float("nan")], "nan"),
                                               (np.array([[1, 2]]), "dimension"),
                                               (np.array(["a", "b"]), "dtype")])
def test_bad_counts(counts: Any, shown: str) -> None:
    with pytest.raises(DataError, match="source of release_profile") as info:
        release_profile(counts, domain_size=D, max_count=N, epsilon=1.0)
    assert shown in str(info.value)


def test_count_vector_longer_than_domain() -> None:
    with pytest.raises(DataError, match="at most domain_size = 5") as info:
        release_profile(np.ones(6, dtype=int), domain_size=5, max_count=N, epsilon=1.0)
    assert "6 entries" in str(info.value)


def test_more_distinct_items_than_domain(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="6 distinct items") as info:
        release_profile(str(_parquet(tmp_path)), item="item", domain_size=5, max_count=N,
                        epsilon=1.0)
    assert "domain_size = 5" in str(info.value)
    with pytest.raises(DataError, match="6 distinct items"):
        release_profile({"item": _events()}, item="item", domain_size=5, max_count=N,
                        epsilon=1.0)


def test_unknown_column(tmp_path: Path) -> None:
    for src in (str(_csv(tmp_path)), str(_parquet(tmp_path)), {"item": _events()}):
        with pytest.raises(DataError, match="'nope'"):
            release_profile(src, item="nope", domain_size=D, max_count=N, epsilon=1.0)


def test_empty_and_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        release_profile(str(empty), item="item", domain_size=D, max_count=N, epsilon=1.0)
    with pytest.raises(DataError, match="does not exist"):
        release_profile(str(tmp_path / "missing.parquet"), item="item", domain_size=D,
                        max_count=N, epsilon=1.0)


def test_header_only_file_is_all_zero_data(tmp_path: Path, seed: int) -> None:
    p = tmp_path / "header.csv"
    p.write_text("item\n")
    rel = release_profile(str(p), item="item", domain_size=D, max_count=N, epsilon=HUGE_EPS,
                          rng=seed)
    np.testing.assert_allclose(rel.value, [1.0, 0, 0, 0, 0], atol=1e-12)


def test_item_argument_rules(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="item of release_profile must be None"):
        release_profile(COUNTS, item="item", domain_size=D, max_count=N, epsilon=1.0)
    with pytest.raises(ParameterError, match="engine of release_profile must be None"):
        release_profile(COUNTS, engine="duckdb", domain_size=D, max_count=N, epsilon=1.0)
    with pytest.raises(ParameterError, match="item of release_profile must be the name"):
        release_profile(str(_csv(tmp_path)), domain_size=D, max_count=N, epsilon=1.0)
    with pytest.raises(ParameterError, match="item of release_profile"):
        release_profile({"item": _events()}, item=3, domain_size=D, max_count=N,  # type: ignore[arg-type]
                        epsilon=1.0)


def test_bad_rng() -> None:
    with pytest.raises(ParameterError, match="rng of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, rng=-1)


def test_unsupported_source() -> None:
    with pytest.raises(ParameterError, match="source of get_engine"):
        release_profile(object(), item="x", domain_size=D, max_count=N, epsilon=1.0)


# ---------------------------------------------------------------------------------- noise law


def _chi_square_pvalue(observed: np.ndarray, expected: np.ndarray) -> float:
    """Pearson chi-square with adjacent cells merged until every expected count is >= 5."""
    obs_m, exp_m = [], []
    o_acc = e_acc = 0.0
    for o, e in zip(observed, expected, strict=True):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            obs_m.append(o_acc)
            exp_m.append(e_acc)
            o_acc = e_acc = 0.0
    obs_m[-1] += o_acc
    exp_m[-1] += e_acc
    o_arr, e_arr = np.array(obs_m), np.array(exp_m)
    stat = float(((o_arr - e_arr) ** 2 / e_arr).sum())
    return float(scipy.stats.chi2.sf(stat, o_arr.size - 1))


@pytest.mark.statistical
def test_noisy_profile_law(seed: int) -> None:
    """Counts of ``k + Z`` per window cell (and the dropped rest) against the exact law.

    Classes of 10^5 items each at counts 0, 2 and 5 (n = 5, ε = 0.5, B = 8): each cell count is
    a sum of multinomial cells with probabilities ``Σ_k m_k pmf(t − k) / d``. Power: against
    noise of parameter 0.9γ the noncentrality ``λ = d Σ (p' − p)²/p`` (computed below) exceeds
    200, so the test at α = 1e-6 rejects that alternative with probability > 0.999.
    """
    eps, n, B = 0.5, 5, 8
    gamma = discrete_laplace_gamma(eps)
    classes = np.array([100_000, 0, 100_000, 0, 0, 100_000], dtype=np.int64)
    d = int(classes.sum())
    t = np.arange(-B, n + B + 1)

    def cell_probs(g: float) -> np.ndarray:
        p = sum(m * discrete_laplace_pmf(t - k, g) for k, m in enumerate(classes)) / d
        return np.append(p, 1.0 - p.sum())  # last cell: dropped (outside the window)

    p0 = cell_probs(float(gamma))
    p1 = cell_probs(0.9 * float(gamma))
    lam = d * float(((p1 - p0) ** 2 / p0).sum())
    df = p0.size - 1
    crit = scipy.stats.chi2.isf(1e-6, df)
    assert scipy.stats.ncx2.sf(crit, df, lam) > 0.999  # the power calculation
    gen = np.random.Generator(np.random.PCG64(seed))
    counts = noisy_profile_counts_from_classes(classes, max_count=n, B=B, gamma=gamma,
                                               generator=gen)
    observed = np.append(counts, d - counts.sum())
    assert _chi_square_pvalue(observed, d * p0) > 1e-6


# ---------------------------------------------------------------------------------- privacy


def _outcome_law(h: tuple[int, ...], n: int, B: int, gamma: float) -> dict[tuple[int, ...], float]:
    """Exact law of the noisy-profile counts for a 2-item domain (spec §1, §5).

    Per item: value ``min(h, n) + Z`` in the window ``[−B .. n+B]`` (cell ``t + B``) or dropped
    (cell ``P``), with the tails in closed form ``Pr[Z ≤ −m] = α^m/(1+α)``. The released counts
    are the multiset of the two cells.
    """
    a = math.exp(-gamma)
    t = np.arange(-B, n + B + 1)
    cells = []
    for c in h:
        k = min(c, n)
        p = discrete_laplace_pmf(t - k, gamma)
        drop = (a ** (B + k + 1) + a ** (n + B - k + 1)) / (1 + a)
        cells.append(np.append(p, drop))
    law: dict[tuple[int, ...], float] = {}
    for i, p1 in enumerate(cells[0]):
        for j, p2 in enumerate(cells[1]):
            key = (min(i, j), max(i, j))
            law[key] = law.get(key, 0.0) + float(p1 * p2)
    return law


@pytest.mark.parametrize(("h", "h2", "tight"), [((0, 0), (1, 0), True), ((2, 1), (3, 1), True),
                                                ((3, 5), (4, 5), False),
                                                ((9, 0), (10, 0), False)])
def test_neighbouring_histograms_exact_privacy_ratio(h: tuple[int, int], h2: tuple[int, int],
                                                     tight: bool) -> None:
    """Worst-case probability ratio of the mechanism's output between neighbours is ≤ e^γ ≤ e^ε,
    and equals e^γ (the calibration is tight) unless clamping makes the neighbours identical."""
    eps, n, B = 1.0, 3, 2
    gamma = float(discrete_laplace_gamma(eps))
    p, q = _outcome_law(h, n, B, gamma), _outcome_law(h2, n, B, gamma)
    assert math.isclose(sum(p.values()), 1.0, rel_tol=1e-12)
    worst = max(max(p[o] / q[o], q[o] / p[o]) for o in p)
    assert worst <= math.exp(gamma) * (1 + 1e-9)
    assert gamma <= eps
    if tight:
        assert worst >= math.exp(gamma) * (1 - 1e-9)
    else:  # both counts clamp to n = 3: the outputs have the same law
        assert worst == pytest.approx(1.0, abs=1e-12)
