"""release_profile: sources, grammar, clamping, exact paths, bad input, budget, noise law."""

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
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import get_engine
from dpfreq.errors import BudgetExceededError, DataError, ParameterError, public_call
from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf
from dpfreq.profile import ProfileRelease, plan_profile, release_profile
from dpfreq.profile.histogram_noise import noisy_profile_counts_from_classes

# per-item counts of 7 items (keys 10..16) in a domain of 12; cap n = 4 clamps the two 9s
COUNTS = np.array([3, 1, 0, 2, 9, 9, 1])
KEYS = np.arange(10, 17)
D, N = 12, 4
TRUE_PROFILE = np.array([6, 2, 1, 1, 2]) / D  # 5 implied zeros + the 0 entry; 9 -> 4
HUGE_EPS = 60.0  # Pr[any noise != 0] <= d * 2e^-30: the exact path (STYLE rule 18)
KW: dict[str, Any] = {"domain_size": D, "max_count": N, "epsilon": 1.0, "unit": "item"}


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
    for required in ("ProfileRelease", "ProfileSketch", "release_profile", "plan_profile",
                     "ProfilePlan"):
        assert required in names


def test_docstring_states_privacy() -> None:
    doc = release_profile.__doc__ or ""
    assert "**Privacy.**" in doc
    assert "ε-DP" in doc
    assert "(ℓ1 sensitivity 1)" in doc  # item: the classes t >= 1
    assert "change by at most 2 in ℓ1" in doc  # item_replace and event: all classes
    assert "clamped" in doc


# ---------------------------------------------------------------------------------- grammar


def test_unit_is_required_and_checked() -> None:
    with pytest.raises(TypeError, match="unit"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0)  # type: ignore[call-arg]
    with pytest.raises(ParameterError, match=r"unit of release_profile .*no default"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, unit=None)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="unit of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, unit="device")


@pytest.mark.parametrize("method", ["fft", "mle"])
def test_sketch_methods_refuse_item_unit(method: str) -> None:
    with pytest.raises(ParameterError, match=r"unit of release_profile .*sketch") as info:
        release_profile(COUNTS, **KW, method=method)
    assert "\n" not in str(info.value)


def test_auto_chooses_direct_and_says_why(seed: int) -> None:
    for unit in ("item", "event"):
        rel = release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, unit=unit,
                              rng=seed)
        assert rel.method == "direct"
        assert rel.unit == unit
        assert rel.mechanism == "direct-count-of-counts"
        assert "one-shot" in rel.mechanism_params["why"]
    rel = release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, unit="event",
                          method="fft", rng=seed)
    assert rel.mechanism_params["why"] == "method='fft' was asked for"
    assert rel.unit == "event"


# ---------------------------------------------------------------------------------- sources


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_every_source_gives_the_same_release(tmp_path: Path, seed: int, method: str) -> None:
    releases = {name: release_profile(src, domain_size=D, max_count=N, epsilon=0.7,
                                      unit="event", method=method, rng=seed, **kw)
                for name, (src, kw) in _sources(tmp_path).items()}
    ref = releases["numpy"]
    assert isinstance(ref, ProfileRelease)
    for name, rel in releases.items():
        np.testing.assert_array_equal(rel.value, ref.value, err_msg=name)
        np.testing.assert_array_equal(rel.noisy_profile, ref.noisy_profile, err_msg=name)
        np.testing.assert_array_equal(rel.error.lower, ref.error.lower, err_msg=name)
        assert rel.seeded
        assert rel.epsilon == 0.7
    assert releases["parquet"].mechanism_params["engine"] == "duckdb"
    assert releases["mapping"].mechanism_params["engine"] == "memory"
    assert releases["numpy"].mechanism_params["engine"] == "none (count vector)"


def test_explicit_engine(tmp_path: Path, seed: int) -> None:
    p = str(_parquet(tmp_path))
    a = release_profile(p, item="item", **KW, rng=seed, engine="duckdb")
    b = release_profile({"item": _events()}, item="item", **KW, rng=seed, engine="memory")
    np.testing.assert_array_equal(a.value, b.value)
    c = release_profile(p, item="item", **KW, rng=seed,
                        engine=get_engine("duckdb", connection=duckdb.connect()))
    np.testing.assert_array_equal(a.value, c.value)
    assert c.mechanism_params["engine"] == "duckdb"
    with pytest.raises(ParameterError, match="engine of release_profile"):
        release_profile(p, item="item", **KW, engine=3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="engine of release_profile"):
        release_profile(p, item="item", **KW, engine="nope")


