"""Benchmark of dpfreq.windows : accuracy against simple baselines, and speed.

Run ``python benchmarks/bench_windows.py [--quick]``. Prints tables:

1. RMSE vs T (event level, k = 1, ε = 1) for cumulative, rolling W = 7 and arbitrary windows,
   with the log–log slope of RMSE against log2 T and the closed-form prediction.
2. RMSE vs k at T = 365.
3. Baselines on the same data at T = 365 (event and item level): every method forced, the
   ``auto`` choice, ratio auto / best baseline (must be <= 1) and per-window composition / auto.
5. Cumulative counters (``--only counters``): the RMSE of every cumulative structure (simple
   counter, binary tree, the best layered B-ary tree, per-query) and of ``auto`` at
   T ∈ {7, 30, 90, 365, 4096}, ε ∈ {0.1, 1}, both units, measured on the structures' keyed
   noise (an answer is the exact count plus this noise) over many keys; ratio auto / best.
   The issue setting (200k-item log, T = 30, item level, ε = 1/3, 8 seeds) is measured on
   releases, with ``--baseline-rev REV`` also on the library of revision REV in the same run.
   ``--plot PATH`` writes the predicted RMSE against T of each structure (PNG).
4. Speed: ingest events/s, release time and random window queries/s: arbitrary windows at
   T = 2^16 asked first on a fresh release (10^4 and 10^5 windows, each against the time of the
   exact counts of the same windows in the same run), asked again, one window per call.
   ``--baseline-rev REV`` times the same steps with the library source of git revision REV in
   the same run and prints the ratios.

RMSE is measured: |estimate − exact count| over random queries and several independent
releases (different seeds), where the exact count is brute-force-verified in the tests.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpfreq.windows import release_window_counts


def _event_release(*args, **kwargs):
    """An event-level release (``unit=`` in this version, ``level=`` before it existed)."""
    try:
        return release_window_counts(*args, unit="event", **kwargs)
    except TypeError:  # a --baseline-rev library without the unit argument
        return release_window_counts(*args, **kwargs)


def make_log(rng: np.random.Generator, n_events: int, horizon: int, n_items: int):
    item = rng.integers(0, n_items, size=n_events)
    times = rng.integers(1, horizon + 1, size=n_events)
    return item, times


def measured_rmse(item, times, horizon, family, k, level, method, reps, n_queries, seed,
                  delta=0.0):
    rng = np.random.default_rng(seed)
    errs = []
    pred = []
    for r in range(reps):
        fam = family if family != "rolling" else 7
        choice = "auto" if method == "auto" else {fam: method}
        rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[k],
                                    unit=level, windows=[fam], method=choice, delta=delta,
                                    rng=seed * 1000 + r)
        if family == "cumulative":
            t2 = rng.integers(1, horizon + 1, size=n_queries)
            t1 = np.ones_like(t2)
        elif family == "rolling":
            t2 = rng.integers(1, horizon + 1, size=n_queries)
            t1 = np.maximum(1, t2 - 6)
        else:
            a = rng.integers(1, horizon + 1, size=(2, n_queries))
            t1, t2 = a.min(axis=0), a.max(axis=0)
        ans = rel.window(t1, t2, k)
        _label, s = next(iter(rel._state.structures.items()))
        exact = rel._state.exact(s, t1, t2)
        errs.append(np.asarray(ans.estimate) - exact)
        pred.append(np.asarray(ans.sd) ** 2 + s.bias_bound() ** 2)
        chosen = s.method if delta == 0 else f"{s.method}/{s.noise_kind}"
    e = np.concatenate(errs)
    return float(np.sqrt(np.mean(e.astype(np.float64) ** 2))), float(
        np.sqrt(np.mean(np.concatenate(pred)))), chosen


def table(rows, header):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)))
    print()


def bench_vs_t(quick: bool) -> None:
    print("## 1. RMSE vs T (event level, k=1, eps=1, auto method; measured vs predicted)")
    exps = range(6, 11) if quick else range(6, 15)
    rng = np.random.default_rng(1)
    rows = []
    series: dict[str, list[tuple[int, float]]] = {}
    for e in exps:
        horizon = 2**e
        item, times = make_log(rng, 20 * horizon, horizon, 2 * horizon)
        for fam in ("cumulative", "rolling", "all"):
            for method in (("auto",) if fam != "rolling" else ("auto", "blocks")):
                reps = 3 if fam == "all" else 5
                nq = 300 if fam == "all" else 1000
                rm, pr, chosen = measured_rmse(item, times, horizon, fam, 1, "event", method,
                                               reps, nq, e)
                name = f"{fam}/{method}"
                series.setdefault(name, []).append((horizon, rm))
                rows.append((horizon, name, chosen, f"{rm:.1f}", f"{pr:.1f}"))
    table(rows, ("T", "family/method", "chosen", "RMSE", "predicted"))
    rows = []
    for name, pts in series.items():
        lt = np.log([math.log2(t) for t, _ in pts])
        lr = np.log([r for _, r in pts])
        slope = float(np.polyfit(lt, lr, 1)[0])
        expect = {"cumulative/auto": "1.5 (log^1.5 T)", "rolling/auto": "0 (per-window, W only)",
                  "rolling/blocks": "0 (log^1.5 W)", "all/auto": "3 (log^3 T)"}[name]
        rows.append((name, f"{slope:.2f}", expect))
    table(rows, ("series", "slope d log RMSE / d log log2 T", "polylog prediction"))


def bench_vs_k(quick: bool) -> None:
    print("## 2. RMSE vs k (event level, T=365, eps=1, auto)")
    horizon = 365
    rng = np.random.default_rng(2)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for k in (1, 2, 4, 8):
        row = [k]
        for fam in ("cumulative", "rolling", "all"):
            rm, _pr, chosen = measured_rmse(item, times, horizon, fam, k, "event", "auto",
                                           2 if quick else 4, 300, 10 + k)
            row += [f"{rm:.0f} ({chosen})"]
        rows.append(tuple(row))
    table(rows, ("k", "cumulative", "fixed W=7", "all windows"))


BASELINES = {
    "cumulative": ("simple", "tree", "per_query"),
    "rolling": ("blocks", "single", "per_query"),
    "all": ("tree2d", "per_start", "per_query"),
}


def bench_baselines(quick: bool) -> None:
    print("## 3. Against simple baselines on the same data (T=365, eps=1)")
    print("   per_query = independent noise per window with composition (a), (c);"
          " per_start = one tree per start (b)")
    horizon = 365
    rng = np.random.default_rng(3)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for level in ("event", "item"):
        for k in ((1, 4) if not quick else (1,)):
            for fam, strats in BASELINES.items():
                res = {}
                for s in strats:
                    if level == "item" and s in ("single", "tree2d"):
                        continue
                    res[s] = measured_rmse(item, times, horizon, fam, k, level, s,
                                           2 if quick else 3, 300, 7)[0]
                auto, _, chosen = measured_rmse(item, times, horizon, fam, k, level, "auto",
                                                2 if quick else 3, 300, 7)
                best = min(res.values())
                rows.append((level, k, fam, " ".join(f"{s}={v:.0f}" for s, v in res.items()),
                             f"{auto:.0f} ({chosen})", f"{auto / best:.2f}",
                             f"{res['per_query'] / auto:.1f}x"))
    table(rows, ("level", "k", "family", "methods (RMSE)", "auto", "auto/best",
                 "per-window/auto"))


def bench_approx(quick: bool) -> None:
    print("## 3b. (eps, delta) = (1, 1e-6): zCDP with discrete Gaussian vs pure eps = 1 (T=365)")
    horizon = 365
    rng = np.random.default_rng(5)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for level in ("event", "item"):
        for fam in ("cumulative", "rolling", "all"):
            pure = measured_rmse(item, times, horizon, fam, 1, level, "auto", 2, 300, 9)
            appr = measured_rmse(item, times, horizon, fam, 1, level, "auto", 2, 300, 9,
                                 delta=1e-6)
            rows.append((level, fam, f"{pure[0]:.0f} ({pure[2]})", f"{appr[0]:.0f} ({appr[2]})",
                         f"{pure[0] / appr[0]:.1f}x"))
    table(rows, ("level", "family", "pure eps=1 (auto)", "eps=1, delta=1e-6 (auto)",
                 "pure/approx"))


def _counter_structures(horizon: int, eps: float, unit: str) -> dict:
    """Every cumulative structure for (T, ε, unit), and the one ``auto`` keeps."""
    from fractions import Fraction

    from dpfreq.windows.params import PlanRequest
    from dpfreq.windows.structures.base import build_structure
    from dpfreq.windows.structures.chooser import make_plan

    e = Fraction(eps).limit_denominator(10**6)
    out = {"simple": build_structure("cumulative", "simple", 1, horizon, unit, e, 0.0),
           "binary tree": build_structure("cumulative", "tree", 1, horizon, unit, e, 0.0,
                                          branching=2, top=True),
           "per_query": build_structure("cumulative", "per_query", 1, horizon, unit, e, 0.0)}
    plan = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, eps, 0.0, "auto", False))
    best_tree = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, eps, 0.0,
                          {"cumulative": "tree"}, False)).structures[("cumulative", 1)]
    out[f"tree B={best_tree.branching}{'+root' if best_tree.top else ''}"] = best_tree
    out["auto"] = plan.structures[("cumulative", 1)]
    return out


def _noise_rmse(s, keys: int) -> float:
    """Measured RMSE of the cumulative curve's noise over ``keys`` independent keys."""
    ts = np.arange(1, s.horizon + 1)
    total = 0.0
    for i in range(keys):
        s.attach(i.to_bytes(4, "little") * 8, ("bench", i))
        total += float(np.mean(np.asarray(s.noise(np.ones_like(ts), ts), dtype=float) ** 2))
    return math.sqrt(total / keys)


