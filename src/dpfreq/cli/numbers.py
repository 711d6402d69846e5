"""The number types of command-line options: exact integers in a range (``2000000``,
``2_000_000`` or ``2e6``) and finite non-negative numbers, refused while options are parsed.
Re-exported by :mod:`dpfreq.cli._common`, where commands take them from."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import click

__all__ = ["COUNT", "INTEGER", "NON_NEGATIVE", "POSITIVE", "IntegerType", "NonNegativeType"]

_INT64_MAX = 2**63 - 1
#: ASCII digits, single underscores between digits, an optional fraction and exponent.
_DECIMAL = re.compile(r"[+-]?\d+(?:_\d+)*(?:\.\d+(?:_\d+)*)?(?:[eE][+-]?\d+)?", re.ASCII)


class IntegerType(click.ParamType):
    """An exact integer written ``2000000``, ``2_000_000``, ``2e6`` or ``2.5e6``, in a range.

    Scientific notation is read exactly (as a decimal, never through a float), so ``1e6`` is
    1000000 and ``1.5e0`` is refused as not an integer. The default range stops at 2^63 − 1 so
    that no value can wrap in int64 arithmetic downstream.

    Parameters
    ----------
    minimum, maximum : int, optional
        Inclusive bounds (default: no lower bound, 2^63 − 1).
    """

    name = "integer"

    def __init__(self, minimum: int | None = None, maximum: int | None = _INT64_MAX) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def _rule(self) -> str:
        if self.maximum == _INT64_MAX:  # the int64 guard: said only when it is what failed
            return (f"must be an integer{f' >= {self.minimum}' if self.minimum is not None else ''}"
                    " below 2^63 (e.g. 2000000, 2_000_000 or 2e6)")
        if self.minimum is not None and self.maximum is not None:
            bounds = f" in [{self.minimum}, {self.maximum}]"
        elif self.minimum is not None:
            bounds = f" >= {self.minimum}"
        elif self.maximum is not None:
            bounds = f" <= {self.maximum}"
        else:
            bounds = ""
        return f"must be an integer{bounds} (e.g. 2000000, 2_000_000 or 2e6)"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, bool):
            self.fail(f"{self._rule()}; got {value!r}", param, ctx)
        if isinstance(value, int):
            number = Decimal(value)
        else:
            text = str(value).strip()
            if not _DECIMAL.fullmatch(text):
                self.fail(f"{self._rule()}; got {value!r}", param, ctx)
            try:
                number = Decimal(text.replace("_", ""))
            except (InvalidOperation, ValueError):
                self.fail(f"{self._rule()}; got {value!r}", param, ctx)
        if not number.is_finite() or number != number.to_integral_value():
            self.fail(f"{self._rule()}; got {value!r}", param, ctx)
        if (self.minimum is not None and number < self.minimum) or (
                self.maximum is not None and number > self.maximum):
            self.fail(f"{self._rule()}; got {value!r}", param, ctx)
        return int(number)

    def __repr__(self) -> str:
        return f"IntegerType({self.minimum!r}, {self.maximum!r})"


INTEGER = IntegerType()
COUNT = IntegerType(minimum=0)
POSITIVE = IntegerType(minimum=1)


class NonNegativeType(click.ParamType):
    """A finite number >= 0 (a rate, a time in seconds): a negative, NaN or infinite value is
    refused while options are parsed, in the shape of :class:`IntegerType`'s refusals."""

    name = "float"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            self.fail(f"must be a finite number >= 0; got {value!r}", param, ctx)
        return number


NON_NEGATIVE = NonNegativeType()
