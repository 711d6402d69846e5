"""Replay-safe device randomness: every draw of a device is a keyed function of its secret.

A device holds one 32-byte **device secret** ``S`` (from the operating system's CSPRNG,
:func:`os.urandom`; a seed only on the explicit testing path, which marks the device
``seeded``). Every random choice of the device is computed from ``S``, the parameter id of the
study it runs (``param_id``), a **purpose** and a **slot**, and from nothing else:

=================  ============  ===================================================
purpose            slot          what it decides
=================  ============  ===================================================
``"order"``        (none)        the order ``h``, uniform on ``0..log d``
``"kept-change"``  (none)        Erlingsson et al.: the kept change ``r``, uniform on ``1..k``
``"vector"``       (none)        the pre-computed vector ``v = CR(1^k)`` of a distance law
``"coin"``         interval j    the fair coin of an interval whose input is 0
``"keep"``         interval j    Erlingsson et al.: the randomized-response bit of the kept change
=================  ============  ===================================================

So a device restored from any saved state (a backup of its state file, a snapshot of its
uploader queue) sends bit-identical reports for the periods it reports again: there is no fresh
coin to compare against a stored one. The remaining assumption is that ``S`` stays on the
device (whoever holds it can recompute every draw and remove the noise).

Keyed stream
------------
``stream(purpose, *slot)`` is the byte string ``B_0 ‖ B_1 ‖ …`` with

* ``K = derive_key(S, "longitudinal-device", param_id, purpose, *slot)`` and
* ``B_b = derive_key(K, "block", b)`` for ``b = 0, 1, 2, …`` (32 bytes each),

where :func:`dpfreq.rng.derive_key` is ``HMAC-SHA256(key, "dpfreq-kdf-1" ‖ enc(part_1) ‖ …)``
with ``enc`` = one tag byte (``s`` str as UTF-8, ``i`` int in decimal ASCII, ``b`` bytes), an
8-byte big-endian length and the body. The stream is read as consecutive **64-bit words**, each
8 bytes big-endian, in order, never reused.

Exact samplers on the stream (every one consumes words from the start of its own stream)
------------------------------------------------------------------------------------------
* ``uniform_below(n)`` (``n ≥ 1``): ``n = 1`` gives 0 and reads nothing. Otherwise with
  ``b = bit_length(n − 1)`` and ``w = ⌈b/64⌉``: read ``w`` words, concatenate them big-endian
  into a ``64w``-bit integer, keep its top ``b`` bits (shift right by ``64w − b``); accept the
  value if it is ``< n``, else read ``w`` fresh words and repeat. Uniform on ``0..n−1``
  exactly, given uniform words.
* order: ``uniform_below(log d + 1)``; kept change: ``1 + uniform_below(k)``; coin of
  interval j: ``y = +1`` if ``uniform_below(2) = 1`` else ``−1`` (the top bit of one word).
* vector (distance law with integer weights ``w(ℓ)``, cumulative ``c_ℓ = Σ_{i≤ℓ} C(k,i)w(i)``,
  ``N = c_k``): ``U = uniform_below(N)``, ``ℓ = #{i : c_i ≤ U}`` (the first index with
  ``U < c_ℓ``); then a partial Fisher–Yates shuffle of ``a = [0, 1, …, k−1]``: for
  ``i = 0..ℓ−1`` swap ``a[i]`` and ``a[i + uniform_below(k − i)]``; ``v[a[0..ℓ−1]] = −1``,
  every other entry ``+1``. Each vector at distance ℓ then has probability ``w(ℓ)/N`` exactly.
* keep bit of randomized response with ``γ = s/t`` (ε rounded down to a fraction,
  :func:`dpfreq.noise.epsilon_to_fraction`): keep iff ``G`` is even, ``G ~ Geometric(e^{−γ})``
  drawn by Canonne, Kamath and Steinke (2020) in integers only: repeat ``U = uniform_below(t)``
  until ``Bernoulli(e^{−U/t})`` succeeds; ``V`` = successes of ``Bernoulli(e^{−1})`` before
  the first failure; ``G = ⌊(U + tV)/s⌋``. ``Bernoulli(e^{−a/m})`` (``0 ≤ a ≤ m``) is their
  Algorithm 1: ``K = 1``; while ``uniform_below(m·K) < a``: ``K += 1``; success iff ``K`` is
  odd. ``Pr[G even] = 1/(1 + e^{−γ})`` exactly.

These are portable: an implementation in another language that follows the rules above draws
the same values from the same secret (the unit tests re-derive every draw of the client from
this specification with ``hmac`` alone).
"""

from __future__ import annotations

import bisect
import os
from fractions import Fraction
from typing import Any

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.rng import RNGLike, derive_key, resolve_rng

__all__ = ["DOMAIN", "DeviceKey", "KeyedStream", "subset_from_choices"]

#: first part of every device sub-key
DOMAIN = "longitudinal-device"
SECRET_BYTES = 32