def issue_rmse(quick: bool) -> list[float]:
    """Cumulative reach RMSE per seed on the issue's log: 200k items, T = 30, item level,
    ε = 1/3, k = 1 (uses only APIs every version has)."""
    rng = np.random.default_rng(34)
    n_items = 20_000 if quick else 200_000
    item = np.repeat(np.arange(n_items), 3)
    times = rng.integers(1, 31, size=item.size)
    out = []
    for seed in range(8):
        rel = release_window_counts((item, times), horizon=30, epsilon=1 / 3, unit="item",
                                    k_values=[1], windows=["cumulative"], rng=seed)
        _label, s = next(iter(rel._state.structures.items()))
        ts = np.arange(1, 31)
        exact = rel._state.exact(s, np.ones_like(ts), ts)
        err = np.asarray(rel.value["cumulative"][1], dtype=float) - exact
        out.append(float(np.mean(err**2)))
    return out


def _delta_structures(horizon: int, eps: float, unit: str, delta: float) -> dict:
    """The best pure-ε structure, the zCDP ones (Gaussian simple counter and tree, the
    square-root factorization) and the one ``auto`` keeps, for (T, ε, δ, unit)."""
    from fractions import Fraction

    from dpfreq.accounting import zcdp_rho
    from dpfreq.windows.params import PlanRequest
    from dpfreq.windows.structures.base import build_structure
    from dpfreq.windows.structures.chooser import make_plan

    e, rho = Fraction(eps).limit_denominator(10**6), zcdp_rho(eps, delta)
    out = {"best pure": make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, eps, 0.0,
                                              "auto", False)).structures[("cumulative", 1)]}
    for name in ("simple", "tree", "factorization"):
        plan = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, eps, delta,
                         {"cumulative": name}, False))
        s = plan.structures[("cumulative", 1)]
        if s.noise_kind != "gaussian":  # the forced plan kept pure ε: build the Gaussian one
            s = build_structure("cumulative", name, 1, horizon, unit, e, delta, rho=rho,
                                noise_kind="gaussian")
        out[f"{name}/gaussian"] = s
    out["auto"] = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, eps, delta, "auto",
                            False)).structures[("cumulative", 1)]
    return out


