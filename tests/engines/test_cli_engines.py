"""Engine selection: ``get_engine`` with instances and sessions, and the CLI's
``--engine spark [--spark-master URL]`` on every command that has ``--engine``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest

from cli_runner import run_cli
from dpfreq.cli._common import DEFAULT_SPARK_MASTER, resolve_engine_option
from dpfreq.cli.main import cli
from dpfreq.engines import Engine, get_engine
from dpfreq.errors import ParameterError


# -- get_engine -------------------------------------------------------------------------------
def test_get_engine_returns_an_instance_unchanged() -> None:
    eng = get_engine("duckdb")
    assert get_engine(eng) is eng
    assert get_engine(eng, source="ignored.csv") is eng
    mem = get_engine("memory")
    assert isinstance(mem, Engine)
    assert get_engine(mem, source={"item": [1]}) is mem


def test_get_engine_rejects_options_with_an_instance_and_unknown_objects() -> None:
    eng = get_engine("memory")
    with pytest.raises(ParameterError, match="options of get_engine must be empty"):
        get_engine(eng, connection=None)
    with pytest.raises(ParameterError, match="engine of get_engine must be one of 'memory'"):
        get_engine(3.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="engine of get_engine must be one of"):
        get_engine("sparkk")


def test_spark_engine_checks_the_master_url_without_starting_spark() -> None:
    pytest.importorskip("pyspark")
    for url in ("local", "local[2]", "local[*]", "local[4,2]", "spark://a:7077,b:7077",
                "yarn", "k8s://https://host:443"):
        eng: Any = get_engine("spark", master=url)
        assert eng.master == url
        assert eng._spark is None  # the session starts on first use only
    for bad in ("", "bogus://x", "local[]", "spark://"):
        with pytest.raises(ParameterError, match="master of get_engine must be a Spark master"):
            get_engine("spark", master=bad)


@pytest.mark.spark
def test_get_engine_with_a_spark_session(spark: Any) -> None:
    eng: Any = get_engine(spark)
    assert eng.name == "spark"
    assert eng.spark is spark
    # the name alone reuses the active session (no second session, its settings untouched)
    assert get_engine("spark").spark is spark  # type: ignore[attr-defined]


# -- CLI options ------------------------------------------------------------------------------
def test_resolve_engine_option() -> None:
    assert resolve_engine_option(None, None) is None
    assert resolve_engine_option("duckdb", None) == "duckdb"
    assert resolve_engine_option("memory", None) == "memory"
    for engine in (None, "duckdb"):
        with pytest.raises(click.UsageError, match="--spark-master needs --engine spark"):
            resolve_engine_option(engine, "local[2]")


def test_resolve_engine_option_spark_master() -> None:
    pytest.importorskip("pyspark")
    default: Any = resolve_engine_option("spark", None)
    assert (default.name, default.master) == ("spark", DEFAULT_SPARK_MASTER)
    assert DEFAULT_SPARK_MASTER == "local[*]"
    remote: Any = resolve_engine_option("spark", "spark://host:7077")
    assert (remote.name, remote.master, remote._spark) == ("spark", "spark://host:7077", None)


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    """Every command, subcommands loaded through the group (they may be lazy)."""
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None:
            continue
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix}{name} ")
        else:
            out.append((prefix + name, cmd))
    return out


def test_every_engine_command_has_spark_master() -> None:
    with_engine = []
    for name, cmd in _commands(cli):
        params = {p.name for p in cmd.params}
        if "engine" in params:
            with_engine.append(name)
            assert "spark_master" in params, name
            engine_opt = next(p for p in cmd.params if p.name == "engine")
            assert isinstance(engine_opt.type, click.Choice)
            assert "spark" in engine_opt.type.choices, name
    assert {"reach", "longitudinal aggregate"} <= set(with_engine)


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "log.csv"
    rows = [(1, 1), (2, 1), (1, 2), (3, 2), (3, 2), (2, 4), (1, 4)]
    path.write_text("u,t\n" + "\n".join(f"{a},{b}" for a, b in rows) + "\n", encoding="utf-8")
    return path


_REACH = ["--item", "u", "--time", "t", "--horizon", "4", "--epsilon", "1", "--unit", "event",
          "--k", "1,2", "--windows", "cumulative,2", "--seed", "3", "--json", "-"]


def test_cli_spark_master_without_spark_engine(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["reach", str(_log(tmp_path)), *_REACH, "--spark-master", "local[1]"],
                           capsys)
    assert code == 2
    assert err.strip().splitlines()[-1] == "dpfreq: error: --spark-master needs --engine spark."


def test_cli_bad_spark_master_is_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyspark")
    code, _, err = run_cli(["reach", str(_log(tmp_path)), *_REACH, "--engine", "spark",
                            "--spark-master", "bogus://x"], capsys)
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("dpfreq: error: --spark-master of dpfreq reach must be a Spark "
                           "master URL")


def _release_json(out: str) -> dict[str, Any]:
    data = json.loads(out[out.index("{"):])
    data["mechanism_params"].pop("source", None)
    return data


@pytest.mark.spark
def test_cli_reach_spark_equals_duckdb(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       spark: Any) -> None:
    """Same seed, same release through ``--engine spark --spark-master`` and DuckDB. (Under
    the test session the active local session is reused; the URL is still validated.)"""
    log = str(_log(tmp_path))
    code, out_duck, _ = run_cli(["reach", log, *_REACH, "--engine", "duckdb"], capsys)
    assert code == 0
    code, out_spark, _ = run_cli(["reach", log, *_REACH, "--engine", "spark", "--spark-master",
                                  "local[2]"], capsys)
    assert code == 0
    assert json.loads(out_spark[out_spark.index("{"):])["mechanism_params"]["source"] == "spark"
    assert _release_json(out_spark) == _release_json(out_duck)


@pytest.mark.spark
def test_cli_longitudinal_aggregate_spark_parquet(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  spark: Any) -> None:
    """``dpfreq longitudinal aggregate REPORTS.parquet --engine spark`` equals DuckDB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpfreq.longitudinal import LongitudinalClient, make_params

    p = make_params(horizon=8, max_changes=2, epsilon=1.0, method="rr")
    params = tmp_path / "params.json"
    params.write_text(p.to_json(), encoding="utf-8")
    rows = []
    for u in range(12):
        client = LongitudinalClient(p, rng=u)
        for t in range(p.horizon):
            for r in client.step(int((u + t) % 4 == 0)):
                rows.append((u, int(r["order"]), int(r["interval"]), int(r["bit"])))
    arr = np.asarray(rows, dtype=np.int64)
    reports = tmp_path / "reports.parquet"
    names = ("device", "order", "interval", "bit")
    pq.write_table(pa.table({n: arr[:, i] for i, n in enumerate(names)}), reports)
    base = ["longitudinal", "aggregate", str(reports), "--params", str(params), "--devices",
            ",".join(["12"] * p.orders), "--json", "-"]
    code, out_duck, _ = run_cli([*base, "--engine", "duckdb"], capsys)
    assert code == 0
    code, out_spark, _ = run_cli([*base, "--engine", "spark"], capsys)
    assert code == 0
    assert json.loads(out_spark[out_spark.index("{"):]) == json.loads(
        out_duck[out_duck.index("{"):])


