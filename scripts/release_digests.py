"""Digests of seeded releases, to check that a reshaping changed no published byte.

    PYTHONPATH=<old checkout>/src python scripts/release_digests.py > old.txt
    PYTHONPATH=<new checkout>/src python scripts/release_digests.py > new.txt
    diff old.txt new.txt && echo byte-identical

Each line is a case and the SHA-256 prefix of its ``to_json()`` (or of the values a function
returns): anonymized histograms, profiles and window counts, each plain, over a public group
list and with private group selection, zCDP window releases, a window plan, a profile sketch,
a cross-party merge and the secure-shuffle protocol. Every release is seeded, so equal digests
mean equal bytes. Not a test: the digests are compared between two revisions, never to stored
values.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings

import numpy as np
import pandas as pd

import dpfreq
from dpfreq import noise
from dpfreq.crossparty.shuffle import ShuffleParams, run_protocol

warnings.simplefilter("ignore")


def cases() -> dict[str, str]:
    out: dict[str, str] = {}
    for g in (0.3, 1.0, math.log(3)):
        pts = np.arange(-8, 9)
        out[f"noise laws at gamma={g:.4f}"] = json.dumps([
            noise.discrete_laplace_pmf(pts, g).tolist(), noise.discrete_laplace_cdf(pts, g).tolist(),
            noise.discrete_laplace_tail(pts, g).tolist(), noise.discrete_laplace_tail_bound(1e-6, g),
            noise.geometric_pmf(pts, g).tolist(), noise.geometric_cdf(pts, g).tolist(),
            noise.geometric_variance(g), noise.discrete_laplace_variance(g),
            noise.discrete_laplace_mean_abs(g)])
    gen = np.random.default_rng(4)
    alog = pd.DataFrame({"w": gen.zipf(1.6, 30_000) % 800,
                         "site": gen.choice(["a", "b", "c"], 30_000)})
    anon = {"item": "w", "epsilon": 1.0, "unit": "event"}
    out["anonymized"] = dpfreq.release_anonymized_histogram(alog, rng=2, **anon).to_json()
    out["anonymized, public groups"] = dpfreq.release_anonymized_histogram(
        alog, group="site", groups=["a", "b", "zz"], rng=2, **anon).to_json()
    out["anonymized, selected groups"] = dpfreq.release_anonymized_histogram(
        alog, group="site", delta=1e-6, rng=8, **anon).to_json()
    gen = np.random.default_rng(5)
    plog = pd.DataFrame({"u": gen.integers(0, 300, 4000),
                         "g": gen.choice(["a", "b", "c", "x", "d'q"], 4000)})
    prof = {"item": "u", "domain_size": 1000, "max_count": 7, "epsilon": 1.0, "unit": "item"}
    out["profile"] = dpfreq.release_profile(plog, rng=11, **prof).to_json()
    out["profile, public groups"] = dpfreq.release_profile(
        plog, group="g", groups=["a", "b", "none"], max_groups_per_item=2, rng=11,
        **prof).to_json()
    out["profile, selected groups"] = dpfreq.release_profile(
        plog, group="g", max_groups_per_item=2, delta=1e-6, rng=12, **prof).to_json()
    sketch = dpfreq.ProfileSketch(1000, max_count=7, epsilon=1.0, rng=3)
    sketch.update(plog["u"].to_numpy() % 1000)
    out["profile sketch"] = sketch.reconstruct().to_json()
    gen = np.random.default_rng(7)
    wlog = pd.DataFrame({"u": gen.integers(0, 400, 3000), "g": gen.choice(["a", "b", "c", "x"], 3000),
                         "t": gen.integers(1, 11, 3000)})
    win = {"item": "u", "time": "t", "horizon": 10, "epsilon": 1.0, "k_values": [1, 2],
           "windows": ["cumulative", "total", 3]}
    out["windows, item"] = dpfreq.release_window_counts(wlog, unit="item", rng=5, **win).to_json()
    out["windows, event"] = dpfreq.release_window_counts(wlog, unit="event", rng=5, **win).to_json()
    out["windows, public groups"] = dpfreq.release_window_counts(
        wlog, unit="item", group="g", groups=["a", "b", "zz"], max_groups_per_item=2, rng=5,
        **win).to_json()
    out["windows, selected groups"] = dpfreq.release_window_counts(
        wlog, unit="item", group="g", max_groups_per_item=2, rng=6, delta=1e-6, **win).to_json()
    out["windows, zCDP groups"] = dpfreq.release_window_counts(
        wlog, unit="item", group="g", groups=["a", "b"], max_groups_per_item=2, rng=6,
        delta=1e-6, **win).to_json()
    plan_kw = {k: v for k, v in win.items() if k not in ("item", "time")}
    out["windows plan"] = str(dpfreq.plan_window_counts(unit="item", **plan_kw))
    key = bytes(range(32))
    params = dpfreq.CrossPartyParams(
        measurement="spring", registers=512, sampling_start=0, sampling_width=1,
        max_frequency=3, epsilon_reach=math.log(3), epsilon_frequency=1.0,
        hash="sha256-prefix/v1", key_id=dpfreq.key_fingerprint(key))
    tv = dpfreq.build_sketch({"user": np.repeat(np.arange(0, 200), 2),
                              "time": np.tile(np.arange(2), 200)},
                             user="user", party="tv", params=params, key=key, rng=1)
    web = dpfreq.build_sketch({"user": np.repeat(np.arange(100, 300), 2),
                               "time": np.tile(np.arange(2), 200)},
                              user="user", party="web", params=params, key=key, rng=2)
    out["cross-party merge"] = dpfreq.merge_sketches([tv, web], confidence=0.9).to_json()
    for per_party in (False, True):
        shuffle = ShuffleParams(
            measurement="m", registers=1024, sampling_start=0, sampling_width=1,
            max_frequency=3, epsilon=math.log(3), delta=1e-9, parties=["tv", "web", "app"],
            per_party=per_party, deadline="2030-01-01T00:00:00Z", hash="sha256-prefix/v1",
            key_id="0" * 32)
        gen = np.random.default_rng(9)
        x = gen.poisson(0.4, (3, 1024)).clip(0, 3)
        out[f"secure shuffle, per_party={per_party}"] = run_protocol(
            x, params=shuffle, confidence=0.95, rng=gen).release.to_json()
    return out


if __name__ == "__main__":
    for name, text in cases().items():
        print(f"{hashlib.sha256(text.encode()).hexdigest()[:16]}  {name}")
