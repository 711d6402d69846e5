"""The least-squares consistency pass of a complete B-ary tree (Hay, Rastogi, Miklau and Suciu
2010): post-processing of noisy node values, two passes, equal to ordinary least squares (tested
against ``numpy.linalg.lstsq``). Its prefix weights are
:func:`dpfreq.windows.layouts.weights.consistent_prefix_weights`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.errors import ParameterError, public_errors

__all__ = ["consistent_tree"]


@public_errors("consistent_tree")
def consistent_tree(noisy_levels: list[NDArray[Any]], branching: int) -> list[NDArray[Any]]:
    """Least-squares consistent node values of a complete B-ary tree (Hay et al. 2010).

    Parameters
    ----------
    noisy_levels : list of arrays
        Noisy node values level by level, leaves first (level 0 has ``B^H−1`` entries, the last
        level is the root with one entry). Equal noise variance on every node is assumed.
        Extra trailing dimensions are batch dimensions (many trees at once).
    branching : int
        ``B >= 2``.

    Returns
    -------
    list of arrays
        Consistent values (every parent equals the sum of its children), same layout. This is
        post-processing: it takes no randomness and costs no privacy.

    Examples
    --------
    >>> import numpy as np
    >>> levels = [np.array([1.0, 2.0]), np.array([3.0])]  # leaves, then the root
    >>> [lev.tolist() for lev in consistent_tree(levels, 2)]  # already consistent: unchanged
    [[1.0, 2.0], [3.0]]
    """
    b = check_int(branching, "branching", minimum=2)
    levels = [np.asarray(v, dtype=np.float64) for v in noisy_levels]
    for i in range(1, len(levels)):
        if levels[i - 1].shape[0] != b * levels[i].shape[0]:
            raise ParameterError(message("noisy_levels",
                                         "levels of a complete B-ary tree", "mismatched sizes"))
    z = [levels[0].copy()]
    for i in range(1, len(levels)):
        height = i + 1
        prev = z[i - 1]
        child_sum = prev.reshape((-1, b, *prev.shape[1:])).sum(axis=1)
        w_self = (b ** height - b ** (height - 1)) / (b ** height - 1)
        w_kids = (b ** (height - 1) - 1) / (b ** height - 1)
        z.append(w_self * levels[i] + w_kids * child_sum)
    out = [np.empty(0)] * len(levels)
    out[-1] = z[-1].copy()
    for i in range(len(levels) - 2, -1, -1):
        parent = np.repeat(out[i + 1], b, axis=0)
        sib_sum = np.repeat(z[i].reshape((-1, b, *z[i].shape[1:])).sum(axis=1), b, axis=0)
        out[i] = z[i] + (parent - sib_sum) / b
    return out
