"""Audit of the windows system: collision-free noise keys, tamper-evident saved releases,
budget charged only for releases that happen, and one-line errors without private numbers."""

from __future__ import annotations

import datetime as dt
import io
import json
import warnings
import zipfile
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from scipy import stats

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.rng import derive_key
from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.noise.keyed import (
    EAGER_SCHEME,
    GAUSSIAN_SCHEME,
    LAPLACE_SCHEME,
    KeyedDiscreteLaplace,
)
from dpfreq.windows.persist import ARTIFACT_VERSION

ALPHA = 1e-6


def _aes_keys(rel: WindowCountsRelease) -> list[bytes]:
    """The AES sub-key of every lazily keyed tree of a release."""
    out = []
    for s in rel._state.structures.values():
        impl = s._impl
        trees = impl if isinstance(impl, tuple) else (impl,)
        for t in trees:
            src = getattr(t, "_noise", t)
            if hasattr(src, "_prf"):
                out.append(src._prf.aes_key)
    return out


@pytest.fixture(scope="module")
def many_structures() -> WindowCountsRelease:
    """The issue's configuration: 1001 (family, k) structures, all windows, T = 256."""
    items = np.arange(60) % 17
    times = np.arange(60) % 256 + 1
    return release_window_counts((items, times), horizon=256, epsilon=1.0, unit="event",
                                 k_values=range(1, 1002), windows=["all"],
                                 method={"all": "tree2d"}, rng=3)


@pytest.mark.xdist_group("many-structures")  # one worker builds the fixture
def test_every_tree_of_many_structures_has_its_own_key(many_structures):
    keys = _aes_keys(many_structures)
    assert len(keys) == 2 * 1001  # two 2d trees per structure
    assert len(set(keys)) == len(keys)


@pytest.mark.xdist_group("many-structures")  # one worker builds the fixture
def test_node_signs_of_two_structures_are_not_correlated(many_structures):
    """The former collision: the k = 1 tree and the k = 999 structure agreed in sign on every
    node. Independent symmetric noises agree with probability 1/2 on nodes where both are
    non-zero: a two-sided binomial test at α = 1e-6 on nodes 1..3999 (≈ 3000 such nodes, so an
    agreement rate of 0.6 would be rejected with power ≈ 1)."""
    st = many_structures._state.structures
    ids = np.arange(1, 4000)
    a = st[("all", 1)]._impl[0].noise_of(ids)
    for other in ((("all", 999), 0), (("all", 999), 1), (("all", 500), 0)):
        b = st[other[0]]._impl[other[1]].noise_of(ids)
        both = (a != 0) & (b != 0)
        agree = int(np.sum(np.sign(a[both]) == np.sign(b[both])))
        assert stats.binomtest(agree, int(both.sum()), 0.5).pvalue > ALPHA


def test_sub_key_encoding_is_injective_over_a_grid():
    """Every (scheme, family, k, tree) of a grid gets its own key, including the pairs that
    arithmetic on small integers would merge (k = 1, tree 12 vs k = 11, tree 2; 2·(1000+s)+i
    vs 1000+s')."""
    key = bytes(range(32))
    labels = ["cumulative", "all", "rolling(W=1)", "rolling(W=11)", "rolling(W=111)"]
    seen = {}
    for scheme, label, k, tree in product((LAPLACE_SCHEME, GAUSSIAN_SCHEME, EAGER_SCHEME),
                                          labels, [*range(1, 40), 999, 1000, 2001],
                                          (0, 1, 12)):
        sub = derive_key(key, "windows", scheme, label, k, tree)
        assert sub not in seen, (scheme, label, k, tree, seen.get(sub))
        seen[sub] = (scheme, label, k, tree)
    assert len(seen) == 3 * 5 * 42 * 3
    # names that concatenate to the same text still differ
    a = KeyedDiscreteLaplace(key, ("all", 11, 2), Fraction(1, 3))._prf.aes_key
    b = KeyedDiscreteLaplace(key, ("all", 1, 12), Fraction(1, 3))._prf.aes_key
    c = KeyedDiscreteLaplace(key, ("all1", 1, 2), Fraction(1, 3))._prf.aes_key
    assert len({a, b, c}) == 3


# ------------------------------------------------------------------------ saved releases


def _small_release(**over):
    kw = {"horizon": 8, "epsilon": 1.0, "unit": "item", "k_values": [1, 2],
          "windows": ["cumulative", 3, "all"], "rng": 4}
    kw.update(over)
    return release_window_counts((np.array([1, 1, 2, 3, 3]), np.array([1, 2, 2, 5, 8])), **kw)


