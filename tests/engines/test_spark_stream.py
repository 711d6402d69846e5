"""The reach stream with its per-item state on Spark (``engine="spark"``): every published answer
equals, bit for bit, the memory store's for the same events and seed (ungrouped; grouped at
``unit="item"`` with a bound hit by items of 3+ groups and ties of groups first seen in the same
period; appends closing several periods); an edited, removed or swapped part file is refused; a
double append is idempotent; a crash before the manifest leaves the previous generation, and so
does a generation whose part files the driver cannot read; late events are refused or dropped.
Spark DataFrames, Parquet paths and mappings as sources. One shared local session (``spark``
fixture)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from cli_runner import run_cli
from dpfreq.errors import DataError
from dpfreq.stream import ReachStream
from dpfreq.stream.lock import LOCK_FILE

pytestmark = pytest.mark.spark


def _create(path, engine, **over):
    kw = {"item": "u", "time": "t", "horizon": 12, "k_values": [1, 3], "unit": "item",
          "epsilon": 1.0, "delta": 0.0, "method": "auto", "late": "error", "engine": engine,
          "rng": 11}
    kw.update(over)
    return ReachStream.create(path, **kw)


def _published(s, rels) -> list[str]:
    """Every answer the stream published: the appends' releases and a release of every past
    period."""
    return [r.to_json() for r in rels] + [s.release(t).to_json()
                                          for t in range(1, s.last_period + 1)]


def _run(tmp_path, engine, cols, windows, source, **over):
    s = _create(tmp_path / engine, engine, **over)
    rels = []
    for lo, hi in windows:
        sel = (cols["t"] > lo) & (cols["t"] <= hi)
        rels += s.append(source({c: v[sel] for c, v in cols.items()}), through=hi)
    return s, _published(s, rels)


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.state.exact, b.state.exact)
    np.testing.assert_array_equal(a.state.noisy, b.state.noisy)
    np.testing.assert_array_equal(a.state.cap_exact, b.state.cap_exact)
    np.testing.assert_array_equal(a.state.cap_noisy, b.state.cap_noisy)
    assert (a.state.n_pairs, a.state.n_bounded_out, a.state.n_late_dropped) == (
        b.state.n_pairs, b.state.n_bounded_out, b.state.n_late_dropped)


def test_ungrouped_spark_stream_publishes_the_memory_answers(spark, tmp_path) -> None:
    rng = np.random.default_rng(1)
    cols = {"u": rng.integers(0, 150, 1500), "t": rng.integers(1, 7, 1500)}
    windows = ((0, 1), (1, 3), (3, 6))  # the second append closes two periods

    def frame(c):
        return spark.createDataFrame(pd.DataFrame(c))

    mem, want = _run(tmp_path, "memory", cols, windows, dict)
    spk, got = _run(tmp_path, "spark", cols, windows, frame)
    assert got == want
    _same(mem, spk)
    assert mem.state.exact[0, 1].sum() > 0  # the 3+ level was reached


@pytest.mark.filterwarnings("ignore::dpfreq.errors.DPFreqWarning")
@pytest.mark.parametrize("capping_epsilon", [None, 0.3])
def test_grouped_bounded_spark_stream_publishes_the_memory_answers(spark, tmp_path,
                                                                   capping_epsilon) -> None:
    """With capping_epsilon the remembered pairs, the increments of T and D and the dropped
    fraction are the memory store's too."""
    rng = np.random.default_rng(2)
    names = ["a", "b", "c", "d", "e"]
    n = 1200
    cols = {"u": np.array([f"u{v:02d}" for v in rng.integers(0, 60, n)], dtype=object),
            "t": rng.integers(1, 7, n), "g": rng.choice(names, n)}
    # the cases the bound must decide: items of 3+ groups, several groups first seen together
    first = defaultdict(dict)
    for u, t, g in zip(cols["u"], cols["t"], cols["g"], strict=True):
        first[u][g] = min(first[u].get(g, 99), t)
    assert any(len(gs) >= 3 for gs in first.values())
    assert any(max(np.unique(list(gs.values()), return_counts=True)[1]) >= 2
               for gs in first.values())
    windows = ((0, 2), (2, 3), (3, 6))
    over = {"group": "g", "groups": names, "max_groups_per_item": 2, "late": "drop",
            "capping_epsilon": capping_epsilon}
    mem, want = _run(tmp_path, "memory", cols, windows, dict, **over)
    spk, got = _run(tmp_path, "spark", cols, windows, dict, **over)
    assert got == want
    _same(mem, spk)
    assert spk.state.n_bounded_out > 0
    if capping_epsilon is not None:  # pairs were dropped, and remembered once
        assert spk.state.cap_exact[0, 1].sum() > 0