# -- session creation (no JVM: SparkSession replaced by a recording fake) ----------------------
class _FakeBuilder:
    def __init__(self, fail: bool) -> None:
        self.calls: dict[str, Any] = {}
        self.fail = fail

    def master(self, url: str) -> _FakeBuilder:
        self.calls["master"] = url
        return self

    def appName(self, name: str) -> _FakeBuilder:
        self.calls["app"] = name
        return self

    def config(self, key: str, value: str) -> _FakeBuilder:
        self.calls[key] = value
        return self

    def getOrCreate(self) -> str:
        if self.fail:
            raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited.\nmore")
        return "new session"


def _fake_session_class(active: Any, builder: _FakeBuilder) -> Any:
    class FakeSparkSession:
        @staticmethod
        def getActiveSession() -> Any:
            return active

    FakeSparkSession.builder = builder  # type: ignore[attr-defined]
    return FakeSparkSession


def test_spark_session_sets_executor_python_and_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    import sys

    import dpfreq.engines.spark.session as spark_mod

    builder = _FakeBuilder(fail=False)
    monkeypatch.setattr(spark_mod, "SparkSession", _fake_session_class(None, builder))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert spark_mod.spark_session("spark://head:7077") == "new session"
    assert spark_mod.os.environ["PYSPARK_PYTHON"] == sys.executable
    assert builder.calls["master"] == "spark://head:7077"
    assert builder.calls["spark.sql.session.timeZone"] == "UTC"
    # a PYSPARK_PYTHON set by the user (e.g. ./environment/bin/python) is kept
    monkeypatch.setenv("PYSPARK_PYTHON", "./environment/bin/python")
    spark_mod.spark_session("local[2]")
    assert spark_mod.os.environ["PYSPARK_PYTHON"] == "./environment/bin/python"


