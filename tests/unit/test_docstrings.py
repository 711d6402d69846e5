"""The shared-docstring helper: markers are filled at the marker's indentation, and a marker
naming no fragment fails at import time."""

from __future__ import annotations

import pytest

from dpfreq._docstrings import fill_doc
from dpfreq.noise import sample_discrete_laplace, sample_geometric


def test_marker_is_replaced_at_its_indentation() -> None:
    @fill_doc(part="a : int\n    First.\nb : int\n    Second.")
    def f() -> None:
        """Summary.

        Parameters
        ----------
        [[part]]
        """

    assert f.__doc__ == ("Summary.\n\n        Parameters\n        ----------\n        a : int\n"
                         "            First.\n        b : int\n            Second.\n        ")


def test_unknown_marker_and_missing_docstring() -> None:
    with pytest.raises(KeyError):
        @fill_doc(part="x")
        def g() -> None:
            """[[other]]"""

    def h() -> None:
        pass

    assert fill_doc(part="x")(h) is h  # no docstring (python -OO): left as it is


def test_filled_public_docstrings_hold_no_marker() -> None:
    for func in (sample_geometric, sample_discrete_laplace):
        assert "[[" not in func.__doc__
        assert "rng : None, int or numpy.random.Generator" in func.__doc__