def _day(t: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(t)
    return {"u": rng.integers(0, 40, 30), "t": np.full(30, t)}


def test_double_append_is_idempotent_and_edited_part_files_are_refused(spark, tmp_path) -> None:
    s = _create(tmp_path / "s", "spark")
    s.append(_day(1), through=1)
    first = s.append(_day(2), through=2)
    state = s.state
    again = s.append(_day(2), through=2)  # re-sent: the stored answers, nothing written
    assert [r.to_json() for r in again] == [r.to_json() for r in first]
    assert s.state.generation == state.generation
    items = tmp_path / "s" / state.items_file
    assert items.is_dir()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        LOCK_FILE, "items-2.parquet", "stream.dpfreq"]  # the previous generation was removed
    back = ReachStream.open(tmp_path / "s")
    np.testing.assert_array_equal(back.state.noisy, state.noisy)
    two_three = {c: np.r_[_day(2)[c], _day(3)[c]] for c in _day(2)}  # a cron re-run of 2..3
    rels = back.append(two_three, through=3)
    assert [r.to_json() for r in rels[:1]] == [r.to_json() for r in first]
    assert [r.period for r in rels] == [2, 3]
    changed = {**two_three, "u": np.r_[two_three["u"][:1] + 1, two_three["u"][1:]]}
    with pytest.raises(DataError, match="appended for period 2 when re-sent"):
        back.append(changed, through=4)
    items = tmp_path / "s" / back.state.items_file
    part = sorted(items.glob("part-*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    with pytest.raises(DataError, match="does not match the manifest"):
        ReachStream.open(tmp_path / "s")
    part.unlink()  # a removed part file: refused too
    with pytest.raises(DataError, match="does not match the manifest"):
        ReachStream.open(tmp_path / "s")


def test_a_crash_before_the_manifest_leaves_the_previous_generation(spark, tmp_path,
                                                                     monkeypatch) -> None:
    """The next generation's directory is written, then the process dies before the manifest
    names it: the stream reopens at the previous period, and the re-sent append (which
    overwrites the orphan directory) publishes what an uninterrupted stream publishes."""
    import dpfreq.stream.stream as stream_module

    ref = _create(tmp_path / "ref", "spark")
    want = [r.to_json() for t in (1, 2) for r in ref.append(_day(t), through=t)]
    s = _create(tmp_path / "s", "spark")
    s.append(_day(1), through=1)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as m:
        m.setattr(stream_module, "save_state", crash)
        with pytest.raises(OSError, match="disk full"):
            s.append(_day(2), through=2)
    assert (tmp_path / "s" / "items-2.parquet").is_dir()  # the orphan generation
    back = ReachStream.open(tmp_path / "s")
    assert back.last_period == 1
    assert back.state.items_file == "items-1.parquet"
    got = [back.release(1).to_json()] + [r.to_json() for r in back.append(_day(2), through=2)]
    assert got == want
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        LOCK_FILE, "items-2.parquet", "stream.dpfreq"]
    np.testing.assert_array_equal(ReachStream.open(tmp_path / "s").state.noisy, ref.state.noisy)


def test_part_files_the_driver_cannot_see_are_refused_before_the_manifest(spark, tmp_path,
                                                                         monkeypatch) -> None:
    """On a cluster, a state directory the executors do not share with the driver leaves part
    files on the executors' disks: simulated by removing one part file after Spark writes the
    generation. The driver's row count (Parquet footers) misses the pairs the job counted, so
    the append is refused in one line before the manifest and the stream keeps its state."""
    import dpfreq.stream.items.spark as spark_items

    s = _create(tmp_path / "s", "spark")
    s.append(_day(1), through=1)
    real = spark_items.check_rows_visible

    def on_another_disk(out, rows, label):
        sorted(out.glob("part-*.parquet"))[0].unlink()
        real(out, rows, label)

    with monkeypatch.context() as m:
        m.setattr(spark_items, "check_rows_visible", on_another_disk)
        with pytest.raises(DataError, match="a directory the Spark driver and every executor "
                                            "share") as exc:
            s.append(_day(2), through=2)
    assert "\n" not in str(exc.value)
    back = ReachStream.open(tmp_path / "s")
    assert back.last_period == 1
    ref = _create(tmp_path / "ref", "spark")
    want = [r.to_json() for t in (1, 2) for r in ref.append(_day(t), through=t)][-1]
    assert back.append(_day(2), through=2)[-1].to_json() == want


def test_late_events_refused_or_dropped_from_a_parquet_path(spark, tmp_path) -> None:
    late = tmp_path / "late.parquet"
    pd.DataFrame({"u": [1, 2, 3], "t": [1, 2, 2]}).to_parquet(late)
    s = _create(tmp_path / "s", "spark")
    s.append(_day(1), through=1)
    with pytest.raises(DataError, match="closed period"):
        s.append(str(late), through=2)
    assert s.last_period == 1
    with pytest.raises(DataError, match="after through"):
        s.append({"u": np.array([1]), "t": np.array([5])}, through=2)
    mem = _create(tmp_path / "m", "memory", late="drop")
    spk = _create(tmp_path / "d", "spark", late="drop")
    for t in (mem, spk):
        t.append(_day(1), through=1)
    assert mem.append(str(late), through=2)[0].to_json() == \
        spk.append(str(late), through=2)[0].to_json()
    _same(mem, spk)
    assert spk.state.n_late_dropped == 1


def test_cli_stream_on_spark_equals_memory(spark, tmp_path, capsys) -> None:
    init = ["--item", "user", "--time", "ts", "--start", "2026-03-01", "--period", "1d",
            "--horizon", "31", "--k", "1,3", "--unit", "item", "--epsilon", "1", "--delta",
            "0", "--method", "auto", "--late", "error", "--seed", "3"]
    rng = np.random.default_rng(4)
    days = []
    for day, unit in (("2026-03-01", "ns"), ("2026-03-02", "us")):  # Spark: nanos, NTZ
        path = tmp_path / f"events-{day}.parquet"
        ts = pd.to_datetime([f"{day}T{h:02d}:59:59" for h in rng.integers(0, 24, 80)])
        pd.DataFrame({"user": rng.integers(0, 50, 80),
                      "ts": ts.astype(f"datetime64[{unit}]")}).to_parquet(path)
        days.append((day, path))
    shown = {}
    for engine in ("memory", "spark"):
        state = tmp_path / engine
        assert run_cli(["stream", "init", state, *init, "--state-engine", engine], capsys)[0] == 0
        for day, path in days:
            code, _, err = run_cli(["stream", "append", state, path, "--through", day], capsys)
            assert code == 0, err
        code, shown[engine], _ = run_cli(["stream", "show", state, "--json", "-"], capsys)
        assert code == 0
    assert shown["spark"] == shown["memory"]
    code, _, err = run_cli(["stream", "append", tmp_path / "spark", days[0][1], "--through",
                            "2026-03-03"], capsys)  # period 1 again: late, refused
    assert code != 0
    assert len(err.strip().splitlines()) == 1
    assert "closed period" in err


def test_a_date_time_column_is_bucketed_as_on_duckdb(spark, tmp_path) -> None:
    """A DATE time column (Parquet ``date32``) with ``start``/``period``: the Spark stream
    publishes the DuckDB stream's answers, for days and for 2-day periods."""
    rng = np.random.default_rng(3)
    days = pd.to_datetime("2026-03-01") + pd.to_timedelta(rng.integers(0, 8, 400), unit="D")
    frame = pd.DataFrame({"u": rng.integers(0, 50, 400), "t": days.date})
    path = tmp_path / "dates.parquet"
    frame.to_parquet(path)
    assert spark.read.parquet(str(path)).schema["t"].dataType.typeName() == "date"
    for period, through in (("1d", ("2026-03-04", "2026-03-08")), ("2d", ("2026-03-04",
                                                                          "2026-03-08"))):
        answers = {}
        for engine in ("duckdb", "spark"):
            s = _create(tmp_path / f"{engine}-{period}", engine, start="2026-03-01",
                        period=period, late="drop")
            rels = []
            for t in through:
                part = frame[frame["t"] <= pd.Timestamp(t).date()]
                part.to_parquet(tmp_path / f"{engine}-{period}-{t}.parquet")
                rels += s.append(str(tmp_path / f"{engine}-{period}-{t}.parquet"), through=t)
            answers[engine] = [r.to_json() for r in rels]
        assert answers["spark"] == answers["duckdb"]


def test_ids_are_their_text_on_spark_as_in_memory(spark, tmp_path) -> None:
    """Integer ids, then a uint64 Parquet column beyond int64 (Spark reads DECIMAL(20,0)): the
    Spark store keys them as the memory store keys the same ids as text; a DECIMAL with a
    fraction is refused with the memory store's line (one rule of id columns)."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    big = 2**64 - 1
    pq.write_table(pa.table({"u": pa.array([big, 3], type=pa.uint64()), "t": [2, 2]}),
                   tmp_path / "d2.parquet")
    pq.write_table(pa.table({"u": pa.array([Decimal("1.50")], type=pa.decimal128(10, 2)),
                             "t": [3]}), tmp_path / "bad.parquet")
    s, ref = _create(tmp_path / "s", "spark"), _create(tmp_path / "ref", "memory")
    s.append({"u": np.array([3, 4, 3]), "t": np.ones(3, int)}, through=1)
    s.append(str(tmp_path / "d2.parquet"), through=2)
    ref.append({"u": np.array(["3", "4", "3"], dtype=object), "t": np.ones(3, int)}, through=1)
    ref.append({"u": np.array([str(big), "3"], dtype=object), "t": [2, 2]}, through=2)
    _same(s, ref)
    assert s.state.key_kind == "text"
    with pytest.raises(DataError, match=r"a column of integers or text .*got 'DECIMAL\(10,2\)'"):
        s.append(str(tmp_path / "bad.parquet"), through=3)
