"""Estimates, exports (JSON, CSV, Parquet) and the dashboard's summary.

Besides the estimate, an analyst can export what it is computed from: the raw reports (one row
per stored report, the wire columns ``device, order, interval, bit, param_id``) and the
enrolment (one row per enrolled device, ``device, order``), both as Parquet. ``dpfreq
longitudinal aggregate REPORTS --params PARAMS --enrolment ENROLMENT`` on them gives the
service's estimate exactly: both are the same post-processing of the same reports and enrolment.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import sqlalchemy as sa
from fastapi.responses import JSONResponse, Response

from . import storage
from .protocol import estimate_columns, estimate_from_running_sums, utc_now
from .service import Service, StudyRecord

__all__ = ["EXPORT_FORMATS", "RAW_EXPORTS", "ended_periods", "estimate_payload", "raw_export",
           "render_export", "summary_payload"]

EXPORT_FORMATS = ("json", "csv", "parquet")
#: Raw tables an analyst can export (Parquet), and their columns.
RAW_EXPORTS = {"reports": ("device", "order", "interval", "bit", "param_id"),
               "enrolment": ("device", "order")}


def ended_periods(record: StudyRecord, now: Any = None) -> tuple[int, int]:
    """``(ended, today)``: periods that have ended (``0..horizon``) and the period running
    now (0 before the start, above the horizon after the end)."""
    today = record.protocol.current_period(utc_now() if now is None else now)
    return max(0, min(record.protocol.horizon, today - 1)), today


def _estimate(record: StudyRecord, enrolled: Any, totals: Any,
              confidence: float) -> dict[str, Any] | None:
    """The estimate of every period that has **ended** (a period still running, or not yet
    started, is never estimated: its reports are not all due), or None while withheld."""
    devices = int(np.sum(enrolled))
    if devices < record.min_devices:
        return None
    ended, today = ended_periods(record)
    release = estimate_from_running_sums(record.protocol, enrolled, totals,
                                         confidence=confidence)
    columns = estimate_columns(release)
    columns["unclamped"] = [None if np.isnan(v) else float(v) for v in release.unclamped]
    columns = {name: col[:ended] for name, col in columns.items()}
    # None (NaN): a period whose reports are not all in yet, which says nothing either
    lower, upper, band_lo, band_hi = (np.asarray(columns[c], dtype=float) for c in (
        "lower", "upper", "band_lower", "band_upper"))
    return {
        "study": record.study,
        "param_id": record.param_id,
        "devices": devices,
        "confidence": confidence,
        "epsilon": release.epsilon,
        "unit": release.unit,
        "mechanism": release.mechanism,
        "periods_ended": ended,
        "today": today,
        # every shown interval (band) is [0, devices]: the estimate says nothing yet
        "vacuous": bool(ended and np.all(np.isnan(lower) | (lower <= 0) & (upper >= devices))),
        "band_vacuous": bool(ended and np.all(np.isnan(band_lo)
                                              | (band_lo <= 0) & (band_hi >= devices))),
        "description": release.error.description + " Only periods that have ended are "
                       f"estimated (1..{ended}).",
        "columns": columns,
    }


def estimate_payload(service: Service, record: StudyRecord,
                     confidence: float) -> dict[str, Any] | None:
    """The estimate as JSON-ready data, or None while fewer devices than the public minimum
    are enrolled."""
    enrolled, totals = service.running_sums(record)
    return _estimate(record, enrolled, totals, confidence)


def summary_payload(service: Service, record: StudyRecord, confidence: float) -> dict[str, Any]:
    """Devices per order, reports per period, rejections by reason and the estimate, from one
    snapshot of the database (:meth:`Service.snapshot`: no writer blocks it)."""
    with service.snapshot() as conn:
        enrolled, totals = service.running_sums(record, conn)
        rejections = service.rejection_counts(record.study, conn)
    p = record.protocol
    per_period = np.zeros(p.padded + 1, dtype=np.int64)
    for (h, j), (_, count) in totals.items():
        per_period[min(j << h, p.horizon)] += count  # due at j·2^h (padding: at the end)
    ended, today = ended_periods(record)
    return {
        "study": record.public(),
        "today": today,
        "periods_ended": ended,
        "devices": int(np.sum(enrolled)),
        "enrolled_per_order": [int(v) for v in enrolled],
        "reports_per_period": {
            "period": list(range(1, p.horizon + 1)),
            "date": [p.period_start(t).isoformat() for t in range(1, p.horizon + 1)],
            "reports": [int(v) for v in per_period[1:p.horizon + 1]],
        },
        "rejections": rejections,
        "estimate": _estimate(record, enrolled, totals, confidence),
    }


def render_export(payload: dict[str, Any], fmt: str) -> Response:
    """The payload as a JSON, CSV or Parquet response (tables: one row per period)."""
    cols = payload["columns"]
    names = list(cols)
    name = f"{payload['study']}-estimates"
    if fmt == "json":
        return JSONResponse(payload)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(zip(*(cols[c] for c in names), strict=True))
        return Response(buf.getvalue(), media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="{name}.csv"'})
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: cols[c] for c in names})
    meta = {k: str(v) for k, v in payload.items() if k != "columns"}
    table = table.replace_schema_metadata(meta)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return Response(sink.getvalue(), media_type="application/vnd.apache.parquet", headers={
        "Content-Disposition": f'attachment; filename="{name}.parquet"'})


def _raw_columns(service: Service, record: StudyRecord, table: str) -> dict[str, Any]:
    """The rows of one raw export, read in one transaction, sorted by device (and interval)."""
    import pyarrow as pa

    with service.engine.connect() as conn, conn.begin():
        if table == "reports":  # the upload rows unpacked, one row per report
            reports = storage.report_columns(conn, record.study)
            cols: dict[str, Any] = {n: pa.array(reports[n], type=pa.int64())
                                    for n in storage.REPORT_COLUMNS}
            cols["param_id"] = pa.array([record.param_id] * reports["bit"].size,
                                        type=pa.string())
            return cols
        t = storage.devices
        rows = conn.execute(sa.select(t.c.device, t.c.order).where(
            t.c.study == record.study).order_by(t.c.device)).all()
    return {n: pa.array([int(r[i]) for r in rows], type=pa.int64())
            for i, n in enumerate(("device", "order"))}


def raw_export(service: Service, record: StudyRecord, table: str) -> Response:
    """The study's raw reports or its enrolment as a Parquet file.

    The schema metadata carries the study id, its ``param_id`` and its sealed parameters (the
    ``params`` of ``GET /v1/studies/{study}``), so the file is enough to re-aggregate offline.

    Privacy
    -------
    Unit: one device's whole sequence (device level). Every report was randomized on its
    device under ε-local DP (certificate in the parameters) and device ids are the service's
    random pseudonyms; the enrolment holds only each device's order, drawn independently of its
    data. Exporting them spends no budget. Download them to files only the auditor can read
    (mode 0600): they hold every collected report.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table_ = pa.table(_raw_columns(service, record, table))
    table_ = table_.replace_schema_metadata({
        "study": record.study, "param_id": record.param_id, "params": record.params_json,
        "table": table})
    sink = io.BytesIO()
    pq.write_table(table_, sink)
    name = f"{record.study}-{table}"
    return Response(sink.getvalue(), media_type="application/vnd.apache.parquet", headers={
        "Content-Disposition": f'attachment; filename="{name}.parquet"'})