@pytest.mark.parametrize("name", ["numpy", "mapping", "csv", "parquet", "duckdb-relation", "sql"])
@pytest.mark.parametrize("method", ["direct", "fft"])
def test_exact_path_every_source(tmp_path: Path, seed: int, name: str, method: str) -> None:
    src, kw = _sources(tmp_path)[name]
    rel = release_profile(src, domain_size=D, max_count=N, epsilon=HUGE_EPS, unit="event",
                          method=method, rng=seed, **kw)
    np.testing.assert_allclose(rel.value, TRUE_PROFILE, rtol=0, atol=1e-12)
    assert np.all(rel.error.lower <= TRUE_PROFILE + 1e-12)
    assert np.all(rel.error.upper >= TRUE_PROFILE - 1e-12)


def test_same_seed_same_release_other_seed_other_noise(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 30, size=5000)
    kw: dict[str, Any] = {"domain_size": 8000, "max_count": 20, "epsilon": 0.5, "unit": "item"}
    a = release_profile(counts, rng=seed, **kw)
    b = release_profile(counts, rng=seed, **kw)
    c = release_profile(counts, rng=seed + 1, **kw)
    np.testing.assert_array_equal(a.value, b.value)
    assert not np.array_equal(a.noisy_profile, c.noisy_profile)


def test_order_of_items_does_not_matter(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 9, size=300)
    kw: dict[str, Any] = {"domain_size": 400, "max_count": 6, "epsilon": 1.0, "rng": seed,
                          "unit": "event"}
    for method in ("direct", "fft"):
        a = release_profile(counts, method=method, **kw)
        b = release_profile(counts[::-1].copy(), method=method, **kw)
        np.testing.assert_array_equal(a.value, b.value)


def test_secure_default_is_not_seeded() -> None:
    rel = release_profile(COUNTS, **KW)
    assert rel.seeded is False
    assert rel.value.shape == (N + 1,)
    np.testing.assert_allclose(float(rel.value.sum()), 1.0, rtol=1e-12)
    # the direct estimate is a vector of whole items
    np.testing.assert_array_equal(rel.value * D, np.round(rel.value * D))


def test_release_fields_and_surface(seed: int) -> None:
    rel = release_profile(COUNTS, domain_size=D, max_count=N, epsilon=1.0, unit="event",
                          confidence=0.9, norm=2, method="mle", rng=seed)
    assert (rel.domain_size, rel.max_count, rel.norm, rel.method) == (D, N, "2", "mle")
    assert rel.delta == 0.0
    assert rel.error.kind == "interval"
    assert rel.error.confidence == 0.9
    assert rel.l1_confidence == 0.9
    assert rel.l1_bound is not None
    assert 0 < rel.l1_bound <= 2
    params = rel.mechanism_params
    assert "clamp" in params["clamping"]
    assert params["gamma"] == str(discrete_laplace_gamma(1.0))
    assert not any("distinct" in k for k in params)  # data-dependent: never recorded
    table = rel.table()
    assert list(table) == ["t", "estimate", "lower", "upper", "band_lower", "band_upper",
                           "items"]
    assert np.all(table["lower"] <= table["estimate"] + 1e-15)
    assert np.all(table["estimate"] <= table["upper"] + 1e-15)
    assert np.all(table["band_lower"] <= table["estimate"] + 1e-15)
    rel.to_json()
    frame = rel.to_pandas()
    assert frame.attrs["unit"] == "event"
    direct = release_profile(COUNTS, **KW, rng=seed)
    assert direct.mechanism_params["gamma"] == str(discrete_laplace_gamma(1.0, sensitivity=1))
    assert direct.mechanism_params["sensitivity"] == 1
    assert direct.mechanism_params["layout"] == "class 0 derived"
    assert direct.mechanism_params["relation"] == "add or remove one item with all its rows"
    assert direct.to_dict()["relation"] == direct.relation
    assert direct.B == 0
    replaced = release_profile(COUNTS, **{**KW, "unit": "item_replace"}, rng=seed)
    assert replaced.mechanism_params["gamma"] == str(discrete_laplace_gamma(1.0, sensitivity=2))
    assert replaced.mechanism_params["sensitivity"] == 2
    assert replaced.mechanism_params["layout"] == "all classes"


