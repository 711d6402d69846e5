"""CLI tests of `dpfreq longitudinal` (in-process)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dpfreq.cli.longitudinal import command
from dpfreq.cli.main import main
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams, make_params
from dpfreq.longitudinal.enrolment import enrolled_per_order


def test_params_table(tmp_path) -> None:
    out = tmp_path / "p.json"
    res = CliRunner().invoke(
        command,
        [
            "params",
            "--horizon",
            "64",
            "--max-changes",
            "4",
            "--epsilon",
            "1",
            "--devices",
            "1000",
            "--method",
            "threshold",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "threshold" in res.output
    assert "futurerand" in res.output
    p = ProtocolParams.from_json(out.read_text())
    assert p.method == "threshold"


def test_simulate_json(tmp_path) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        command,
        [
            "simulate",
            "--devices",
            "2000",
            "--horizon",
            "32",
            "--max-changes",
            "3",
            "--epsilon",
            "1",
            "--method",
            "rr",
            "--seed",
            "1",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "rmse" in res.output
    data = json.loads(out.read_text())
    assert data["mechanism_params"]["method"] == "rr"
    assert len(data["value"]) == 32
    assert data["unit"] == "device"


def _reports_csv(tmp_path, p: ProtocolParams, n: int = 200) -> str:
    rows = ["device,order,interval,bit"]
    for u in range(n):
        c = LongitudinalClient(p, rng=u)
        for t in range(p.horizon):
            for r in c.step(int((u + t) % 5 == 0)):
                rows.append(f"{u},{r['order']},{r['interval']},{r['bit']}")
    path = tmp_path / "reports.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _devices_arg(rep: str, p) -> str:
    """``--devices``: every device of the reports file enrolled, counted per order."""
    arr = np.loadtxt(rep, delimiter=",", skiprows=1, dtype=np.int64)
    _, first = np.unique(arr[:, 0], return_index=True)
    return ",".join(map(str, np.bincount(arr[first, 1], minlength=p.orders)))


def test_aggregate_csv(tmp_path) -> None:
    p = make_params(horizon=8, max_changes=8, epsilon=1.0, method="rr")
    ppath = tmp_path / "params.json"
    ppath.write_text(p.to_json())
    rep = _reports_csv(tmp_path, p)
    res = CliRunner().invoke(command, ["aggregate", rep, "--params", str(ppath),
                                       "--devices", _devices_arg(rep, p)])
    assert res.exit_code == 0, res.output
    assert "unit of privacy: device" in res.output
    assert "# epsilon=1 " in res.output
    assert "# mechanism futurerand-longitudinal" in res.output


def test_aggregate_bad_rows(tmp_path, capsys) -> None:
    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    ppath = tmp_path / "params.json"
    ppath.write_text(p.to_json())
    bad = tmp_path / "bad.csv"
    bad.write_text("device,order,interval,bit\n1,0,1,1\n1,0,1,0\n")
    with pytest.raises(SystemExit) as e:
        main(["longitudinal", "aggregate", str(bad), "--params", str(ppath), "--devices",
              "9,9,9,9"])
    assert e.value.code == 2
    assert "duplicate" in capsys.readouterr().err
    bad.write_text("device,order,interval,bit\n1,0,9,1\n")
    with pytest.raises(SystemExit) as e:
        main(["longitudinal", "aggregate", str(bad), "--params", str(ppath), "--devices",
              "9,9,9,9"])
    assert e.value.code == 2
    assert "interval must be" in capsys.readouterr().err
    # a population beyond 2^53 (or an int64) is refused in one line, not an OverflowError
    for devices in ("99999999999999999999,1,1,1", f"{2**62},{2**62},1,1"):
        with pytest.raises(SystemExit) as e:
            main(["longitudinal", "aggregate", str(bad), "--params", str(ppath), "--devices",
                  devices])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "at most 2^53 in all" in err
        assert err.count("\n") == 1
    with pytest.raises(ValueError, match=r"^enrolled of enrolled_per_order must be 4 "):
        enrolled_per_order([10**20, 1, 1, 1], p)


def test_an_enrolment_csv_is_read_with_its_first_line_as_the_header(tmp_path) -> None:
    p = make_params(horizon=4, max_changes=1, epsilon=1.0, method="rr")
    (tmp_path / "e.csv").write_text("device,order\n81723,0\n90211,2\n")
    (tmp_path / "e.tsv").write_text("device\torder\nx\t1\n")
    assert enrolled_per_order(tmp_path / "e.csv", p).tolist() == [1, 0, 1]
    assert enrolled_per_order(tmp_path / "e.tsv", p).tolist() == [0, 1, 0]
    # headerless: never read as data, and the refusal quotes none of it
    (tmp_path / "h.csv").write_text("81723,0\n90211,2\n")
    with pytest.raises(ValueError, match="first line must name its columns") as err:
        enrolled_per_order(tmp_path / "h.csv", p)
    assert "81723" not in str(err.value)
    assert "90211" not in str(err.value)


def test_simulate_bad_epsilon(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(
            [
                "longitudinal",
                "simulate",
                "--devices",
                "10",
                "--horizon",
                "8",
                "--max-changes",
                "2",
                "--epsilon",
                "-1",
            ]
        )
    assert e.value.code == 2
    assert np.char.count(capsys.readouterr().err, "\n") >= 1


def test_file_path_matches_in_memory_aggregator(tmp_path) -> None:
    from dpfreq.longitudinal import LongitudinalAggregator, aggregate_reports_file

    p = make_params(horizon=8, max_changes=8, epsilon=1.0, method="rr")
    rep = _reports_csv(tmp_path, p, n=60)
    arr = np.loadtxt(rep, delimiter=",", skiprows=1, dtype=np.int64)
    agg = LongitudinalAggregator(p)
    devices, first = np.unique(arr[:, 0], return_index=True)
    agg.enrol(devices, arr[first, 1])
    agg.ingest(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], param_id=p.param_id)
    mem = agg.estimate(confidence=0.95)
    fil = aggregate_reports_file(rep, p, enrolled=agg.enrolled.tolist(), confidence=0.95)
    assert np.allclose(mem.value, fil.value)
    assert np.allclose(mem.sd, fil.sd)


def test_params_without_users_per_sqrt_n() -> None:
    res = CliRunner().invoke(
        command, ["params", "--horizon", "1000", "--max-changes", "16", "--epsilon", "1"]
    )
    assert res.exit_code == 0, res.output
    assert "max sd/√n" in res.output
    assert "auto (threshold)" in res.output
    assert "padded to 1024" in res.output


def test_params_bad_users(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["longitudinal", "params", "--horizon", "8", "--max-changes", "2", "--epsilon", "1",
              "--devices", "0"])
    assert e.value.code == 2
    assert "--devices" in capsys.readouterr().err


def test_simulate_plot(tmp_path) -> None:
    png = tmp_path / "sim.png"
    res = CliRunner().invoke(
        command,
        ["simulate", "--devices", "500", "--horizon", "16", "--max-changes", "2", "--epsilon", "1",
         "--seed", "3", "--plot", str(png)],
    )
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_aggregate_dropouts_json(tmp_path) -> None:
    p = make_params(horizon=8, max_changes=8, epsilon=1.0, method="rr")
    ppath = tmp_path / "params.json"
    ppath.write_text(p.to_json())
    rep = _reports_csv(tmp_path, p, n=40)
    out = tmp_path / "agg.json"
    res = CliRunner().invoke(
        command,
        ["aggregate", rep, "--params", str(ppath), "--devices", _devices_arg(rep, p), "--dropouts",
         "per-interval", "--json", str(out)],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["mechanism_params"]["dropouts"] == "per-interval"
    assert data["type"] == "LongitudinalEstimate"
    assert data["epsilon"] == 1.0


def test_per_order_sparsity_flags(tmp_path) -> None:
    out = tmp_path / "p.json"
    res = CliRunner().invoke(
        command,
        ["params", "--horizon", "16", "--max-changes", "6", "--epsilon", "1", "--devices", "100",
         "--per-order-sparsity", "--method", "threshold", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    p = ProtocolParams.from_json(out.read_text())
    assert p.per_order_sparsity
    assert p == make_params(horizon=16, max_changes=6, epsilon=1.0, method="threshold",
                            per_order_sparsity=True)
    sim = tmp_path / "s.json"
    res = CliRunner().invoke(
        command,
        ["simulate", "--devices", "300", "--horizon", "16", "--max-changes", "6", "--epsilon", "1",
         "--method", "threshold", "--per-order-sparsity", "--seed", "2", "--json", str(sim)],
    )
    assert res.exit_code == 0, res.output
    mp = json.loads(sim.read_text())["mechanism_params"]
    assert mp["per_order_sparsity"] is True
    assert mp["c_gap_per_order"] == pytest.approx(list(p.c_gaps), rel=1e-11)  # 12 digits


@pytest.mark.parametrize("sparse", [False, True])
def test_params_table_states_the_plans_interval(sparse: bool) -> None:
    """`longitudinal params` and `plan longitudinal` print one error statement: each method's
    interval is the plan's largest per-period half-width (and the release's), not a looser law."""
    from dpfreq.longitudinal import plan_longitudinal

    args = ["params", "--horizon", "30", "--max-changes", "4", "--epsilon", "1", "--devices",
            "100000", "--confidence", "0.9"] + (["--per-order-sparsity"] if sparse else [])
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 0, res.output
    rows = {line.split()[0]: line.split() for line in res.output.splitlines()[1:7]}
    for name in ("rr", "futurerand", "calibrated", "threshold", "erlingsson"):
        plan = plan_longitudinal(horizon=30, max_changes=4, epsilon=1.0, method=name,
                                 devices=100_000, confidence=0.9,
                                 per_order_sparsity=sparse and name != "erlingsson")
        assert float(rows[name][-1]) == pytest.approx(plan.max_halfwidth, abs=0.05), name
        assert float(rows[name][-2]) == pytest.approx(float(np.max(plan.sd)), abs=0.05), name


def test_aggregate_shows_unended_periods_as_not_ended(tmp_path) -> None:
    """Reports of the first 5 of 8 periods: periods 6..8 print 'not ended' and are null in the
    JSON, never an estimate of 0."""
    p = make_params(horizon=8, max_changes=2, epsilon=2.0, method="rr")
    ppath = tmp_path / "params.json"
    ppath.write_text(p.to_json())
    rows, orders = ["device,order,interval,bit"], np.zeros(p.orders, dtype=np.int64)
    for u in range(60):
        c = LongitudinalClient(p, rng=u)
        orders[c.order] += 1
        rows += [f"{u},{r['order']},{r['interval']},{r['bit']}" for t in range(5)
                 for r in c.step(int(u % 2 == 0))]
    rep = tmp_path / "reports.csv"
    rep.write_text("\n".join(rows) + "\n")
    assert np.all(orders > 0)
    out = tmp_path / "agg.json"
    res = CliRunner().invoke(command, ["aggregate", str(rep), "--params", str(ppath),
                                       "--devices", ",".join(map(str, orders)), "--json",
                                       str(out)])
    assert res.exit_code == 0, res.output
    table = [line.split() for line in res.output.splitlines() if line[:12].strip().isdigit()]
    assert [row[1:] for row in table[5:]] == [["not", "ended", "-", "-"]] * 3
    assert all(float(row[1]) >= 0 for row in table[:5])
    doc = json.loads(out.read_text())
    assert doc["value"][5:] == [None] * 3
    assert doc["error"]["lower"][5:] == [None] * 3
    assert "3 of 8 periods have no estimate yet" in doc["error"]["description"]


@pytest.mark.parametrize(("extra", "want"), [
    (["--confidence", "nan"], "--confidence of dpfreq longitudinal params must be a number in "
                              "(0, 1); got nan."),
    (["--start", "2020-13-01", "--period", "1d"], "--start of dpfreq longitudinal params must "
                                                  "be an ISO date or datetime"),
    (["--start", "2020-01-01"], "--start/--period of dpfreq longitudinal params must be both "
                                "given (dated periods) or both left out; got --start "
                                "2020-01-01, no --period."),
    (["--method", "rr"], "--method needs --out PARAMS.json"),
])
def test_params_refuses_in_one_line_before_printing(capsys, extra, want) -> None:
    with pytest.raises(SystemExit) as e:
        main(["longitudinal", "params", "--horizon", "8", "--max-changes", "2", "--epsilon", "1",
              *extra])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert want in err
    assert "Traceback" not in err
    assert err.count("\n") == 1
