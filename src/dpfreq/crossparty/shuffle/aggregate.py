"""The messages from the workers to the aggregator, and what the aggregator makes of them.

Each worker sends, per measured entity, one frame: a public header (measurement, parameters'
id, its position, the entity, the plan, the largest value ``V`` and the number of words) and
the permuted words of its output (:func:`~dpfreq.crossparty.shuffle.worker.worker_output`).
The aggregator adds the two outputs modulo ``2^32``: the result is the shuffled multiset of the
entity's register values and both workers' dummies, of which it keeps only the histogram
(:func:`reconstruct_histogram`). Every value must lie in ``0..V``: parties' registers are in
``0..K`` and dummies in ``0..V``, so a value outside means that a worker or a party deviated
from the protocol (a worker's changed word reconstructs to a uniform 32-bit number, outside
with probability ``1 − (V+1)/2^32``); nothing is then released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.shuffle.params import ShuffleParams
from dpfreq.crossparty.shuffle.plan import Plan
from dpfreq.crossparty.shuffle.shares import Frame, decode_frame, encode_frame
from dpfreq.errors import DataError

__all__ = ["OUTPUT_KIND", "output_frame", "read_output", "reconstruct_histogram"]

OUTPUT_KIND = "worker-output"
_FIELDS = {"kind", "measurement", "param_id", "position", "entity", "plan", "values", "length",
           "sha256"}


def output_frame(words: NDArray[np.uint32], *, params: ShuffleParams, plan: Plan,
                 position: int, entity: int) -> bytes:
    """The frame of one worker output.

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=2, sampling_start=0, sampling_width=1,
    ...     max_frequency=1, epsilon=1.0, delta=1e-9, parties=["tv"], per_party=False,
    ...     coverage=Coverage(),
    ...     deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    >>> plan = Plan(included=(("tv", "a" * 32),), missing=(), entities=((0, (0,)),))
    >>> data = output_frame(np.array([1, 2, 3], dtype=np.uint32), params=params, plan=plan,
    ...                     position=0, entity=0)
    >>> read_output(data, params).header["length"]
    3
    """
    values = params.max_frequency * len(dict(plan.entities)[entity])
    return encode_frame({"kind": OUTPUT_KIND, "measurement": params.measurement,
                         "param_id": params.param_id, "position": position, "entity": entity,
                         "plan": plan.to_dict(), "values": values, "length": int(words.size)},
                        words.astype("<u4").tobytes())


def read_output(data: bytes, params: ShuffleParams, *, label: str = "the worker output"
                ) -> Frame:
    """Check a worker output's frame against the parameters (DataError when malformed).

    The plan inside is checked too (:meth:`Plan.from_dict`), and the entity must be one it
    measures, with its ``V``.
    """
    frame = decode_frame(data, kinds=(OUTPUT_KIND,), label=label)
    h = frame.header

    def bad(reason: str) -> DataError:
        return DataError(f"{label} is refused: {reason}.")

    if set(h) != _FIELDS:
        raise bad("its header has other fields than a worker output's")
    if h["measurement"] != params.measurement or h["param_id"] != params.param_id:
        raise bad("it was made for other parameters (param_id differs)")
    if h["position"] not in (0, 1):
        raise bad("its position is not 0 or 1")
    plan = Plan.from_dict(h["plan"], params, label=f"the plan of {label}")
    entities = dict(plan.entities)
    if h["entity"] not in entities or h["values"] != params.max_frequency * len(
            entities[h["entity"]]):
        raise bad("its entity is not one the plan measures")
    length = h["length"]
    if (not isinstance(length, int) or length < params.registers
            or len(frame.payload) != 4 * length):
        raise bad("its length does not match its words")
    return frame


def reconstruct_histogram(first: Any, second: Any, values: int) -> NDArray[np.int64]:
    """The histogram ``h[v]``, ``v = 0..values``, of the sum of two outputs modulo ``2^32``.

    Raises
    ------
    DataError
        The outputs differ in length, or some value lies outside ``0..values`` (a worker or
        party deviated; the message gives no value).

    Examples
    --------
    >>> a = np.array([5, 2**32 - 1, 7], dtype=np.uint32)
    >>> b = np.array([2**32 - 5, 2, 2**32 - 6], dtype=np.uint32)
    >>> reconstruct_histogram(a, b, 2).tolist()  # values 0, 1, 1
    [1, 2, 0]
    """
    a = np.asarray(first, dtype=np.uint32)
    b = np.asarray(second, dtype=np.uint32)
    if a.shape != b.shape or a.ndim != 1:
        raise DataError("the two workers' outputs have different lengths: nothing is "
                        "released.")
    y = a + b
    if y.size and int(y.max()) > values:
        raise DataError("the two workers' outputs do not reconstruct register values in "
                        f"0..{values}: a worker or a party deviated from the protocol; "
                        "nothing is released.")
    return np.bincount(y, minlength=values + 1).astype(np.int64)