def test_plot_linear_and_log(seed: int) -> None:
    rel = release_profile(COUNTS, **KW, rng=seed)
    ax = rel.plot(log=True, truth=TRUE_PROFILE)
    assert ax.get_yscale() == "log"
    ax2 = rel.plot()
    assert ax2.get_yscale() == "linear"


# ---------------------------------------------------------------------------------- clamping


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_clamping_equals_pre_clamped_input(seed: int, method: str) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 50, size=1000)
    kw: dict[str, Any] = {"domain_size": 1500, "max_count": 10, "epsilon": 0.8, "rng": seed,
                          "unit": "event", "method": method}
    a = release_profile(counts, **kw)
    b = release_profile(np.minimum(counts, 10), **kw)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.noisy_profile, b.noisy_profile)


def test_clamping_exact(seed: int) -> None:
    rel = release_profile([100, 5, 4, 0], domain_size=4, max_count=4, epsilon=HUGE_EPS,
                          unit="item", rng=seed)
    np.testing.assert_allclose(rel.value, [0.25, 0, 0, 0, 0.75], atol=1e-12)


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_max_count_zero_is_refused_before_reading_or_spending(method: str) -> None:
    acct = Accountant(PrivacyBudget(1.0))
    with pytest.raises(ParameterError) as info:
        release_profile("no-such-file.csv", item="user", domain_size=5, max_count=0,
                        epsilon=1.0, unit="event", method=method, accountant=acct, rng=1)
    assert str(info.value) == ("max_count of release_profile must be an integer >= 1; "
                               "got 0.")
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), 1e300, 1e-9, "1", None,
                                 True])
def test_bad_epsilon(eps: Any) -> None:
    with pytest.raises(ParameterError, match="epsilon of release_profile"):
        release_profile(COUNTS, domain_size=D, max_count=N, epsilon=eps, unit="item")


@pytest.mark.parametrize("confidence", [0, 1, -0.1, 1.5, float("nan"), "0.1"])
def test_bad_confidence(confidence: Any) -> None:
    with pytest.raises(ParameterError, match="confidence of release_profile"):
        release_profile(COUNTS, **KW, confidence=confidence)


@pytest.mark.parametrize("norm", [3, 0, "l2", None, True, -math.inf])
def test_bad_norm(norm: Any) -> None:
    with pytest.raises(ParameterError, match="norm of release_profile"):
        release_profile(COUNTS, **KW, norm=norm)


@pytest.mark.parametrize("method", ["lp", "FFT", None])
def test_bad_method(method: Any) -> None:
    with pytest.raises(ParameterError, match="method of release_profile"):
        release_profile(COUNTS, **KW, method=method)


@pytest.mark.parametrize(("param", "value"), [("domain_size", 0), ("domain_size", 2.5),
                                              ("domain_size", 2**62), ("domain_size", 2**63),
                                              ("max_count", -1), ("max_count", None)])
def test_bad_domain_or_cap(param: str, value: Any) -> None:
    kw = dict(KW)
    kw[param] = value
    with pytest.raises(ParameterError, match=f"{param} of release_profile"):
        release_profile(COUNTS, **kw)


def test_huge_domain_refused_not_silent() -> None:
    """A domain whose class sizes cannot be exact in int64 is refused, never noise-free."""
    with pytest.raises(ParameterError, match=r"domain_size of release_profile .*<= "
                       + str(2**62 - 1)):
        release_profile(np.full(1000, 5), domain_size=2**63, max_count=5, epsilon=1,
                        unit="event")
    rel = release_profile(np.full(1000, 5), domain_size=2**62 - 1, max_count=5, epsilon=1,
                          unit="event", rng=1)
    assert round(float(rel.value.sum())) == 1


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_max_count_too_large_for_memory(method: str) -> None:
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=r"max_count of release_profile .* GiB") as info:
        release_profile(COUNTS, domain_size=D, max_count=10**12, epsilon=1.0, unit="event",
                        method=method, accountant=acct)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


@pytest.mark.parametrize(("counts", "shown"), [([1, -2, 3], "an entry below 0"),
                                               ([1, 2.5], "a non-integral entry"),
                                               ([1, float("nan")], "nan"),
                                               (np.array([[1, 2]]), "dimension"),
                                               (np.array(["a", "b"]), "dtype")])
