"""Every release's ``plot()`` draws something readable (issue 50, item 3).

Each figure is rendered to a PNG (Agg) and checked: every axes of the figure holds artists and
has labelled axes (no empty panel), the title states ε, the unit and the confidence, a figure of
groups draws every group or says which it left out, and nothing warns (pytest runs with
warnings as errors, so matplotlib's "No artists with labels found to put in legend" fails a
test).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest

from dpfreq import (
    estimate_properties,
    release_anonymized_histogram,
    release_profile,
    release_window_counts,
    simulate_longitudinal,
)
from dpfreq.plotting import save_figure

matplotlib.use("Agg")


def _figure(obj: Any) -> Any:
    return obj if hasattr(obj, "savefig") else obj.figure


def _titles(fig: Any) -> str:
    sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return " ".join([sup, *(ax.get_title() for ax in fig.axes)])


def check_figure(obj: Any, tmp_path: Path, *, epsilon: str, unit: str, confidence: str = "95%"
                 ) -> Any:
    """Render ``obj`` (an axes or a figure) and check what every figure must hold."""
    fig = _figure(obj)
    fig.canvas.draw()
    assert fig.axes, "no axes"
    for ax in fig.axes:
        assert ax.get_visible()
        assert ax.has_data() or ax.containers, f"empty axes {ax.get_title()!r}"
        assert ax.get_xlabel().strip(), "x axis without a label"
        assert ax.get_ylabel().strip() or ax.get_yticklabels(), "y axis without labels"
    title = _titles(fig)
    for needed in (f"ε={epsilon}", f"unit={unit}", confidence):
        assert needed in title, (needed, title)
    out = save_figure(obj, tmp_path / "figure.png")
    assert out.stat().st_size > 1000
    return fig


def _log(rng: np.random.Generator, n: int = 4000, groups: int = 5) -> dict[str, Any]:
    user = rng.integers(0, 600, n)
    # groups of very different sizes: group g has weight 2^-g
    weights = 0.5 ** np.arange(groups)
    group = rng.choice(groups, size=n, p=weights / weights.sum())
    return {"user": user, "day": rng.integers(1, 11, n),
            "campaign": np.array([f"c{g}" for g in group])}


WINDOW_CASES = [["cumulative"], ["total"], [3], ["all"], ["cumulative", 3, "total"]]


@pytest.mark.parametrize("windows", WINDOW_CASES, ids=str)
def test_window_release_plot(windows: list[Any], rng: np.random.Generator,
                             tmp_path: Path) -> None:
    log = _log(rng)
    rel = release_window_counts(log, item="user", time="day", horizon=10, epsilon=2.0,
                                unit="item", k_values=[1, 2], windows=windows, rng=1)
    fig = check_figure(rel.plot(), tmp_path, epsilon="2", unit="item")
    ax = fig.axes[0]
    if windows == ["total"]:  # one bar per k, each with its interval
        assert [t.get_text() for t in ax.get_yticklabels()] == ["1+ reach", "2+ reach"]
        assert len(ax.patches) == 2
    else:  # a curve per (family, k): lines with their bands
        assert len(ax.get_lines()) >= 2
        assert ax.get_legend() is not None


def test_window_release_plot_dated(rng: np.random.Generator, tmp_path: Path) -> None:
    log = _log(rng)
    log["ts"] = np.datetime64("2026-03-01T12:00") + (log.pop("day") - 1) * np.timedelta64(1, "D")
    rel = release_window_counts(log, item="user", time="ts", start="2026-03-01",
                                end="2026-03-10", period="1d", timezone="America/New_York",
                                epsilon=1.0, unit="event", k_values=[1], windows=["cumulative"],
                                rng=1)
    fig = check_figure(rel.plot(), tmp_path, epsilon="1", unit="event")
    assert "America/New_York" in fig.axes[0].get_xlabel()


@pytest.mark.parametrize("windows", WINDOW_CASES, ids=str)
def test_grouped_window_plot(windows: list[Any], rng: np.random.Generator,
                             tmp_path: Path) -> None:
    log = _log(rng, groups=5)
    names = [f"c{g}" for g in range(5)]
    rel = release_window_counts(log, item="user", time="day", horizon=10, epsilon=2.0,
                                unit="item", k_values=[1, 2], windows=windows, rng=1,
                                group="campaign", groups=names, max_groups_per_item=2)
    fig = check_figure(rel.plot(), tmp_path, epsilon="2", unit="item")
    assert "per group" in _titles(fig)
    assert "all 5 groups" in _titles(fig)
    if windows == ["total"]:  # one bar chart: every group, largest released total first
        (ax,) = fig.axes
        ticks = [t.get_text().rstrip(" *") for t in ax.get_yticklabels()]
        assert sorted(ticks) == names
        sizes = [float(np.asarray(rel[g].value["total"][1])[0]) for g in ticks]
        assert sizes == sorted(sizes, reverse=True)
        assert len(ax.patches) == 5 * 2  # a bar per group and k
    else:
        assert len(fig.axes) == 5
        assert {ax.get_title().split(" = ")[1].split(" ")[0] for ax in fig.axes} == set(names)


def test_grouped_window_plot_says_which_groups_it_leaves_out(rng: np.random.Generator,
                                                            tmp_path: Path) -> None:
    log = _log(rng, n=3000, groups=7)
    names = [f"c{g}" for g in range(7)]
    rel = release_window_counts(log, item="user", time="day", horizon=10, epsilon=2.0,
                                unit="item", k_values=[1], windows=["cumulative"], rng=1,
                                group="campaign", groups=names, max_groups_per_item=2)
    fig = check_figure(rel.plot(max_panels=4), tmp_path, epsilon="2", unit="item")
    assert len(fig.axes) == 4  # no empty panel, no silently dropped group
    assert "the 4 of 7 groups with the largest released reach" in _titles(fig)
    assert "plot(max_panels=7)" in _titles(fig)
    tot = release_window_counts(log, item="user", time="day", horizon=10, epsilon=2.0,
                                unit="item", k_values=[1], windows=["total"], rng=1,
                                group="campaign", groups=names, max_groups_per_item=2)
    fig = check_figure(tot.plot(max_bars=3), tmp_path, epsilon="2", unit="item")
    assert len(fig.axes[0].get_yticklabels()) == 3
    assert "the 3 of 7 groups" in _titles(fig)


def test_grouped_window_plot_marks_groups_smaller_than_their_noise(
        rng: np.random.Generator, tmp_path: Path) -> None:
    """A group of one item: its interval reaches 0 unless its noise exceeds the interval's
    half-width less one item, which at confidence 1 − 10^-6 happens with probability below
    10^-6 (the assertion's false-alarm rate), so its error statement is vacuous and its bar is
    marked."""
    log = _log(rng, n=2000, groups=2)
    log = {k: np.concatenate([v, v[:1]]) for k, v in log.items()}
    log["campaign"][-1] = "tiny"
    log["user"][-1] = 10_000
    rel = release_window_counts(log, item="user", time="day", horizon=10, epsilon=1.0,
                                unit="item", k_values=[1], windows=["total"], rng=1,
                                group="campaign", groups=["c0", "c1", "tiny"],
                                max_groups_per_item=2, confidence=1 - 1e-6)
    assert rel["tiny"].error.vacuous
    assert "vacuous" in rel["tiny"].error.description
    assert not rel["c0"].error.vacuous
    fig = check_figure(rel.plot(), tmp_path, epsilon="1", unit="item", confidence="99.9999%")
    assert "tiny *" in [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "smaller than its noise" in fig.axes[0].get_ylabel()


def test_profile_plots(rng: np.random.Generator, tmp_path: Path) -> None:
    log = _log(rng)
    rel = release_profile(log, item="user", domain_size=1000, max_count=8, epsilon=1.0,
                          unit="item", rng=1)
    fig = check_figure(rel.plot(), tmp_path, epsilon="1", unit="item")
    ax = fig.axes[0]
    assert ax.containers  # per-class intervals as error bars
    assert all(float(t).is_integer() for t in ax.get_xticks())  # counts: integer ticks
    fig = check_figure(rel.plot(from_count=1, log=True), tmp_path, epsilon="1", unit="item")
    assert "t >= 1" in fig.axes[0].get_xlabel()
    sketch = release_profile(rng.integers(0, 6, 400), domain_size=400, max_count=5,
                             epsilon=1.0, unit="event", method="fft", rng=1)
    check_figure(sketch.plot(), tmp_path, epsilon="1", unit="event", confidence="")


def test_grouped_profile_plot(rng: np.random.Generator, tmp_path: Path) -> None:
    """Issue 50: the per-campaign profile plot was one bar (the t = 0 share) per panel, without
    intervals or axis labels."""
    log = _log(rng)
    names = [f"c{g}" for g in range(5)]
    rel = release_profile(log, item="user", domain_size=1000, max_count=6, epsilon=1.0,
                          unit="item", group="campaign", groups=names, max_groups_per_item=2,
                          rng=1)
    fig = check_figure(rel.plot(), tmp_path, epsilon="1", unit="item")
    assert len(fig.axes) == 5
    for ax in fig.axes:
        assert ax.containers  # intervals
        assert min(ax.get_xlim()) > 0  # t >= 1 only
        assert "count t" in ax.get_xlabel()
    assert "all 5 groups" in _titles(fig)
    fig = check_figure(rel.plot(max_panels=2), tmp_path, epsilon="1", unit="item")
    assert len(fig.axes) == 2
    assert "the 2 of 5 groups with the most items released" in _titles(fig)


def test_anonymized_plots(rng: np.random.Generator, tmp_path: Path) -> None:
    log = _log(rng)
    rel = release_anonymized_histogram(log, item="user", epsilon=1.0, unit="event", rng=1)
    # the band's own confidence (the share of simulated runs within it, at least 95%)
    band = f"{rel.items_at_least_confidence * 100:.6g}% band"
    check_figure(rel.plot(), tmp_path, epsilon="1", unit="event", confidence=band)
    props = estimate_properties(rel)
    check_figure(props["entropy"].plot(), tmp_path, epsilon="1", unit="event", confidence="")
    grouped = release_anonymized_histogram(log, item="user", epsilon=1.0, unit="event", rng=1,
                                           group="campaign",
                                           groups=[f"c{g}" for g in range(5)])
    fig = check_figure(grouped.plot(), tmp_path, epsilon="1", unit="event", confidence="")
    assert len(fig.axes) == 5


def test_longitudinal_plot(tmp_path: Path) -> None:
    sim = simulate_longitudinal(devices=500, horizon=20, max_changes=2, epsilon=1.0,
                                method="auto", start="2026-01-05", period="1d", rng=1)
    fig = check_figure(sim.plot(), tmp_path, epsilon="1", unit="device")
    assert "500" in fig.axes[0].get_ylabel()
