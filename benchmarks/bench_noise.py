"""Throughput of the exact discrete-Laplace sampler against numpy's float two-sided geometric.

    python benchmarks/bench_noise.py [--quick | --full] [--epsilon 1.0 ...]

For each N (10^6 and 10^7; 10^8 with ``--full``; 10^6 only with ``--quick``), each ε and each bit
generator (numpy PCG64 and randomgen ChaCha20, the secure default), prints samples/s of

* ``exact``: :func:`dpfreq.noise.sample_discrete_laplace` (exact inverse cdf on 64-bit words),
* ``spec4``: the Canonne–Kamath–Steinke (2020) rejection sampler alone (the previous
  implementation; N <= 10^7),
* ``float``: the baseline ``g.geometric(p, N) - g.geometric(p, N)`` with ``p = 1 - e^{-ε}``
  (numpy's float inverse-cdf geometric, not exact),

all measured in the same run (best of ``--repeat`` timings), and the ratio exact/float.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import randomgen

import dpfreq._exact_sampling as exact_sampling
from dpfreq import noise


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _spec4(gamma: Fraction, n: int, gen: np.random.Generator) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    step = 1 << 21
    for start in range(0, n, step):
        stop = min(n, start + step)
        out[start:stop] = exact_sampling.discrete_laplace_chunk(
            gamma.numerator, gamma.denominator, stop - start, gen, signed=True
        )
    return out


def _float_two_sided(p: float, n: int, gen: np.random.Generator) -> np.ndarray:
    return gen.geometric(p, n) - gen.geometric(p, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="N = 10^6 only")
    size.add_argument("--full", action="store_true", help="also N = 10^8 (needs ~3 GB)")
    parser.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 0.1])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [10**6] if args.quick else [10**6, 10**7] + ([10**8] if args.full else [])
    generators = {
        "PCG64": lambda: np.random.Generator(np.random.PCG64(12345)),
        "ChaCha20": lambda: np.random.Generator(randomgen.ChaCha(key=12345, rounds=20)),
    }
    header = (f"{'N':>11} {'eps':>5} {'bitgen':>10} {'exact M/s':>10} {'spec4 M/s':>10} "
              f"{'float M/s':>10} {'exact/float':>11}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        repeat = args.repeat if n <= 10**7 else 1
        for eps in args.epsilon:
            gamma = noise.discrete_laplace_gamma(eps, 1)
            noise.sample_discrete_laplace(gamma, 1000, rng=0)  # build the cached table
            p = -math.expm1(-float(gamma))
            for name, make in generators.items():
                gen = make()
                exact = functools.partial(noise.sample_discrete_laplace, gamma, n, rng=gen)
                t_exact = _best(exact, repeat)
                t_float = _best(functools.partial(_float_two_sided, p, n, gen), repeat)
                spec = ""
                if n <= 10**7:
                    spec = f"{n / _best(functools.partial(_spec4, gamma, n, gen), 1) / 1e6:.1f}"
                print(f"{n:>11,} {eps:>5g} {name:>10} {n / t_exact / 1e6:10.1f} {spec:>10} "
                      f"{n / t_float / 1e6:10.1f} {t_float / t_exact:11.2f}", flush=True)

if __name__ == "__main__":
    main()