def test_bad_counts(counts: Any, shown: str) -> None:
    with pytest.raises(DataError, match="source of release_profile") as info:
        release_profile(counts, **KW)
    assert shown in str(info.value)


def test_count_vector_longer_than_domain() -> None:
    with pytest.raises(DataError, match="at most domain_size = 5"):
        release_profile(np.ones(6, dtype=int), domain_size=5, max_count=N, epsilon=1.0,
                        unit="item")


def test_more_distinct_items_than_domain_without_the_number(tmp_path: Path) -> None:
    for src in (str(_parquet(tmp_path)), {"item": _events()}):
        with pytest.raises(DataError, match="more distinct items") as info:
            release_profile(src, item="item", domain_size=5, max_count=N, epsilon=1.0,
                            unit="item")
        assert "7" not in str(info.value)  # the private number of distinct items


def test_unknown_column(tmp_path: Path) -> None:
    for src in (str(_csv(tmp_path)), str(_parquet(tmp_path)), {"item": _events()}):
        with pytest.raises(DataError, match="'nope'"):
            release_profile(src, item="nope", **KW)


def test_empty_and_missing_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        release_profile(str(empty), item="item", **KW)
    with pytest.raises(DataError, match="does not exist"):
        release_profile(str(tmp_path / "missing.parquet"), item="item", **KW)


def test_header_only_file_is_all_zero_data(tmp_path: Path, seed: int) -> None:
    p = tmp_path / "header.csv"
    p.write_text("item\n")
    rel = release_profile(str(p), item="item", domain_size=D, max_count=N, epsilon=HUGE_EPS,
                          unit="item", rng=seed)
    np.testing.assert_allclose(rel.value, [1.0, 0, 0, 0, 0], atol=1e-12)


def test_item_argument_rules(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="item of release_profile must be None"):
        release_profile(COUNTS, item="item", **KW)
    with pytest.raises(ParameterError, match="engine of release_profile must be None"):
        release_profile(COUNTS, engine="duckdb", **KW)
    with pytest.raises(ParameterError, match="item of release_profile must be the name"):
        release_profile(str(_csv(tmp_path)), **KW)
    with pytest.raises(ParameterError, match="item of release_profile"):
        release_profile({"item": _events()}, item=3, **KW)  # type: ignore[arg-type]


def test_bad_rng() -> None:
    with pytest.raises(ParameterError, match="rng of release_profile"):
        release_profile(COUNTS, **KW, rng=-1)


def test_unsupported_source() -> None:
    with pytest.raises(ParameterError, match="source of release_profile"):
        release_profile(object(), item="x", **KW)


# ---------------------------------------------------------------------------------- budget


