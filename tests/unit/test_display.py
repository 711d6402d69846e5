"""Short reprs, notebook tables and integer columns of every release and result class."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest

from dpfreq.anonymized import estimate_properties, release_anonymized_histogram
from dpfreq.longitudinal import simulate_longitudinal
from dpfreq.profile import release_profile
from dpfreq.release import Release, whole_number_columns
from dpfreq.windows import release_window_counts

EVENTS = {"user": np.array([f"u{i % 70}" for i in range(900)])}


def _profile():
    return release_profile(EVENTS, item="user", domain_size=5_000, max_count=40, epsilon=2.0,
                           unit="item", rng=11)


def _anonymized():
    return release_anonymized_histogram({1: 400, 2: 120, 3: 50, 30: 9, 700: 1}, epsilon=1.0,
                                        unit="event", rng=0)


def _windows():
    days = np.arange(1, 61)
    return release_window_counts((days % 37, days % 30 + 1), horizon=30, epsilon=1.0,
                                 unit="event", k_values=[1, 2, 3], windows=["cumulative", 7],
                                 rng=0)


def _longitudinal():
    return simulate_longitudinal(devices=500, horizon=40, max_changes=2, epsilon=2.0,
                                 method="auto", rng=1)


def _grouped():
    df = pd.DataFrame({"u": np.arange(300) % 40, "g": np.where(np.arange(300) % 3, "a", "b")})
    return release_profile(df, item="u", group="g", groups=["a", "b", "c"],
                           max_groups_per_item=2, domain_size=100, max_count=30, epsilon=1.0,
                           unit="item", rng=2)


def _results():
    anonymized = _anonymized()
    windows = _windows()
    return {
        "profile": _profile(),
        "anonymized": anonymized,
        "property": estimate_properties(anonymized)["entropy"],
        "windows": windows,
        "answer": windows.window(3, 9, 2),
        "answers": windows.window(np.arange(1, 25), np.arange(7, 31), 1),
        "longitudinal": _longitudinal(),
        "grouped": _grouped(),
        "error": _profile().error,
    }


RESULTS = _results()


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_repr_is_a_few_short_lines(name):
    obj = RESULTS[name]
    text = repr(obj)
    lines = text.splitlines()
    assert lines[0] == type(obj).__name__
    assert 2 <= len(lines) <= 8, text
    assert max(len(line) for line in lines) <= 110, text
    assert "array([" not in text  # no numpy array dump
    assert str(obj) == text
    if isinstance(obj, Release) or name == "grouped":
        assert f"unit={obj.unit}" in text
        assert "ε=" in text
        assert obj.mechanism in text
        assert "confidence" in text


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_repr_html_is_a_small_escaped_table(name):
    obj = RESULTS[name]
    page = obj._repr_html_()
    assert page.startswith("<table>")
    assert page.endswith("</table>")
    assert page.count("<tr>") == len(repr(obj).splitlines()) - 1
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert all("<" not in cell for cell in cells)
    assert html.escape(type(obj).__name__) in page
    assert len(page) < 2_500


def test_window_answer_keeps_its_description_out_of_the_repr():
    answer = RESULTS["answer"]
    assert len(answer.description) > 300
    assert answer.description not in repr(answer)
    assert "[3, 9], k=2" in repr(answer)


def test_every_release_class_uses_the_short_repr():
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    classes = [c for c in subclasses(Release) if c.__module__.startswith("dpfreq.")]
    assert len(classes) >= 5
    for cls in classes:
        assert cls.__repr__ is Release.__repr__, cls


def test_to_pandas_gives_whole_number_counts_integer_dtypes():
    frame = RESULTS["anonymized"].to_pandas()
    for col in ("count", "items", "rank_first", "rank_last", "items_at_least", "lower", "upper"):
        assert frame[col].dtype == np.int64, col
    profile = RESULTS["profile"].to_pandas()  # direct: whole numbers of items
    assert profile["items"].dtype == np.int64
    assert profile["t"].dtype == np.int64
    windows = RESULTS["windows"].to_pandas()
    assert windows["k"].dtype == np.int64
    assert windows["start"].dtype == np.int64
    for col in ("estimate", "lower", "upper"):  # int64 where every entry is a whole number
        values = windows[col].to_numpy()
        assert (windows[col].dtype == np.int64) == bool(np.all(values == np.rint(values)))


def test_whole_number_columns_rule():
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, np.nan], "c": [1.5, 2.0],
                          "d": [1.0, np.inf], "e": [1.0, 2.0]})
    out = whole_number_columns(frame, ("a", "b", "c", "d", "missing"))
    assert out["a"].dtype == np.int64
    assert str(out["b"].dtype) == "Int64"
    assert out["b"].isna().tolist() == [False, True]
    assert out["c"].dtype == np.float64
    assert out["d"].dtype == np.float64
    assert out["e"].dtype == np.float64  # not a count column


def test_json_public_parameters_carry_no_binary_arithmetic_noise():
    # ε = 1.1 split 5 % / 95 %: 0.05·1.1 and 1.1 − 0.055 are 0.05500000000000001 and
    # 1.0450000000000002 in binary arithmetic.
    rel = release_anonymized_histogram({1: 40, 2: 12, 30: 1}, epsilon=1.1, unit="event", rng=0)
    assert rel.split != (0.055, 1.045, 0.0)  # the arithmetic noise is there
    doc = json.loads(rel.to_json())
    assert doc["split"] == [0.055, 1.045, 0.0]
    assert doc["epsilon"] == 1.1
    assert doc["value"]["counts"] == rel.counts.tolist()  # the release itself is untouched
    df = pd.DataFrame({"u": np.arange(60) % 20, "g": np.where(np.arange(60) % 2, "a", "b")})
    grouped = release_profile(df, item="u", group="g", groups=["a", "b"], max_groups_per_item=3,
                              domain_size=50, max_count=5, epsilon=0.3, unit="item", rng=2)
    assert grouped.mechanism_params["epsilon_per_group"] != 0.1
    assert json.loads(grouped.to_json())["mechanism_params"]["epsilon_per_group"] == 0.1


def test_json_keeps_estimates_and_intervals_exact():
    rel = RESULTS["profile"]
    doc = rel.to_dict()
    assert doc["value"] == rel.value.tolist()
    assert doc["error"]["lower"] == rel.error.lower.tolist()
    assert doc["error"]["value"] == rel.error.value.tolist()
