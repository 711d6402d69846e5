"""Estimates, exports (JSON, CSV, Parquet) and the dashboard's summary."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
from fastapi.responses import JSONResponse, Response

from .protocol import estimate_columns, estimate_from_running_sums
from .service import Service, StudyRecord

__all__ = ["EXPORT_FORMATS", "estimate_payload", "render_export", "summary_payload"]

EXPORT_FORMATS = ("json", "csv", "parquet")


def _estimate(record: StudyRecord, enrolled: Any, totals: Any,
              confidence: float) -> dict[str, Any] | None:
    devices = int(np.sum(enrolled))
    if devices < record.min_devices:
        return None
    release = estimate_from_running_sums(record.protocol, enrolled, totals,
                                         confidence=confidence)
    columns = estimate_columns(release)
    columns["unclamped"] = [float(v) for v in np.asarray(release.unclamped)]
    return {
        "study": record.study,
        "param_id": record.param_id,
        "devices": devices,
        "confidence": confidence,
        "epsilon": release.epsilon,
        "unit": release.unit,
        "mechanism": release.mechanism,
        "vacuous": bool(release.error.vacuous),
        "description": release.error.description,
        "columns": columns,
    }


def estimate_payload(service: Service, record: StudyRecord,
                     confidence: float) -> dict[str, Any] | None:
    """The estimate as JSON-ready data, or None while fewer devices than the public minimum
    are enrolled."""
    enrolled, totals = service.running_sums(record)
    return _estimate(record, enrolled, totals, confidence)


def summary_payload(service: Service, record: StudyRecord, confidence: float) -> dict[str, Any]:
    """Devices per order, reports per period, rejections by reason and the estimate."""
    enrolled, totals = service.running_sums(record)
    p = record.protocol
    per_period = np.zeros(p.padded + 1, dtype=np.int64)
    for (h, j), (_, count) in totals.items():
        per_period[min(j << h, p.horizon)] += count  # due at j·2^h (padding: at the end)
    return {
        "study": record.public(),
        "devices": int(np.sum(enrolled)),
        "enrolled_per_order": [int(v) for v in enrolled],
        "reports_per_period": {
            "period": list(range(1, p.horizon + 1)),
            "date": [p.period_start(t).isoformat() for t in range(1, p.horizon + 1)],
            "reports": [int(v) for v in per_period[1:p.horizon + 1]],
        },
        "rejections": service.rejection_counts(record.study),
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
