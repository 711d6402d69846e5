"""Refresh ``tests/durations.json`` from a pytest run's ``--durations`` report.

    python -m pytest -q -n 2 --dist loadgroup --durations=0 --durations-min=0.05 \
        | python tests/durations.py

Run it on a quiet machine (or pass ``--scale F``, the run's CPU time over its wall time, to
bring the durations of a loaded run back to quiet ones). Reads the report on stdin; a run of
part of the suite (some files) updates their tests and keeps the others. Writes, per test (node
id), the seconds of its setup, call and teardown together, for every test at or above
:data:`KEEP` seconds, and only for tests that exist: every refresh collects the suite and drops
the node ids that are no longer collected (``tests/test_tiers.py`` fails on a stale id; ``python
tests/durations.py --prune`` drops them without a run). ``tests/conftest.py`` marks ``slow``
every test listed at or above its ``SLOW_SECONDS`` and runs the longest tests first.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

KEEP = 0.05
OUT = Path(__file__).with_name("durations.json")
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
    return total


def collected() -> set[str]:
    """The node ids of the whole suite (``pytest --collect-only``, no run)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"],
                          cwd=OUT.parents[1], capture_output=True, text=True, check=True)
    return {line.strip() for line in done.stdout.splitlines() if "::" in line}


def merge(old: dict[str, float], new: dict[str, float], scale: float,
          ids: set[str]) -> dict[str, float]:
    """``old`` updated by ``new`` (times ``scale``), restricted to ``ids``, at or above KEEP."""
    out = {**old, **{k: v * scale for k, v in new.items()}}
    return {k: round(v, 2) for k, v in sorted(out.items()) if k in ids and v >= KEEP}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the report's seconds (CPU time / wall time of a loaded run)")
    parser.add_argument("--prune", action="store_true",
                        help="no report on stdin: only drop the ids no longer collected")
    args = parser.parse_args(argv)
    new = {} if args.prune else parse(sys.stdin.read().splitlines())
    old = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    OUT.write_text(json.dumps(merge(old, new, args.scale, collected()), indent=1) + "\n",
                   encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