def test_spark_session_reuses_the_active_session(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    import dpfreq.engines.spark.session as spark_mod

    builder = _FakeBuilder(fail=False)
    monkeypatch.setattr(spark_mod, "SparkSession", _fake_session_class("active", builder))
    assert spark_mod.spark_session("local[2]") == "active"
    assert builder.calls == {}  # its master and configuration are left alone


def test_spark_session_start_failure_is_engine_unavailable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    import dpfreq.engines.spark.session as spark_mod
    from dpfreq.errors import EngineUnavailableError

    monkeypatch.setattr(spark_mod, "SparkSession",
                        _fake_session_class(None, _FakeBuilder(fail=True)))
    monkeypatch.setenv("PYSPARK_PYTHON", "python")
    with pytest.raises(EngineUnavailableError,
                       match=r"^cannot start Spark with master 'yarn': \[JAVA_GATEWAY_EXITED\] "
                             r"Java gateway process exited\. \(the spark engine needs Java"):
        spark_mod.spark_session("yarn")


@pytest.mark.spark
def test_spark_session_as_engine_in_releases(tmp_path: Path, spark: Any) -> None:
    """``engine=<SparkSession>`` in release_window_counts gives the arrays path's release."""
    from dpfreq.windows import release_window_counts

    log = _log(tmp_path)
    kw: dict[str, Any] = {"item": "u", "time": "t", "horizon": 4, "epsilon": 1.0,
                          "unit": "event", "k_values": [1, 2], "windows": ["cumulative", 2],
                          "rng": 11}
    got = release_window_counts(str(log), engine=spark, **kw)
    arr = np.loadtxt(log, delimiter=",", skiprows=1, dtype=np.int64)
    ref = release_window_counts({"u": arr[:, 0], "t": arr[:, 1]}, **kw)
    assert got.mechanism_params["source"] == "spark"
    a, b = got.to_dict(), ref.to_dict()
    a["mechanism_params"].pop("source")
    b["mechanism_params"].pop("source")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.spark
@pytest.mark.parametrize("command", [
    ["profile", "--item", "u", "--domain-size", "10", "--max-count", "3", "--epsilon", "1",
     "--unit", "event"],
    ["anonymize", "--unit", "event", "--item", "u", "--epsilon", "1"],
], ids=["profile", "anonymize"])
def test_cli_releases_spark_equal_duckdb(command: list[str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str], spark: Any) -> None:
    """``dpfreq profile|anonymize FILE --engine spark`` gives DuckDB's release (same seed)."""
    log = str(_log(tmp_path))
    outs = []
    for engine in ("duckdb", "spark"):
        code, out, err = run_cli([command[0], log, *command[1:], "--seed", "2", "--json", "-",
                                  "--engine", engine], capsys)
        assert code == 0, err
        data = json.loads(out[out.index("{"):])
        release = data["release"] if command[0] == "anonymize" else data  # + properties
        params = release["mechanism_params"]
        assert params.pop("engine") == engine
        outs.append(data)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("command", ["reach", "anonymize"])
def test_cli_engine_memory_reads_files(command: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``--engine memory`` with a file gives the DuckDB release (same seed): the memory engine
    reads files itself instead of refusing them."""
    log = str(_log(tmp_path))
    args = ([command, log, *_REACH] if command == "reach" else
            [command, log, "--item", "u", "--epsilon", "1", "--unit", "event", "--seed", "3",
             "--json", "-"])
    outs = {}
    for engine in ("memory", "duckdb"):
        code, out, err = run_cli([*args, "--engine", engine], capsys)
        assert code == 0, err
        data = json.loads(out[out.index("{"):])
        outs[engine] = json.dumps(data, sort_keys=True).replace('"memory"', '"duckdb"')
    assert outs["memory"] == outs["duckdb"]


@pytest.mark.parametrize("column", ["nan", "list", "struct"])
def test_cli_bad_item_columns_refused_alike(column: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """NaN, list and struct item columns: the same one-line error from every engine."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    values = {"nan": [1.5, float("nan"), 2.5], "list": [[1], [2, 3], []],
              "struct": [{"a": 1}, {"a": 2}, {"a": 3}]}[column]
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"item": values, "t": [1, 2, 3]}), path)
    lines = set()
    for engine in ("memory", "duckdb"):
        code, _, err = run_cli(["profile", str(path), "--item", "item", "--domain-size", "10",
                                "--max-count", "3", "--epsilon", "1", "--unit", "event",
                                "--engine", engine], capsys)
        assert code == 2, err
        lines.add(err.strip().splitlines()[-1])
    assert len(lines) == 1
    assert "column 'item'" in lines.pop()
