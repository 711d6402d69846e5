"""The one key derivation of dpfreq is injective in what it keys (STYLE.md rule 11b).

An earlier scheme numbered window structures ``1000 + sid`` and ``2·(1000 + sid) + i``: with 1001
structures two of them shared a key. ``derive_key`` encodes each part with a type tag and a
length, so different tuples never meet; these tests check the encoding itself (exactly) and the
derived keys over many structures.
"""

from __future__ import annotations

import itertools

import pytest

from dpfreq.errors import ParameterError
from dpfreq.rng import _encode_part, derive_key, keyed_generator

KEY = bytes(range(32))


def _encoding(*parts: object) -> bytes:
    return b"".join(_encode_part(p) for p in parts)  # type: ignore[arg-type]


def test_encoding_is_injective_on_colliding_candidates() -> None:
    # tuples that naive concatenation or small-integer arithmetic would confuse
    candidates = [
        ("tree", 1, 12), ("tree", 11, 2), ("tree1", 12), ("tree", "1", 12), ("tree", 112),
        (b"tree", 1, 12), ("tree", 1, 12, ""), ("tree", 1, 12, b""), (2 * (1000 + 0) + 1,),
        (1000 + 1001,), (2001,), ("2001",), (b"2001",), (), ("",), (b"",), (0,), (-0,), (-1,),
        ("windows", "cumulative", 1, 0), ("windows", "cumulative", 10), ("windows", "cumul", 1),
    ]
    encoded = {}
    for parts in candidates:
        enc = _encoding(*parts)
        if enc in encoded:
            assert encoded[enc] == parts or (parts in ((0,), (-0,)))  # -0 == 0 in Python
        encoded[enc] = parts


def test_many_structures_get_distinct_keys() -> None:
    # every (family, k, tree) of a release with 1001 k-values and 3 families
    keys = {derive_key(KEY, "windows", fam, k, tree)
            for fam, k, tree in itertools.product(("cumulative", "block", "tree2d"),
                                                  range(1, 1002), range(2))}
    assert len(keys) == 3 * 1001 * 2


def test_derived_key_depends_on_master_key() -> None:
    other = bytes(31) + b"\x01"
    assert derive_key(KEY, "x", 1) != derive_key(other, "x", 1)


def test_keyed_generator_streams_differ_and_repeat() -> None:
    a = keyed_generator(KEY, "block", 7).integers(0, 2**63, size=4)
    b = keyed_generator(KEY, "block", 7).integers(0, 2**63, size=4)
    c = keyed_generator(KEY, "block", 70).integers(0, 2**63, size=4)
    assert (a == b).all()
    assert not (a == c).any()


@pytest.mark.parametrize("bad", [1.5, None, True, [1]])
def test_bad_parts_are_refused(bad: object) -> None:
    with pytest.raises(ParameterError, match="part of derive_key"):
        derive_key(KEY, bad)  # type: ignore[arg-type]


def test_short_key_is_refused() -> None:
    with pytest.raises(ParameterError, match="key of derive_key"):
        derive_key(b"short", "x")
