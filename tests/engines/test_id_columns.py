"""The one rule of id columns in releases on every engine: a fraction, a float, a time or a
boolean item or group column is refused in one line naming its type, grouped or not; integer
ids of any width are the ids of their decimal text (one release whatever their type)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from dpfreq import release_window_counts
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import DataError

pa = pytest.importorskip("pyarrow")

ITEMS = [3, 1, 3, 7, 1, 3]
TIMES = [1, 1, 2, 2, 3, 4]
GROUPS = ["a", "b", "a", "a", "b", "b"]
RULE = ("must be a column of integers or text (an integer, DECIMAL(p,0) included, is the id of "
        "its decimal text; a fraction, a float, a time or a boolean is no id); got type ")


def _release(source: Any, engine: Any, grouped: bool) -> list[Any]:
    extra: dict[str, Any] = ({"group": "g", "groups": ["a", "b"], "max_groups_per_item": 1}
                             if grouped else {})
    rel = release_window_counts(source, item="u", time="t", horizon=4, epsilon=1.0,
                                unit="item", k_values=[1, 2], windows=["cumulative"], rng=5,
                                engine=engine, **extra)
    parts = [rel[g] for g in rel] if grouped else [rel]
    return [{f: {k: v.tolist() for k, v in per.items()} for f, per in r.value.items()}
            for r in parts]


def _table(items: Any, groups: Any = None) -> Any:
    return pa.table({"u": items, "t": pa.array(TIMES, pa.int64()),
                     "g": groups if groups is not None else pa.array(GROUPS)})


BAD = {
    "DECIMAL(10,2)": pa.array([Decimal(f"{i}.50") for i in ITEMS], pa.decimal128(10, 2)),
    "DOUBLE": pa.array([float(i) for i in ITEMS], pa.float64()),
    "BOOLEAN": pa.array([i > 2 for i in ITEMS]),
}
GOOD = {
    "BIGINT": pa.array(ITEMS, pa.int64()),
    "DECIMAL(18,0)": pa.array([Decimal(i) for i in ITEMS], pa.decimal128(18, 0)),
    "DECIMAL(20,0)": pa.array([Decimal(i) for i in ITEMS], pa.decimal128(20, 0)),
    "UBIGINT": pa.array(ITEMS, pa.uint64()),
    "VARCHAR": pa.array([str(i) for i in ITEMS]),
}


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_no_id_columns_refused(engine: str) -> None:
    for grouped in (False, True):
        for name in ("DECIMAL(10,2)", "DOUBLE"):
            with pytest.raises(DataError) as err:
                _release(_table(BAD[name]), engine, grouped)
            assert str(err.value) == f"column 'u' of the source {RULE}{name}.", (grouped, name)
    eng = get_engine(engine)
    with pytest.raises(DataError) as err:
        eng.item_counts(_table(BAD["BOOLEAN"]), item="u")
    assert str(err.value) == f"column 'u' of the source {RULE}BOOLEAN."
    with pytest.raises(DataError) as err:  # a group column too
        eng.grouped_count_of_counts(_table(GOOD["BIGINT"], pa.array([1.5] * 6)), _request())
    assert str(err.value) == f"column 'g' of the source {RULE}DOUBLE."


def _request() -> CountRequest:
    return CountRequest("u", Grouping("g", ("a", "b"), 1, bytes(range(1, 33))))


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_integer_ids_of_every_width_are_the_same_ids(engine: str) -> None:
    """Integer ids of any width and their decimal text are the same ids: the same counts and
    the same grouped bounding (which hashes an id's text); DECIMAL(18,0) and BIGINT ids give
    the same grouped release."""
    eng = get_engine(engine)
    keys = {"BIGINT": "integer", "DECIMAL(18,0)": "integer"}
    want = eng.grouped_count_of_counts(_table(GOOD["BIGINT"]), _request())
    for name, column in GOOD.items():
        counts = eng.item_counts(_table(column), item="u")
        assert counts.counts.tolist() == [2, 3, 1], name
        assert counts.keys.dtype.kind == ("i" if keys.get(name) else "O"), name
        got = eng.grouped_count_of_counts(_table(column), _request())
        assert (got.group_index.tolist(), got.counts.tolist(), got.prevalences.tolist()) == (
            want.group_index.tolist(), want.counts.tolist(), want.prevalences.tolist()), name
    assert _release(_table(GOOD["DECIMAL(18,0)"]), engine, True) == _release(
        _table(GOOD["BIGINT"]), engine, True)


def test_memory_numpy_ids() -> None:
    """numpy columns: a float dtype and an object column holding a float are no id; integers,
    unsigned 64-bit integers and integral Decimals are ids."""
    t = np.array(TIMES)
    want = _release({"u": np.array(ITEMS), "t": t}, "memory", False)
    for items in (np.array(ITEMS, dtype=np.uint64), np.array([str(i) for i in ITEMS]),
                  np.array([Decimal(i) for i in ITEMS], dtype=object)):
        assert _release({"u": items, "t": t}, "memory", False) == want, items.dtype
    wide = [2**70 + i for i in ITEMS]  # beyond 64 bits: the ids of their decimal text
    assert _release({"u": np.array(wide, dtype=object), "t": t}, "memory", False) == \
        _release({"u": np.array([str(i) for i in wide]), "t": t}, "memory", False)
    for items, name in ((np.array(ITEMS, dtype=float), "DOUBLE"),
                        (np.array(ITEMS, dtype=np.float32), "FLOAT"),
                        (np.array([1.0, *ITEMS[1:]], dtype=object), "OBJECT (values of type "
                         "float)"),
                        (np.array([True, *ITEMS[1:]], dtype=object), "OBJECT (values of type "
                         "bool)"),
                        (np.array([Decimal("1.5"), *ITEMS[1:]], dtype=object),
                         "OBJECT (values of type Decimal with a fraction)")):
        with pytest.raises(DataError) as err:
            _release({"u": items, "t": t}, "memory", False)
        assert str(err.value) == f"column 'u' of the source {RULE}{name}.", name


@pytest.mark.spark
def test_spark_id_columns(spark: Any) -> None:
    """Spark keys ids as the memory engine does (a wide DECIMAL(p,0) by its decimal text) and
    refuses a fractional DECIMAL in a grouped and an ungrouped release alike."""
    eng: Any = get_engine("spark", spark=spark)
    mem = get_engine("memory")
    wide = eng.item_counts(_table(GOOD["DECIMAL(20,0)"]), item="u")
    assert wide.keys.tolist() == mem.item_counts(_table(GOOD["VARCHAR"]), item="u").keys.tolist()
    for grouped in (False, True):
        with pytest.raises(DataError) as err:
            _release(_table(BAD["DECIMAL(10,2)"]), eng, grouped)
        assert str(err.value) == f"column 'u' of the source {RULE}DECIMAL(10,2).", grouped
