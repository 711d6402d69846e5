"""Package-level smoke tests: public API surface and version."""

from __future__ import annotations

import dpfreq


def test_all_names_exist_and_sorted() -> None:
    for name in dpfreq.__all__:
        assert hasattr(dpfreq, name), name
    assert list(dpfreq.__all__) == sorted(dpfreq.__all__)


def test_star_import() -> None:
    namespace: dict[str, object] = {}
    exec("from dpfreq import *", namespace)
    assert "Accountant" in namespace