class KeyedStream:
    """The 64-bit words of one (secret, context, purpose, slot) and exact samplers on them.

    Examples
    --------
    >>> s = KeyedStream(bytes(32))  # a fixed key: for this example only
    >>> 0 <= s.uniform_below(10) < 10, s.words_read
    (True, 1)
    """

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._block = 0
        self._buf = b""
        self.words_read = 0

    def word(self) -> int:
        """The next 64-bit word (8 bytes big-endian of the block stream)."""
        if not self._buf:
            self._buf = derive_key(self._key, "block", self._block)
            self._block += 1
        out, self._buf = int.from_bytes(self._buf[:8], "big"), self._buf[8:]
        self.words_read += 1
        return out

    @public_errors("KeyedStream.uniform_below")
    def uniform_below(self, n: int) -> int:
        """Exactly uniform on ``0..n−1`` by rejection on the top bits of whole words."""
        if n < 1:
            raise ParameterError(_validate.message("n", ">= 1", n))
        b = (n - 1).bit_length()
        if b == 0:
            return 0
        w = (b + 63) // 64
        while True:
            value = 0
            for _ in range(w):
                value = (value << 64) | self.word()
            value >>= 64 * w - b
            if value < n:
                return value

    def coin(self) -> int:
        """A fair ±1 coin: ``+1`` iff ``uniform_below(2) = 1``."""
        return 1 if self.uniform_below(2) else -1

    def bernoulli_exp(self, num: int, den: int) -> bool:
        """``Bernoulli(e^{−num/den})`` for ``0 ≤ num ≤ den`` (Canonne et al., Algorithm 1)."""
        k = 1
        while self.uniform_below(den * k) < num:
            k += 1
        return k % 2 == 1

    def geometric(self, gamma: Fraction) -> int:
        """``G ~ Geometric(e^{−γ})`` on ``{0, 1, …}`` (Canonne et al.), integers only."""
        s, t = gamma.numerator, gamma.denominator
        while True:
            u = self.uniform_below(t)
            if self.bernoulli_exp(u, t):
                break
        v = 0
        while self.bernoulli_exp(1, 1):
            v += 1
        return (u + t * v) // s

    def keep(self, gamma: Fraction) -> bool:
        """Randomized response's keep bit: true with probability ``1/(1 + e^{−γ})``."""
        return self.geometric(gamma) % 2 == 0

    def distance_vector(self, cumulative: tuple[int, ...], k: int) -> list[int]:
        """``v ∈ {±1}^k`` of a distance law given its cumulative integer masses."""
        ell = bisect.bisect_right(cumulative, self.uniform_below(cumulative[-1]))
        choices = [self.uniform_below(k - i) for i in range(ell)]
        return subset_from_choices(k, choices)


def subset_from_choices(k: int, choices: list[int]) -> list[int]:
    """``v`` with −1 at the ℓ = len(choices) positions a partial Fisher–Yates shuffle of
    ``0..k−1`` picks when its i-th swap partner is ``i + choices[i]`` (``choices[i] < k − i``).

    The ``k!/(k − ℓ)!`` choice sequences are equally likely and map one-to-one onto the
    ordered ℓ-tuples of distinct positions, so each ℓ-subset is picked by exactly ``ℓ!`` of
    them: a uniform ℓ-subset.

    Examples
    --------
    >>> subset_from_choices(4, [2, 0])  # swaps (0, 2) then (1, 1): positions 2 and 1
    [1, -1, -1, 1]
    """
    a = list(range(k))
    for i, c in enumerate(choices):
        a[i], a[i + c] = a[i + c], a[i]
    v = [1] * k
    for pos in a[:len(choices)]:
        v[pos] = -1
    return v


class DeviceKey:
    """A device secret bound to one context (the study's ``param_id``): the source of every
    random draw of the device (module docstring).

    Parameters
    ----------
    secret : bytes
        32 bytes; created by :meth:`create` from the OS CSPRNG.
    context : str
        What the draws are for (the ``param_id`` of the parameters the device runs).
    seeded : bool, keyword-only
        True when the secret came from a seed (testing only).

    Examples
    --------
    >>> key = DeviceKey.create("0123456789abcdef", rng=7)  # a seed: for this example only
    >>> key.seeded, key.stream("order").uniform_below(6) == key.stream("order").uniform_below(6)
    (True, True)
    >>> DeviceKey.create("0123456789abcdef").seeded  # the OS CSPRNG
    False
    """

    @public_errors("DeviceKey")
    def __init__(self, secret: bytes, context: str, *, seeded: bool) -> None:
        if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
            raise DataError(f"the device secret must be {SECRET_BYTES} bytes.")
        if not isinstance(context, str) or not context:
            raise ParameterError(_validate.message("context", "a non-empty str",
                                                   context))
        self._secret = secret
        self.context = context
        self.seeded = bool(seeded)

    @classmethod
    @public_errors("DeviceKey")
    def create(cls, context: str, rng: RNGLike = None) -> DeviceKey:
        """A new secret: :func:`os.urandom` for ``rng=None`` (production); for a seed or a
        generator (tests, simulations) 32 bytes drawn from it, marked ``seeded``."""
        if rng is None:
            return cls(os.urandom(SECRET_BYTES), context, seeded=False)
        gen = resolve_rng(rng).generator
        return cls(bytes(gen.bytes(SECRET_BYTES)), context, seeded=True)

    def stream(self, purpose: str, *slot: int) -> KeyedStream:
        """The keyed stream of ``(purpose, *slot)`` (a fresh reader from its first word)."""
        return KeyedStream(derive_key(self._secret, DOMAIN, self.context, purpose,
                                      *(int(s) for s in slot)))

    def to_state(self) -> dict[str, Any]:
        """``{"secret": hex, "seeded": bool}``: the secret, to be kept on the device only."""
        return {"secret": self._secret.hex(), "seeded": self.seeded}

    @classmethod
    def from_state(cls, state: Any, context: str) -> DeviceKey:
        """Rebuild from :meth:`to_state` (DataError on a malformed secret)."""
        try:
            secret = bytes.fromhex(state["secret"])
            seeded = state["seeded"]
        except (KeyError, TypeError, ValueError):
            raise DataError("field 'secret' must be 64 hex digits and 'seeded' a bool.") \
                from None
        if not isinstance(seeded, bool):
            raise DataError("field 'seeded' must be a bool.")
        return cls(secret, context, seeded=seeded)
