"""Refresh ``tests/durations.json`` from a pytest run's ``--durations`` report.

    python -m pytest -q -n 2 --dist loadgroup --durations=0 --durations-min=0.05 \
        | python tests/durations.py

Run it on a quiet machine. Reads the report on stdin and writes, per test (node id), the
seconds of its setup, call and teardown together, for every test at or above :data:`KEEP`
seconds. ``tests/conftest.py`` marks
``slow`` every test listed at or above its ``SLOW_SECONDS`` (measured on 2 quiet cores), so the
developer tier leaves the expensive tests to the full suite without editing their files.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

KEEP = 0.05
_LINE = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S.*?)\s*$")


def parse(lines: list[str]) -> dict[str, float]:
    """Seconds per node id (phases summed, xdist group suffixes dropped)."""
    total: dict[str, float] = {}
    for line in lines:
        match = _LINE.match(line)
        if match:
            node = match.group(2)
            if node.rfind("@") > node.rfind("]"):  # xdist's group suffix (--dist loadgroup)
                node = node.rsplit("@", 1)[0]
            total[node] = total.get(node, 0.0) + float(match.group(1))
    return {k: round(v, 2) for k, v in sorted(total.items()) if v >= KEEP}


if __name__ == "__main__":
    out = Path(__file__).with_name("durations.json")
    out.write_text(json.dumps(parse(sys.stdin.read().splitlines()), indent=1) + "\n",
                   encoding="utf-8")