def bench_counters_delta(quick: bool, delta: float = 1e-3) -> None:
    """δ > 0: zCDP with discrete Gaussian noise competes, the factorization among it."""
    print(f"## 5b. Cumulative counters with delta={delta:g}: predicted RMSE (factorization "
          "measured on keyed noise in brackets)")
    rows = []
    for horizon in (7, 30, 90, 365, 4096):
        keys = 10 if horizon == 4096 else (50 if quick else 200)
        for eps in (0.1, 1.0):
            for unit in ("item", "event"):
                structs = _delta_structures(horizon, eps, unit, delta)
                pred = {name: math.sqrt(s.mean_mse()) for name, s in structs.items()}
                best = min(v for name, v in pred.items() if name != "auto")
                fac = _noise_rmse(structs["factorization/gaussian"], keys)
                cells = " ".join(f"{name}={v:.3g}" for name, v in pred.items() if name != "auto")
                auto = structs["auto"]
                rows.append((horizon, eps, unit, cells, f"{fac:.3g}",
                             f"{pred['auto']:.3g} ({auto.method}/{auto.noise_kind})",
                             f"{pred['auto'] / best:.3f}"))
    table(rows, ("T", "eps", "unit", "predicted RMSE", "factorization measured", "auto",
                 "auto/best"))