@pytest.fixture
def saved(tmp_path):
    rel = _small_release()
    path = rel.save(tmp_path / "rel.dpfreq")
    return rel, path


def test_round_trip_is_identical(saved):
    rel, path = saved
    back = WindowCountsRelease.load(path)
    assert back.to_dict() == rel.to_dict()
    t1, t2 = np.triu_indices(8)
    assert np.array_equal(back.window(t1 + 1, t2 + 1, 2).estimate,
                          rel.window(t1 + 1, t2 + 1, 2).estimate)


def test_truncated_file_is_one_data_error(saved):
    _, path = saved
    data = path.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(DataError, match=str(path.name)):
            WindowCountsRelease.load(path)


def test_bit_flips_are_one_data_error(saved):
    rel, path = saved
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(1)
    messages = []
    for pos in rng.integers(0, len(data), size=25).tolist():
        flipped = bytearray(data)
        flipped[pos] ^= 1 << int(rng.integers(0, 8))
        path.write_bytes(bytes(flipped))
        try:
            back = WindowCountsRelease.load(path)
        except DataError as exc:
            messages.append(str(exc))
            continue
        # a flip in bytes no reader looks at (zip metadata) leaves every field intact: the file
        # then loads to the very same release (the digest covers every field)
        assert back.to_dict() == rel.to_dict()
    assert messages
    assert all(path.name in m and "\n" not in m for m in messages)


