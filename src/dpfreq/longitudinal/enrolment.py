"""The enrolled population of a study, as the offline aggregation takes it.

The estimator needs the number of **enrolled** devices of each order, not the number seen in a
reports file: a device whose partial sums are all zero still reports (fair coins), but one that
dropped out, or whose report of an interval is not in the file yet, is missing from it, and
counting only the devices present biases every period's estimate. So the population is an input:
either the devices per order (public counts) or an enrolment table with one row per device
(columns ``device`` and ``order``; the collection service exports it as Parquet).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import DataError, ParameterError, public_caller, public_errors

from .params import ProtocolParams

__all__ = ["ENROLMENT_COLUMNS", "enrolled_per_order"]

#: Columns of an enrolment table (the service's enrolment export).
ENROLMENT_COLUMNS = ("device", "order")


def _read_table(path: Path) -> dict[str, NDArray[Any]]:
    """``device`` (as text) and ``order`` of a Parquet/CSV file or Parquet directory (DuckDB)."""
    func = public_caller()
    import duckdb

    # a CSV's first line is its header, never sniffed (as every engine reads CSV sources)
    suffix = path.suffix.lower()
    if path.is_dir():
        reader, target = "read_parquet(?)", str(path / "**" / "*.parquet")
    elif suffix in (".csv", ".tsv", ".txt"):
        delim = "\\t" if suffix == ".tsv" else ","
        reader, target = f"read_csv(?, header = true, delim = '{delim}')", str(path)
    else:
        reader, target = "read_parquet(?)", str(path)
    try:
        con = duckdb.connect()
        rows = con.execute(f'SELECT CAST("device" AS VARCHAR), "order" FROM {reader}',
                           [target]).fetchnumpy()
    except duckdb.Error:
        raise DataError(f"enrolment of {func}: cannot read {str(path)!r} as a table with "
                        "columns device and order (a CSV file's first line must name its "
                        "columns).") from None
    names = list(rows)
    return {"device": np.asarray(rows[names[0]]), "order": np.asarray(rows[names[1]])}


def _counts_from_table(cols: Mapping[str, Any], params: ProtocolParams) -> NDArray[np.int64]:
    func = public_caller()
    try:
        device = np.asarray(cols["device"], dtype=object)
        order = np.asarray(cols["order"])
    except (KeyError, TypeError):
        raise DataError(f"enrolment of {func} must have the columns device and order.") \
            from None
    if device.shape != order.shape or device.ndim != 1:
        raise DataError(f"enrolment of {func}: device and order must be columns of equal "
                        "length.")
    if any(v is None for v in device.tolist()) or (order.size and order.dtype.kind not in "iu"):
        raise DataError(f"enrolment of {func}: device must have no nulls and order must be "
                        "integers.")
    order = order.astype(np.int64)
    if order.size and (order.min() < 0 or order.max() >= params.orders):
        raise DataError(f"enrolment of {func}: order must be in 0..{params.orders - 1}.")
    ids = device.astype(str)
    if np.unique(ids).size != ids.size:
        raise DataError(f"enrolment of {func}: a device is enrolled twice.")
    return np.bincount(order, minlength=params.orders).astype(np.int64)


@public_errors("enrolled_per_order")
def enrolled_per_order(enrolled: Any, params: ProtocolParams) -> NDArray[np.int64]:
    """Enrolled devices per order from counts or from an enrolment table.

    Parameters
    ----------
    enrolled : sequence of int, str, pathlib.Path or mapping of columns
        ``params.orders`` non-negative counts (devices of order 0, 1, ...), or an enrolment
        table with columns ``device`` and ``order``: a Parquet/CSV file, a Parquet directory,
        or a mapping of columns.
    params : ProtocolParams
        The study's parameters (the number of orders).

    Returns
    -------
    numpy.ndarray of int64
        One count per order.

    Raises
    ------
    ParameterError
        Counts of the wrong length, negative, not integers or above ``2^53`` in all.
    DataError
        An unreadable table, a missing column, an order out of range or a device listed twice.

    Examples
    --------
    >>> from dpfreq.longitudinal import make_params
    >>> p = make_params(horizon=4, max_changes=1, epsilon=1.0, method="rr")
    >>> enrolled_per_order([5, 0, 2], p).tolist()
    [5, 0, 2]
    >>> enrolled_per_order({"device": [7, 9], "order": [2, 2]}, p).tolist()
    [0, 0, 2]
    """
    func = public_caller()
    if isinstance(enrolled, str | Path):
        path = Path(enrolled)
        if not path.exists():
            raise DataError(f"enrolment of {func}: no file {str(path)!r}.")
        return _counts_from_table(_read_table(path), params)
    if isinstance(enrolled, Mapping):
        return _counts_from_table(enrolled, params)
    try:
        counts = [int(c) for c in enrolled if not isinstance(c, bool) and int(c) == c]
        n = len(list(enrolled))
    except (TypeError, ValueError):
        counts, n = [], -1
    # the estimator counts devices in float64: a population above 2^53 would not be exact
    if n != params.orders or len(counts) != n or any(c < 0 for c in counts) \
            or sum(counts) > 2**53:
        raise ParameterError(
            f"enrolled of {func} must be {params.orders} non-negative integers (devices per "
            f"order 0..{params.orders - 1}, at most 2^53 in all) or an enrolment table; got "
            f"{enrolled!r}.")
    return np.asarray(counts, dtype=np.int64)