def bench_counters(quick: bool, baseline: str | None = None, plot: str | None = None) -> None:
    print("## 5. Cumulative counters: RMSE of every structure and of auto (k=1; measured on "
          "keyed noise; predicted in brackets)")
    rows = []
    for horizon in (7, 30, 90, 365, 4096):
        keys = 20 if horizon == 4096 else (100 if quick else 400)
        for eps in (0.1, 1.0):
            for unit in ("item", "event"):
                structs = _counter_structures(horizon, eps, unit)
                meas = {name: _noise_rmse(s, keys) for name, s in structs.items()}
                best = min(v for name, v in meas.items() if name != "auto")
                cells = " ".join(f"{name}={meas[name]:.3g}({math.sqrt(s.mean_mse()):.3g})"
                                 for name, s in structs.items() if name != "auto")
                auto = structs["auto"]
                b = f" B={auto.branching}" if auto.method == "tree" else ""
                rows.append((horizon, eps, unit, cells, f"{meas['auto']:.3g} ({auto.method}"
                             f"{b})", f"{meas['auto'] / best:.3f}"))
    table(rows, ("T", "eps", "unit", "structures: measured(predicted) RMSE", "auto",
                 "auto/best"))
    bench_counters_delta(quick)
    new = issue_rmse(quick)
    print("   issue setting (T=30, item, eps=1/3, 8 seeds, releases on the log): "
          f"RMSE {math.sqrt(np.mean(new)):.2f}")
    if baseline:
        old = _baseline_json(baseline, quick, "--issue-json")
        print(f"   library at {baseline}, same run: RMSE {math.sqrt(np.mean(old)):.2f}; "
              f"ratio new/old {math.sqrt(np.mean(new) / np.mean(old)):.3f}")
    print()
    if plot:
        _plot_counters(plot)