def _rewrite_header(path, edit):
    """Edit the header's JSON in place without recomputing the checksum (a casual edit)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    header = json.loads(members["__header__.json"])
    edit(header)
    members["__header__.json"] = json.dumps(header).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    path.write_bytes(buf.getvalue())


def test_edited_epsilon_fails_the_checksum(saved):
    _, path = saved
    _rewrite_header(path, lambda h: h["meta"]["build"].update(epsilon=1000.0))
    with pytest.raises(DataError, match="checksum"):
        WindowCountsRelease.load(path)


def _forge(path, tmp_path, edit):
    """Rewrite the file with a valid checksum after editing its fields (a deliberate forger)."""
    _, meta, arrays = read_artifact(path, kind="window-release", versions=(ARTIFACT_VERSION,))
    edit(meta, arrays)
    out = tmp_path / "forged.dpfreq"
    write_artifact(out, kind="window-release", version=ARTIFACT_VERSION, meta=meta,
                   arrays=arrays)
    return out


@pytest.mark.parametrize(("edit", "match"), [
    (lambda m, a: m["build"].update(epsilon=9e18), "epsilon"),
    (lambda m, a: m["build"].update(epsilon=float("nan")), "epsilon"),
    (lambda m, a: m["build"].update(delta=1.5), "delta"),
    (lambda m, a: m["build"].update(unit="device"), "unit"),
    (lambda m, a: m["build"].update(k_values=[2, 1]), "k_values"),
    (lambda m, a: m["build"].update(k_values=[0]), "k_values"),
    (lambda m, a: m["build"].update(seeded="yes"), "seeded"),
    (lambda m, a: m["build"].update(horizon=9), "horizon|axis|summaries"),
    (lambda m, a: m["build"].update(method={"all": "tree2d"}), "method"),
    (lambda m, a: m["build"].pop("unit"), "incomplete"),
    (lambda m, a: m.update(key="00"), "key"),
    (lambda m, a: a.update(summary_weights=np.zeros_like(a["summary_weights"])), "summaries"),
    (lambda m, a: a.update(summary_keys=a["summary_keys"] + 10**6), "summaries"),
    (lambda m, a: a.update(summary_weights=-a["summary_weights"]), "summaries"),
    (lambda m, a: a.update(summary_keys=a["summary_keys"][:-1]), "shapes"),
    (lambda m, a: a.pop("summary_slots"), "missing"),
])
def test_forged_fields_are_one_data_error(saved, tmp_path, edit, match):
    _, path = saved
    forged = _forge(path, tmp_path, edit)
    with pytest.raises(DataError, match=match) as info:
        WindowCountsRelease.load(forged)
    assert "forged.dpfreq" in str(info.value)
    assert "\n" not in str(info.value)


def test_other_version_and_missing_file_are_data_errors(saved, tmp_path):
    _, path = saved
    _, meta, arrays = read_artifact(path, kind="window-release", versions=(ARTIFACT_VERSION,))
    other = tmp_path / "next.dpfreq"
    write_artifact(other, kind="window-release", version=ARTIFACT_VERSION + 1, meta=meta,
                   arrays=arrays)
    with pytest.raises(DataError, match="version"):
        WindowCountsRelease.load(other)
    with pytest.raises(DataError, match="does not exist"):
        WindowCountsRelease.load(tmp_path / "nothing.dpfreq")
    np.savez(tmp_path / "plain.npz", meta=np.zeros(3))
    with pytest.raises(DataError, match=r"plain\.npz"):
        WindowCountsRelease.load(tmp_path / "plain.npz")


# ------------------------------------------------------------------------ budget and errors


@pytest.mark.parametrize("over", [
    {"method": {"all": "fastest"}},
    {"method": {"all": "tree2d"}, "unit": "item"},  # tree2d is event-level only
    {"epsilon": 1e300},
    {"epsilon": 9e18},
    {"horizon": 2**40},
    {"singleton": True},
    {"source": (np.array([1, 2]), np.array([1, 99]))},
    {"source": (np.array([1.0, np.nan]), np.array([1, 2]))},
])
def test_refused_calls_spend_nothing(over):
    acct = Accountant(PrivacyBudget(10.0))
    kw = {"horizon": 8, "epsilon": 1.0, "unit": "event", "k_values": [1],
          "windows": ["cumulative", "all"], "rng": 1, "accountant": acct,
          "source": (np.array([1, 1, 2]), np.array([1, 1, 3]))}
    kw.update(over)
    source = kw.pop("source")
    with pytest.raises(ParameterError) as info:
        release_window_counts(source, **kw)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_errors_do_not_quote_private_numbers():
    times = np.concatenate((np.full(3487, 5), np.full(20, 12345)))
    items = np.arange(times.size) % 7 + 123_456_789
    with pytest.raises(DataError) as info:
        release_window_counts((items, times), horizon=8, epsilon=1.0, unit="event",
                              k_values=[1], rng=1, windows=["cumulative"])
    msg = str(info.value)
    for private in ("3487", "12345", "20 ", "123456789"):
        assert private not in msg
    with pytest.raises(DataError) as info:
        release_window_counts((np.array([1, 2]), np.array([1.0, 1e30])), horizon=8,
                              epsilon=1.0, unit="event", k_values=[1], rng=1,
                              windows=["cumulative"])
    assert "-9223372036854775808" not in str(info.value)
    assert "outside" in str(info.value)


def test_nan_item_ids_are_refused_like_none():
    # a float column is no id, NaN or not (refused by its type, as on every engine)
    for items, said in ((np.array([1.0, np.nan]), "got type DOUBLE\\.$"),
                        (np.array([1, None], dtype=object), "missing")):
        with pytest.raises(DataError, match=said):
            release_window_counts((items, np.array([1, 2])), horizon=4, epsilon=1.0,
                                  unit="event", k_values=[1], rng=1, windows=["cumulative"])


def test_unit_has_no_default():
    with pytest.raises(TypeError):
        release_window_counts((np.array([1]), np.array([1])), horizon=4, epsilon=1.0,
                              k_values=[1], rng=1, windows=["cumulative"])
    with pytest.raises(ParameterError, match="unit"):
        release_window_counts((np.array([1]), np.array([1])), horizon=4, epsilon=1.0,
                              k_values=[1], rng=1, unit=None, windows=["cumulative"])


def test_inclusive_end_is_the_same_range_for_every_period():
    times = np.array(["2024-01-01T00:00", "2024-01-03T23:59:59", "2024-01-03T12:00"],
                     dtype="datetime64[us]")
    items = np.array([1, 2, 3])
    kw = {"start": "2024-01-01", "end": "2024-01-03", "epsilon": 1.0, "unit": "item",
          "k_values": [1], "rng": 1, "item": "u", "time": "t", "windows": ["cumulative"]}
    for period, horizon in (("1d", 3), ("6h", 12), ("5h", 15), (dt.timedelta(hours=1), 72)):
        rel = release_window_counts({"u": items, "t": times}, period=period, **kw)
        assert rel.horizon == horizon
        assert rel.n_dropped == 0
    # a timestamp end includes that instant and nothing after it
    rel = release_window_counts({"u": items, "t": times}, period="1d",
                                **{**kw, "end": "2024-01-03T12:00"})
    assert rel.horizon == 3


def test_timezone_aware_times_without_warnings():
    pd = pytest.importorskip("pandas")
    ts = pd.Series(pd.to_datetime(["2024-01-01T23:30", "2024-01-02T01:00"])).dt.tz_localize(
        "Europe/Paris")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rel = release_window_counts({"u": [1, 2], "t": ts}, item="u", time="t",
                                    start="2024-01-01T00:00+01:00", end="2024-01-01",
                                    period="1d", epsilon=1.0, unit="event", k_values=[1],
                                    rng=1, windows=["cumulative"])
        text = release_window_counts(
            {"u": [1, 2], "t": ["2024-01-01T23:30+01:00", "2024-01-02T00:30+02:00"]},
            item="u", time="t", start="2023-12-31T23:00Z", end="2024-01-01", period="1d",
            epsilon=1.0, unit="event", k_values=[1], rng=1, windows=["cumulative"])
    assert rel.n_dropped == 0
    assert text.n_dropped == 0


def test_result_is_complete_and_tidy():
    rel = release_window_counts(
        {"u": [1, 2, 2], "t": np.array(["2024-03-01", "2024-03-02", "2024-03-02"],
                                       dtype="datetime64[D]")},
        item="u", time="t", start="2024-03-01", end="2024-03-04", period="1d", epsilon=1.0,
        unit="item", k_values=[1, 2], windows=["cumulative", 2], rng=1)
    tab = rel.table()
    assert list(tab) == ["window", "k", "start", "end", "estimate", "lower", "upper"]
    assert len(tab["estimate"]) == 2 * 2 * 4
    assert tab["start"].dtype == np.dtype("datetime64[D]")
    assert str(tab["end"][3]) == "2024-03-04"
    assert np.all(tab["lower"] <= tab["estimate"])
    assert np.all(tab["estimate"] <= tab["upper"])
    assert rel.error.kind == "interval"
    assert rel.unit == "item"
    assert np.array_equal(rel.value["rolling(W=2)"][2], rel.rolling_curve(2).estimate)


# ------------------------------------------------------------------------ exact privacy audits


def _all_logs(horizon: int, n_items: int, max_events: int):
    """Every event log (multiset of (item, period) cells) with at most ``max_events`` events."""
    from itertools import combinations_with_replacement

    cells = [(i, t) for i in range(n_items) for t in range(1, horizon + 1)]
    for size in range(max_events + 1):
        yield from combinations_with_replacement(cells, size)


def _sorted_arrays(log):
    pairs = sorted(log)
    return (np.array([p[0] for p in pairs], dtype=np.int64),
            np.array([p[1] for p in pairs], dtype=np.int64))


def _tree2d_counts(log, k: int, horizon: int, domain: int) -> dict:
    """Node counts of the two product trees of the all-windows structure (P1, P2)."""
    from collections import Counter

    from dpfreq.windows.data.reductions import time_window_points

    item, times = _sorted_arrays(log)
    x1, y1, x2, y2 = time_window_points(item, times, k, horizon)
    out: Counter = Counter()
    for tree, (xs, ys) in enumerate(((x1, y1), (x2, y2))):
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            if x > horizon - 1 or y - 1 > horizon - 1:
                continue  # never counted by a query: not in the structure's domain
            u, v = domain + x, domain + y - 1
            anc_u = [u >> s for s in range(domain.bit_length())]
            anc_v = [v >> s for s in range(domain.bit_length())]
            for a in anc_u:
                for b in anc_v:
                    out[(tree, a, b)] += 1
    return out


def _cumulative_counts(log, k: int, structure) -> np.ndarray:
    """Released block counts of a cumulative structure (its block × period incidence)."""
    from dpfreq.windows.data.reductions import cumulative_points
    from dpfreq.windows.layouts.layered import layer_incidence

    item, times = _sorted_arrays(log)
    t = structure.horizon
    hist = np.bincount(cumulative_points(item, times, k) - 1, minlength=t)
    if structure.method == "simple":
        return hist
    return layer_incidence(t, structure.branching, structure.top) @ hist


CUMULATIVE_LAYOUTS = [("simple", 2, False), ("tree", 2, False), ("tree", 2, True),
                      ("tree", 3, False), ("tree", 3, True)]


def test_exact_worst_case_loss_of_the_noisy_trees_is_within_epsilon():
    """Every log of at most 3 events over 2 items and T = 4 periods, and every neighbour with one
    more event (event level) or one more item with up to 2 events (item level): the privacy loss
    of noisy node counts ``c + DLap(γ)`` between two inputs is at most ``γ·‖c − c'‖₁``, attained
    at outputs beyond both (the pmfs are exact), so the exact worst case over this enumeration
    is ``γ·max‖c − c'‖₁``. It must not exceed the structure's budget ε_s, for every cumulative
    layout at both units and the 2d trees (event level), k = 1, 2."""
    from dpfreq.windows.structures.base import build_structure

    horizon, eps = 4, Fraction(1)
    logs = [tuple(sorted(log)) for log in _all_logs(horizon, 2, 3)]
    cells = [(i, t) for i in range(2) for t in range(1, horizon + 1)]
    newcomers = [tuple((2, t) for _, t in hist) for hist in _all_logs(horizon, 1, 2) if hist]
    for k in (1, 2):
        t2d = build_structure("all", "tree2d", k, horizon, "event", eps, 0.0)
        d_2d = int(t2d.detail["domain"])
        worst_2d = Fraction(0)
        cums = {(unit, lay): build_structure("cumulative", lay[0], k, horizon, unit, eps, 0.0,
                                             branching=lay[1], top=lay[2])
                for unit in ("event", "item") for lay in CUMULATIVE_LAYOUTS}
        worst = dict.fromkeys(cums, Fraction(0))
        for log in logs:
            n0 = _tree2d_counts(log, k, horizon, d_2d)
            base = {key: _cumulative_counts(log, k, s) for key, s in cums.items()}
            for cell in cells:
                other = tuple(sorted((*log, cell)))
                n1 = _tree2d_counts(other, k, horizon, d_2d)
                l1 = sum(abs(n1[key] - n0[key]) for key in set(n0) | set(n1))
                worst_2d = max(worst_2d, t2d.gamma * l1)
                for key, s in cums.items():
                    if key[0] == "event":
                        diff = np.abs(_cumulative_counts(other, k, s) - base[key]).sum()
                        worst[key] = max(worst[key], s.gamma * int(diff))
            for extra in newcomers:
                other = tuple(sorted((*log, *extra)))
                for key, s in cums.items():
                    if key[0] == "item":
                        diff = np.abs(_cumulative_counts(other, k, s) - base[key]).sum()
                        worst[key] = max(worst[key], s.gamma * int(diff))
        assert 0 < worst_2d <= eps
        for key, value in worst.items():
            assert 0 < value <= eps, key


def _clopper_pearson(hits: int, n: int, alpha: float) -> tuple[float, float]:
    lo = stats.beta.ppf(alpha, hits, n - hits + 1) if hits > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha, hits + 1, n - hits) if hits < n else 1.0
    return float(lo), float(hi)


def _reach_hits(n: int, **release: object) -> tuple[float, float]:
    """Clopper–Pearson bounds (α/2 per side) of "cumulative reach at t = 1 >= 2" over ``n``
    seeded releases on two neighbouring logs: one more item (or event) at period 1 (``p``'s
    lower bound), and without it (``q``'s upper bound)."""
    base = (np.array([1, 2]), np.array([1, 2]))
    plus = (np.array([0, 1, 2]), np.array([1, 1, 2]))
    hits = []
    for log in (plus, base):
        count = 0
        for seed in range(n):
            rel = release_window_counts(log, horizon=2, k_values=[1], windows=["cumulative"],
                                        rng=seed, **release)
            count += int(rel.value["cumulative"][1][0] >= 2)
        hits.append(count)
    p_lo, _ = _clopper_pearson(hits[0], n, ALPHA / 2)
    _, q_hi = _clopper_pearson(hits[1], n, ALPHA / 2)
    return p_lo, q_hi


@pytest.mark.slow
def test_clopper_pearson_lower_bound_of_cumulative_windows_is_within_epsilon():
    """Seeded black-box audit: releases on two neighbouring logs (one more event of item 0 at
    period 1), the event "cumulative reach at t = 1 >= 2" counted over n releases each. With
    one-sided Clopper–Pearson bounds at α/2 each (α = 1e-6), ``ln(p_lower(D) / p_upper(D'))`` is
    a lower bound on the realised ε that holds with probability >= 1 − α; it must not exceed the
    claimed ε."""
    eps = 1.0
    p_lo, q_hi = _reach_hits(3000, epsilon=eps, unit="event",
                             method={"cumulative": "per_query"})
    assert p_lo > q_hi  # the audit has power: the event is more likely with the extra event
    assert np.log(p_lo / q_hi) <= eps


@pytest.mark.slow
def test_clopper_pearson_lower_bound_of_the_item_level_counter_is_within_epsilon():
    """Seeded black-box audit of the structure ``auto`` keeps at item level (T = 2): releases
    on two neighbouring logs (one more item, seen at period 1), the event "cumulative reach at
    t = 1 >= 2" over n releases each; the Clopper–Pearson lower bound on the realised ε (α/2
    per side, α = 1e-6) must not exceed the claimed ε."""
    eps = 1.0
    p_lo, q_hi = _reach_hits(3000, epsilon=eps, unit="item")
    assert p_lo > q_hi  # the audit has power
    assert np.log(p_lo / q_hi) <= eps


def test_extreme_public_parameters_are_handled():
    src = (np.array([1, 2, 2]), np.array([1, 2, 3]))
    kw = {"horizon": 4, "epsilon": 1.0, "unit": "event", "k_values": [1], "rng": 1,
          "windows": ["cumulative"]}
    # a huge k: the reductions need memory for the rows only, not for k per item
    big = release_window_counts(src, **{**kw, "k_values": [2**29], "windows": ["all"]})
    assert big.window(1, 4, 2**29).sd > 0
    # δ too small for any zCDP calibration: the pure plan is used
    tiny = release_window_counts(src, **{**kw, "delta": 5e-324})
    assert tiny.mechanism_params["accounting"].startswith("pure")
    with pytest.raises(ParameterError, match="to fit in memory"):
        release_window_counts(src, **{**kw, "horizon": 2**30})
    with pytest.raises(ParameterError, match="horizon"):
        release_window_counts(src, **{**kw, "horizon": 2**40})


def _factor_counts(log, k: int, horizon: int, moves: bool) -> np.ndarray:
    """``R x`` of the factorization (coefficients of a unit with or without moved points): x
    the per-period counts of k-th occurrences."""
    from scipy.linalg import toeplitz

    from dpfreq.windows.data.reductions import cumulative_points
    from dpfreq.windows.layouts.factorization import coefficients

    item, times = _sorted_arrays(log)
    hist = np.bincount(cumulative_points(item, times, k) - 1, minlength=horizon)
    return np.tril(toeplitz(coefficients(horizon, moves))).astype(np.int64) @ hist


def test_exact_l2_sensitivity_of_the_factorization_over_every_small_log():
    """Every log of at most 3 events over 2 items and T = 4, and every neighbour with one more
    event (event level) or one more item with up to 2 events (item level): ``‖R x − R x'‖₂²``
    never exceeds the squared sensitivity the structure is calibrated to, and the discrete
    Gaussian's ``σ² >= ℓ2²/(2ρ)`` makes the release ρ-zCDP (Canonne–Kamath–Steinke 2020)."""
    from dpfreq.windows.structures.base import build_structure

    horizon, rho = 4, 0.05
    logs = [tuple(sorted(log)) for log in _all_logs(horizon, 2, 3)]
    cells = [(i, t) for i in range(2) for t in range(1, horizon + 1)]
    newcomers = [tuple((2, t) for _, t in hist) for hist in _all_logs(horizon, 1, 2) if hist]
    for k in (1, 2):
        for unit, moves in (("event", [(c,) for c in cells]), ("item", newcomers)):
            s = build_structure("cumulative", "factorization", k, horizon, unit, Fraction(1),
                                1e-3, rho=rho, noise_kind="gaussian")
            worst = 0
            for log in logs:
                base = _factor_counts(log, k, horizon, unit != "item")
                for extra in moves:
                    diff = _factor_counts(tuple(sorted((*log, *extra))), k, horizon,
                                          unit != "item") - base
                    worst = max(worst, int(diff @ diff))
            assert 0 < worst <= s.shape.l2_squared
            assert s.sigma2 >= s.shape.l2_squared / (2 * rho)


@pytest.mark.slow
def test_clopper_pearson_lower_bound_of_the_factorization_is_within_epsilon():
    """Seeded black-box audit of the factorization at (ε, δ) = (4, 1e-3), item level, T = 2:
    one more item seen at period 1, the event "cumulative reach at t = 1 >= 2" over n releases
    each; with Clopper–Pearson bounds at α/2 per side (α = 1e-6), ``ln((p_lower − δ)/q_upper)``
    lower-bounds the realised ε with probability >= 1 − α and must not exceed ε."""
    eps, delta = 4.0, 1e-3
    p_lo, q_hi = _reach_hits(3000, epsilon=eps, delta=delta, unit="item",
                             method={"cumulative": "factorization"})
    assert p_lo > q_hi  # the audit has power
    assert np.log((p_lo - delta) / q_hi) <= eps