def test_accountant_charged_only_for_releases_that_happen(tmp_path: Path, seed: int) -> None:
    acct = Accountant(PrivacyBudget(1.0))
    bad_calls: list[dict[str, Any]] = [
        {"epsilon": 1e300}, {"epsilon": 0.5, "confidence": 2.0}, {"epsilon": 0.5, "unit": None},
        {"epsilon": 0.5, "method": "fft", "unit": "item"}, {"epsilon": 0.5, "domain_size": 3},
    ]
    for extra in bad_calls:
        kw = {**KW, **extra}
        with pytest.raises((ParameterError, DataError)):
            release_profile(COUNTS, accountant=acct, rng=seed, **kw)
    with pytest.raises(DataError):
        release_profile(str(tmp_path / "missing.csv"), item="item", **{**KW, "epsilon": 0.5},
                        accountant=acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    release_profile(COUNTS, **{**KW, "epsilon": 0.75}, accountant=acct, rng=seed)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.75, 0.0)
    with pytest.raises(BudgetExceededError):
        release_profile(COUNTS, **{**KW, "epsilon": 0.5}, accountant=acct, rng=seed)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.75, 0.0)
    with pytest.raises(ParameterError, match="accountant of release_profile"):
        release_profile(COUNTS, **KW, accountant="ledger")


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
    """Exact law of the noisy-profile counts for a 2-item domain.

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


# ---------------------------------------------------------------------------------- plan


def test_plan_grammar_and_refusals() -> None:
    with pytest.raises(ParameterError, match=r"unit of plan_profile .*sketch"):
        plan_profile(domain_size=10**6, max_count=50, epsilon=1.0, unit="item", method="fft")
    with pytest.raises(ParameterError, match="domain_size of plan_profile"):
        plan_profile(domain_size=2**62, max_count=50, epsilon=1.0, unit="item")
    with pytest.raises(TypeError, match="unit"):
        plan_profile(domain_size=10**6, max_count=50, epsilon=1.0)  # type: ignore[call-arg]
    sketch = plan_profile(domain_size=10**6, max_count=50, epsilon=1.0, unit="event",
                          method="fft")
    assert sketch.half_width is None
    assert 0 < sketch.l1_bound <= 2
    with pytest.raises(ParameterError, match=r"measure of ProfilePlan\.epsilon_for"):
        sketch.epsilon_for(target=5, measure="half_width")
    direct = plan_profile(domain_size=10**6, max_count=50, epsilon=1.0, unit="event")
    assert direct.method == "direct"
    assert direct.l1_bound < sketch.l1_bound
    with pytest.raises(ParameterError, match=r"target of ProfilePlan\.epsilon_for"):
        direct.epsilon_for(target=-1.0)
    with pytest.raises(ParameterError, match=r"target of ProfilePlan\.epsilon_for"):
        sketch.epsilon_for(target=1e-6)  # the sketch's theorem bound: unreachable at ε <= 1000
    assert direct.to_dict()["why"] == direct.why


def test_release_matches_its_plan(seed: int) -> None:
    """The release's half-widths and ℓ1 bound are those its plan predicted (public only)."""
    rel = release_profile(COUNTS, domain_size=10**5, max_count=N, epsilon=0.7, unit="item",
                          confidence=0.9, rng=seed)
    plan = plan_profile(domain_size=10**5, max_count=N, epsilon=0.7, unit="item",
                        confidence=0.9)
    assert rel.mechanism_params["half_width_items"][1:] == [plan.half_width] * N
    assert rel.mechanism_params["band_half_width_items"][1:] == [plan.band_half_width] * N
    assert rel.mechanism_params["half_width_items"][0] == plan.class0_half_width
    assert rel.mechanism_params["band_half_width_items"][0] == plan.class0_band_half_width
    assert rel.l1_bound == pytest.approx(plan.l1_bound)


def test_sum_interval_with_class_zero_derived(seed: int) -> None:
    """At unit="item" classes 0..hi are d minus the noisy classes hi+1..n: their sum's
    interval comes from the law of n − hi draws (all classes: exactly d)."""
    from fractions import Fraction

    from dpfreq.profile.intervals import sum_half_width

    rel = release_profile(COUNTS, **KW, rng=seed)
    assert rel.mechanism_params["layout"] == "class 0 derived"
    assert rel.sum_interval(0, N) == (1.0, 1.0)
    gamma = Fraction(rel.mechanism_params["gamma"])
    q = sum_half_width(gamma, 1, rel.error.confidence)
    assert q is not None
    y = rel.mechanism_params["noisy_count_of_counts"]
    d = KW["domain_size"]
    lo, hi = rel.sum_interval(0, N - 1)
    assert lo <= (d - int(y[N])) / d <= hi
    assert (hi - lo) * d <= 2 * q + abs(float(np.sum(rel.value[:N])) * d - (d - int(y[N])))


def test_checked_parameters_are_named_and_frozen() -> None:
    """check_profile_parameters returns a frozen ProfileParams (fields by name, auto resolved)
    that the plan reports unchanged."""
    import dataclasses

    from dpfreq.profile.plan import ProfileParams, check_profile_parameters

    par = check_profile_parameters(100, 5, 0.5, "item", 0.9, "auto")
    assert isinstance(par, ProfileParams)
    assert (par.domain_size, par.max_count, par.epsilon, par.unit, par.confidence,
            par.method) == (100, 5, 0.5, "item", 0.9, "direct")
    assert par.why.startswith("auto chose direct")
    with pytest.raises(dataclasses.FrozenInstanceError):
        par.epsilon = 1.0  # type: ignore[misc]
    plan = plan_profile(domain_size=100, max_count=5, epsilon=0.5, unit="item", confidence=0.9)
    assert (plan.domain_size, plan.max_count, plan.epsilon, plan.unit, plan.confidence,
            plan.method, plan.why) == dataclasses.astuple(par)
    with pytest.raises(ParameterError, match=r"^unit of plan_profile must"), \
            public_call("plan_profile"):
        check_profile_parameters(100, 5, 0.5, "row", 0.9, "auto")