def _plot_counters(path: str) -> None:
    """Predicted RMSE (exact closed forms) against T of each structure, item level, ε = 1:
    pure ε-DP (left) and with δ = 1e-3, where zCDP structures compete (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [4, 7, 12, 20, 30, 50, 90, 150, 250, 365, 600, 1000, 2048, 4096]
    panels: list[dict[str, list[float]]] = [{}, {}]
    for t in ts:
        for name, s in _counter_structures(t, 1.0, "item").items():
            key = "best layered tree" if name.startswith("tree B=") else name
            panels[0].setdefault(key, []).append(math.sqrt(s.mean_mse()))
        for name, s in _delta_structures(t, 1.0, "item", 1e-3).items():
            panels[1].setdefault(name, []).append(math.sqrt(s.mean_mse()))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100, sharey=True)
    titles = ("pure epsilon = 1", "epsilon = 1, delta = 1e-3")
    for ax, curves, title in zip(axes, panels, titles, strict=True):
        for name, ys in curves.items():
            ax.plot(ts, ys, marker="o" if name != "auto" else None, ms=3,
                    lw=3 if name == "auto" else 1.2, alpha=0.5 if name == "auto" else 1.0,
                    label=name)
        ax.set(xscale="log", yscale="log", xlabel="T (periods)", title=title)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("predicted RMSE (cumulative reach, item level)")
    fig.tight_layout()
    fig.savefig(path)
    print(f"   wrote {path}")


def _ingest(item, times, horizon):
    """What the release runs to read and bucket an in-memory log, in this library version
    (the --baseline-rev run imports an older one)."""
    try:
        from dpfreq.engines import SummaryRequest, get_engine
        from dpfreq.windows.data.events import engine_source
        from dpfreq.windows.params import TimeAxis
    except ImportError:  # revisions before the memory-engine path
        from dpfreq.windows._log import _array_log

        from dpfreq.engines._common import bucket_events
        from dpfreq.windows.api import _Axis

        axis = _Axis(horizon)
        return lambda: bucket_events(*_array_log((item, times), None, None, axis),
                                     axis.buckets(), drop=False)
    axis = TimeAxis(horizon)

    def run():
        src, it, tm = engine_source((item, times), None, None, axis)
        return get_engine(None, src).summaries(src, SummaryRequest(it, tm, axis.buckets(), ()))

    return run


def speed_rows(quick: bool) -> list[tuple[str, float, float, str]]:
    """(step, seconds, rate, unit) of every speed step; uses only APIs every version has."""
    n = 10**6 if quick else 10**7
    horizon = 2**16
    rng = np.random.default_rng(4)
    item, times = make_log(rng, n, horizon, n // 10)
    rows = []

    def step(name: str, fn, count: float, unit: str, repeat: int = 1):
        """Best of ``repeat`` timings (1 for steps whose cost changes when repeated)."""
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
        rows.append((name, best, count / best, unit))
        return out

    step("ingest from memory (item codes, range check, sort by (item, period))",
         _ingest(item, times, horizon), n, "events/s", repeat=3)
    rel = step(f"full release cumulative + rolling W=7 ({n:.0e} events: ingest, reductions, "
               "noise, curves)",
               lambda: _event_release((item, times), horizon=horizon, epsilon=1.0,
                                      k_values=[1], windows=["cumulative", 7], rng=1),
               n, "events/s")
    q = rng.integers(1, horizon + 1, size=10**5)
    step("1e5 random cumulative queries", lambda: rel.cumulative(q, 1), 1e5, "queries/s",
         repeat=3)
    step("1e5 random rolling-window queries", lambda: rel.rolling(q, 1), 1e5, "queries/s",
         repeat=3)
    n2 = n // 10
    rel2 = step(f"release all windows ({n2:.0e} events, 2d points + merge-sort counter)",
                lambda: _event_release((item[:n2], times[:n2]), horizon=horizon,
                                       epsilon=1.0, k_values=[1], windows=["all"], rng=1),
                n2, "events/s")
    for nq in (10**4, 10**5):  # each on a fresh release: nothing of an earlier ask is kept
        fresh = _event_release((item[:n2], times[:n2]), horizon=horizon, epsilon=1.0,
                               k_values=[1], windows=["all"], rng=1)
        a = rng.integers(1, horizon + 1, size=(2, nq))
        t1, t2 = a.min(axis=0), a.max(axis=0)
        step(f"{nq:.0e} random arbitrary windows, first ask of a fresh release "
             "(T = 2^16: exact counts, node noise, intervals)",
             lambda r=fresh, a1=t1, a2=t2: r.window(a1, a2, 1), nq, "queries/s")
        step(f"   baseline: exact counts only of the same {nq:.0e} windows",
             lambda r=fresh, a1=t1, a2=t2: _exact_counts(r, a1, a2), nq, "queries/s",
             repeat=3)
        rows.append((f"   first ask time / exact-count time ({nq:.0e} windows)", 0.0,
                     rows[-2][1] / rows[-1][1], "ratio"))
    step(f"{nq:.0e} random arbitrary windows, asked again (upper-level tables kept)",
         lambda: fresh.window(t1[::-1], t2[::-1], 1), nq, "queries/s", repeat=3)
    b = rng.integers(1, horizon + 1, size=(2, nq))
    step(f"{nq:.0e} new random arbitrary windows (upper-level tables kept)",
         lambda: fresh.window(b.min(axis=0), b.max(axis=0), 1), nq, "queries/s")
    ns = 200
    step(f"{ns} arbitrary windows one call each (per-query API)",
         lambda: [rel2.window(int(x), int(y), 1) for x, y in zip(t1[:ns], t2[:ns],
                                                                  strict=True)],
         ns, "queries/s")
    return rows


def _exact_counts(rel, t1, t2):
    """The exact counts behind the answers of ``rel.window(t1, t2, 1)`` (no noise, no
    intervals): the baseline of the first-ask rows; None for library versions without it."""
    try:
        st = rel._state
        return st.exact(st.structures_for(1)[0], np.asarray(t1), np.asarray(t2))
    except (AttributeError, TypeError):
        return None


def _baseline_rows(rev: str, quick: bool) -> list[tuple[str, float, float, str]]:
    """Run :func:`speed_rows` on the library source of git revision ``rev`` (same machine, same
    run), through a subprocess with that source first on the path."""
    return [tuple(r) for r in _baseline_json(rev, quick, "--speed-json")]


def _baseline_json(rev: str, quick: bool, flag: str):
    """The JSON this script prints with ``flag`` when run on the library of revision ``rev``."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], check=True,
                              capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=arch, check=True)
        env = dict(os.environ, PYTHONPATH=str(Path(tmp) / "src"))
        cmd = [sys.executable, str(Path(__file__).resolve()), flag]
        if quick:
            cmd.append("--quick")
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _rate(rate: float, unit: str) -> str:
    return f"{rate:.2f}x" if unit == "ratio" else f"{rate:.2e} {unit}"


