"""Every grouped release says its intervals cover the capped data (issue 47, honest capping)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.cli.main import cli, main
from dpfreq.grouped.capping import capping_statement
from dpfreq.profile import release_profile
from dpfreq.windows import release_window_counts

LOG = {"user": [1, 1, 2, 3, 1, 2], "site": ["a", "b", "a", "b", "c", "c"],
       "day": [1, 2, 2, 1, 1, 2]}


def _releases() -> dict[str, tuple[object, int | None]]:
    prof = release_profile(LOG, item="user", group="site", groups=["a", "b", "c"],
                           max_groups_per_item=2, domain_size=10, max_count=3, epsilon=1.0,
                           unit="item", rng=0)
    win = release_window_counts(LOG, item="user", time="day", horizon=2, epsilon=1.0,
                                unit="item", k_values=[1], group="site", groups=["a", "b"],
                                max_groups_per_item=2, rng=0, windows=["cumulative"])
    win_event = release_window_counts(LOG, item="user", time="day", horizon=2, epsilon=1.0,
                                      unit="event", k_values=[1], group="site",
                                      groups=["a", "b"], rng=0, windows=["cumulative"])
    anon = release_anonymized_histogram(LOG, item="user", group="site", groups=["a", "b"],
                                        epsilon=1.0, unit="event", rng=0)
    return {"profile": (prof, 2), "windows": (win, 2), "windows-event": (win_event, None),
            "anonymized": (anon, None)}


@pytest.mark.parametrize("kind", ["profile", "windows", "windows-event", "anonymized"])
def test_every_statement_says_what_the_intervals_cover(kind: str) -> None:
    rel, m = _releases()[kind]
    sentence = capping_statement(m)
    assert rel.mechanism_params["coverage"] == sentence  # type: ignore[attr-defined]
    assert rel.simultaneous.description.endswith(f" Coverage: {sentence}.")  # type: ignore
    for name in rel:  # type: ignore[attr-defined]
        group = rel[name]  # type: ignore[index]
        assert group.error.description.endswith(f" Coverage: {sentence}.")
        assert group.mechanism_params["coverage"] == sentence
    text = rel.to_json()  # type: ignore[attr-defined]
    assert ("cover the capped data, not the data" in text) == (m is not None)


def test_capped_sentence_says_biased_low_and_what_to_do() -> None:
    s = capping_statement(3)
    for words in ("capped data, not the data", "at most 3", "biased low",
                  "max_groups_per_item", "capping_epsilon"):
        assert words in s


def test_cli_grouped_output_prints_coverage_once(tmp_path: object) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "log.csv"
    path.write_text("user,site\n" + "".join(f"{u},{s}\n" for u, s in
                                             zip(LOG["user"], LOG["site"], strict=True)))
    groups = pathlib.Path(str(tmp_path)) / "groups.txt"
    groups.write_text("a\nb\nc\n")
    out = CliRunner().invoke(cli, [
        "profile", str(path), "--item", "user", "--group", "site", "--groups", str(groups),
        "--max-groups-per-item", "2", "--domain-size", "10", "--max-count", "3",
        "--epsilon", "1", "--unit", "item", "--seed", "0"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if "cover the capped data" in line]
    cli_text = capping_statement(2).replace("max_groups_per_item", "--max-groups-per-item")
    cli_text = cli_text.replace("(capping_epsilon=)", "(--capping-epsilon)")  # CLI spelling
    assert lines == [f"# coverage: {cli_text}"]


def test_cli_capping_epsilon(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "log.csv"
    rows = [(u, f"c{(u * 7 + k) % 5}", 1 + k) for u in range(60) for k in range(4)]
    path.write_text("user,site,day\n" + "".join(f"{u},{s},{d}\n" for u, s, d in rows))
    groups = pathlib.Path(str(tmp_path)) / "groups.txt"
    groups.write_text("".join(f"c{k}\n" for k in range(5)))
    common = ["--item", "user", "--group", "site", "--groups", str(groups),  # nothing dropped
              "--max-groups-per-item", "4", "--epsilon", "2", "--unit", "item", "--seed", "0"]
    out = CliRunner().invoke(cli, ["profile", str(path), *common, "--domain-size", "100",
                                   "--max-count", "3", "--capping-epsilon", "0.5"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("# dropped by the cap")]
    assert len(lines) == 1
    assert "ε_c = 0.5" in lines[0]
    with pytest.raises(SystemExit) as info:
        main(["reach", str(path), "--time", "day", "--horizon", "4", "--k", "1",
              "--windows", "total", *common, "--capping-epsilon", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dpfreq: error: --capping-epsilon of dpfreq reach must be left out "
                              "or a number in (0, --epsilon 2)")
