"""Request and response bodies (pydantic): validation of their shape happens here, before any
handler runs; a body that does not fit is answered 422 with a one-line error."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from dpfreq.longitudinal.params import PROTOCOL_VERSION

__all__ = [
    "EnrolRequest",
    "Enrolment",
    "Report",
    "ReportBatch",
    "Stored",
    "StudyCreate",
    "TokenOut",
    "TokenRequest",
]

MAX_BATCH = 4096


def _integral(value: object) -> object:
    """1.0 is an integer to JSON Schema: accept an integral float as that int (strict models
    refuse every other float, and strings and booleans)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Int = Annotated[int, BeforeValidator(_integral)]
_STRICT = ConfigDict(extra="forbid", strict=True)


class StudyCreate(BaseModel):
    """A new study: protocol parameters, calendar and the public minimum of devices. Strict
    like a report: no field is coerced from another JSON type (``"1.0"`` is not a number; an
    integral number such as ``64.0`` is an integer)."""

    model_config = _STRICT

    study: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$",
                       description="Study id used in URLs (lower-case letters, digits, _ and -).")
    title: str = Field(default="", max_length=200)
    horizon: Int = Field(ge=1, le=1 << 16, description="Number of periods.")
    max_changes: Int = Field(ge=1, le=1 << 16, description=(
        "Change budget k per device (at most the horizon: a device has at most one change "
        "per period)."))
    epsilon: float = Field(ge=1e-6, le=1000.0,
                           description="Each device's local ε over its whole sequence.")
    method: Literal["auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"] = Field(
        description="The randomizer the devices run (auto: the largest exact gap c_gap).")
    start: str = Field(max_length=40, description=(
        "Start of period 1: an ISO date (midnight UTC) or timestamp (UTC unless it has an "
        "offset)."))
    period: str = Field(pattern=r"^[0-9]{1,6}(min|h|d|w)$",
                        description="Length of a period: 1d, 7d, 1w, 6h, 15min.")
    min_devices: Int = Field(ge=1, le=(1 << 31) - 1, description=(
        "Public minimum number of devices that have reported before any estimate is served."))
    enrolment: Literal["secret", "open"] = Field(default="secret", description=(
        "secret: a device enrols with the study's enrolment secret (returned once on "
        "creation) as its bearer token; open: anyone may enrol (rate limited per address)."))
    per_order_sparsity: bool = False
    closes_at: str | None = Field(default=None, max_length=40, description=(
        "When the study stops taking reports and enrolments: an ISO date (midnight UTC) or "
        "timestamp (UTC unless it has an offset). Estimates stay readable. Default: open "
        "until its manager closes it."))


class EnrolRequest(BaseModel):
    """What a device sends to enrol: the parameters it runs and its order."""

    model_config = _STRICT

    param_id: str = Field(max_length=64)
    order: Int = Field(ge=0, le=62)
    protocol_version: Annotated[int, Field(ge=0, le=1 << 30),
                                BeforeValidator(_integral)] | None = Field(
        default=None, description=(
            f"The protocol version the device runs: {PROTOCOL_VERSION} (docs/protocol.md). "
            "Another version is refused with 400 naming the supported one."))


class Enrolment(BaseModel):
    """The device's id and its bearer token (shown once)."""

    device: int
    token: str
    order: int


class Report(BaseModel):
    """One report in wire form."""

    model_config = _STRICT

    device: int = Field(ge=0, lt=1 << 62)
    order: int = Field(ge=0, le=62)
    interval: int = Field(ge=1, lt=1 << 31)
    bit: int = Field(ge=0, le=1)
    param_id: str = Field(max_length=64)


class ReportBatch(BaseModel):
    """Reports of one device, all-or-nothing."""

    model_config = _STRICT

    reports: list[Report] = Field(min_length=1, max_length=MAX_BATCH)


class Stored(BaseModel):
    """Answer to an accepted batch: the same for a first upload and any identical retry."""

    stored: int


class TokenOut(BaseModel):
    """A new bearer token (shown once) and its id (a hash prefix, used to revoke it)."""

    token: str
    id: str
    expires: float | None = None


class TokenRequest(BaseModel):
    """Options of a new token: its lifetime (none: until revoked)."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: Annotated[int, Field(ge=1, le=10 * 366 * 86400),
                           BeforeValidator(_integral)] | None = None
