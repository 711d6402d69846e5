"""A Spark cluster whose executors lack dpfreq (issue 51): deployed as it is deployed.

The executors' Python is a bare virtual environment (no dpfreq, no numpy, no pyarrow): a
separate local Spark (in a subprocess, so its ``PYSPARK_PYTHON`` is that interpreter) runs the
grouped and ungrouped window releases and the grouped profile through Spark SQL alone and must
give the seeded releases of the memory engine, byte for byte in their public dicts; a Python
step on the executors (the distributed profile sketch draws its noise there) fails with one
line naming what the executors need and the docs section; a trivial Python worker fails there
too (so the environment really lacks the packages).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_SCRIPT = r"""
import json, sys
import numpy as np, pandas as pd
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("dpfreq-bare-executors")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.adaptive.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "1g")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
from dpfreq.engines import get_engine
from dpfreq.errors import DPFreqError
from dpfreq.profile import DistributedProfileSketch, release_profile
from dpfreq.windows import release_window_counts

gen = np.random.default_rng(5)
n = 1500
df = pd.DataFrame({"u": gen.integers(0, 120, n).astype(str),
                   "g": gen.choice(["a", "b", "c", "d'q"], n),
                   "t": gen.integers(1, 11, n)})
out = {}
sdf = spark.createDataFrame(df)
for name, engine, src in (("memory", "memory", df), ("spark", get_engine(spark), sdf)):
    g = release_window_counts(src, item="u", time="t", horizon=10, epsilon=1.0, unit="item",
                              k_values=[1, 2], windows=["total", "cumulative", 3, "all"],
                              group="g", groups=["a", "b", "d'q"], max_groups_per_item=2,
                              rng=3, engine=engine)
    u = release_window_counts(src, item="u", time="t", horizon=10, epsilon=1.0, unit="item",
                              k_values=[1], windows=["cumulative", 4], rng=3, engine=engine)
    p = release_profile(src, item="u", group="g", groups=["a", "b"], max_groups_per_item=2,
                        domain_size=500, max_count=9, epsilon=1.0, unit="item", rng=4,
                        engine=engine)
    out[name] = [json.loads(r.to_json()) for r in (g, u, p)]
try:
    sdf.mapInArrow(lambda it: it, sdf.schema).count()
    out["python_worker"] = "ran"
except Exception as exc:
    out["python_worker"] = "failed"
try:
    DistributedProfileSketch.create(engine=spark, domain_size=64, max_count=3, epsilon=1.0,
                                    block_size=16, rng=1).to_numpy()
    out["sketch"] = "ran"
except DPFreqError as exc:
    out["sketch"] = str(exc)
spark.stop()
print("RESULT " + json.dumps(out))
"""


def _without_engine(value: Any) -> Any:
    """A release's dict without the fields naming the engine that read the data."""
    if isinstance(value, dict):
        return {k: _without_engine(v) for k, v in value.items() if k not in ("engine", "source")}
    if isinstance(value, list):
        return [_without_engine(v) for v in value]
    return value


def test_releases_run_on_executors_without_dpfreq(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["PYSPARK_PYTHON"] = str(python)
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    out = json.loads(lines[0][7:])
    # the bare environment really cannot run Python steps
    assert out["python_worker"] == "failed"
    # every release computed by Spark SQL alone equals the memory engine's, seeded (but for
    # the name of the engine each states)
    assert _without_engine(out["spark"]) == _without_engine(out["memory"])
    # the one step that needs dpfreq on the executors says so in one line
    message = out["sketch"]
    assert "\n" not in message
    assert "PYSPARK_PYTHON" in message
    assert "docs/scaling.md" in message