def bench_speed(quick: bool, baseline: str | None = None) -> None:
    n = 10**6 if quick else 10**7
    print(f"## 4. Speed: {n:.0e} events over T = 2^16 periods"
          + (" (--quick: scaled down from 1e7)" if quick else ""))
    base = _baseline_rows(baseline, quick) if baseline else None
    rows = speed_rows(quick)
    if base is None:
        table([(name, "" if unit == "ratio" else f"{dt:.3f} s", _rate(rate, unit))
               for name, dt, rate, unit in rows], ("step", "time", "rate"))
        return
    print(f"   baseline = library at git revision {baseline}, measured in this run")
    out = []
    for (name, _dt, rate, unit), (_, _bdt, brate, _) in zip(rows, base, strict=True):
        out.append((name, _rate(brate, unit), _rate(rate, unit),
                    "" if unit == "ratio" else f"{rate / brate:.2f}x"))
    table(out, ("step", "baseline rate", "rate", "speed-up"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (minutes, not tens)")
    ap.add_argument("--only", choices=["t", "k", "baselines", "approx", "counters", "speed"],
                    default=None)
    ap.add_argument("--plot", default=None, metavar="PNG",
                    help="counters: write the predicted RMSE against T of each structure")
    ap.add_argument("--baseline-rev", default=None, metavar="REV",
                    help="also time the speed steps with the library of this git revision, in "
                         "the same run, and print speed-up ratios")
    ap.add_argument("--speed-json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--issue-json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.speed_json or args.issue_json:  # internal: the baseline subprocess
        import json

        print(json.dumps(speed_rows(args.quick) if args.speed_json else issue_rmse(args.quick)))
        return
    parts = {"t": bench_vs_t, "k": bench_vs_k, "baselines": bench_baselines,
             "approx": bench_approx, "counters": bench_counters, "speed": bench_speed}
    for name, fn in parts.items():
        if args.only in (None, name):
            t0 = time.perf_counter()
            if name == "speed":
                bench_speed(args.quick, args.baseline_rev)
            elif name == "counters":
                bench_counters(args.quick, args.baseline_rev, args.plot)
            else:
                fn(args.quick)
            print(f"   ({name}: {time.perf_counter() - t0:.1f} s)\n")


if __name__ == "__main__":
    main()
