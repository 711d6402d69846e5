"""One keyed node-noise source for all groups of a grouped window release.

Every group's structures are copies of one plan, so the tree named ``name`` (``(family label,
k, tree index)``) has the same node law in every group. Its noise for all ``G`` groups comes
from one keyed source of that law under the release's noise key (an exact
:class:`~dpfreq.windows.noise.keyed.KeyedDiscreteLaplace` or
:class:`~dpfreq.windows.noise.keyed.KeyedDiscreteGaussian`), with group ``g``'s node ``v`` at the
counter ``v·G + g``: an injective encoding of ``(g, v)`` for ``0 <= g < G``, so every
(group, node) pair gets its own pseudorandom block and, given ideal PRF outputs, an exact and
independent draw of the node law. Group ``g``'s value at node ``v`` is a deterministic function
of (noise key, ``G``, ``g``, name, ``v``): the same after :meth:`GroupedWindowRelease.load`,
and for windows asked later (lazy trees draw on demand at the same counters).

An eager tree asks its nodes ``0 .. n − 1`` at once (:meth:`Structure.noise_source` with
``keyed_eager``); while the groups are being attached the first group to ask draws the ``n·G``
values of every group in one vectorised call (one AES pass) and the others read their column.
The values are the same either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors

__all__ = ["GroupNoise"]

IntArray = NDArray[np.int64]
_MAX_ID = (1 << 63) - 1


class GroupNoise:
    """The node noise of every group of one grouped window release.

    Parameters
    ----------
    key : bytes
        The release's secret noise key (>= 16 bytes).
    n_groups : int
        ``G``, the number of released groups (part of the counter encoding).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpfreq.windows.structures.base import build_structure
    >>> s = build_structure("cumulative", "tree", 1, 8, "item", Fraction(1), 0.0)
    >>> shared = GroupNoise(bytes(32), 3)
    >>> a = shared.for_group(1)(s, ("cumulative", 1, 0)).noise(np.arange(4))
    >>> b = shared.for_group(1)(s, ("cumulative", 1, 0)).noise([2, 3])
    >>> bool((a[2:] == b).all())
    True
    """

    @public_errors("GroupNoise")
    def __init__(self, key: bytes, n_groups: int) -> None:
        if n_groups < 1:
            raise ParameterError(message("n_groups", "an integer >= 1",
                                         n_groups))
        self.key, self.n_groups = key, int(n_groups)
        self._sources: dict[tuple[Any, ...], Any] = {}
        self._eager: dict[tuple[Any, ...], IntArray] = {}
        self._batching = True  # until drop_eager: prefixes are drawn for every group at once

    def source(self, structure: Any, name: Any) -> Any:
        """The shared keyed source of the tree ``name`` (the structure's node law)."""
        ident = (tuple(name), structure.law)
        src = self._sources.get(ident)
        if src is None:
            src = structure.law.keyed(self.key, name)
            self._sources[ident] = src
        return src

    @public_errors("GroupNoise")
    def values(self, structure: Any, name: Any, group: int, ids: Any) -> IntArray:
        """Group ``group``'s noise at node ids ``ids`` of the tree ``name``."""
        arr = np.asarray(ids, dtype=np.int64)
        src = self.source(structure, name)
        g_count = self.n_groups
        if self._batching and arr.ndim == 1 and arr.size and int(arr[0]) == 0 \
                and int(arr[-1]) == arr.size - 1 and bool(np.all(np.diff(arr) == 1)):
            ident = (tuple(name), structure.law)
            block = self._eager.get(ident)
            if block is None or block.shape[1] < arr.size:
                # every group's nodes 0 .. n − 1 in one call: counter v·G + g at [g, v]
                block = src.noise(np.arange(arr.size * g_count, dtype=np.int64)
                                  ).reshape(arr.size, g_count).T.copy()
                self._eager[ident] = block
            return block[group, :arr.size].copy()
        if arr.size and int(arr.max()) > (_MAX_ID - group) // g_count:
            raise ParameterError(message("node_ids", "ids small enough to "
                                         f"number {g_count} groups below 2^63", "larger"))
        out: IntArray = src.noise(arr * g_count + group)
        return out

    def drop_eager(self) -> None:
        """Forget the eager blocks and stop batching (each group's structures hold their own
        values; later asks, lazy, go to the keyed source for one group only)."""
        self._eager.clear()
        self._batching = False

    @public_errors("GroupNoise.for_group")
    def for_group(self, group: int) -> _GroupView:
        """The ``node_noise`` hook of group ``group``'s structures
        (:attr:`dpfreq.windows.structures.base.Structure.node_noise`)."""
        if not 0 <= group < self.n_groups:
            raise ParameterError(message("group",
                                         f"an index in [0, {self.n_groups})", group))
        return _GroupView(self, group)


class _GroupView:
    """``view(structure, name)``: group ``g``'s source of the tree ``name``."""

    def __init__(self, shared: GroupNoise, group: int) -> None:
        self.shared, self.group = shared, group

    def __call__(self, structure: Any, name: Any) -> _GroupSource:
        return _GroupSource(self.shared, structure, tuple(name), self.group)


class _GroupSource:
    """Group ``g``'s node noise of one tree: ``noise(ids)`` like the keyed sources."""

    def __init__(self, shared: GroupNoise, structure: Any, name: tuple[Any, ...],
                 group: int) -> None:
        self.shared, self.structure, self.name, self.group = shared, structure, name, group

    def noise(self, node_ids: Any) -> IntArray:
        """Noise of each node id; same id ⇒ same value, in any batch."""
        arr = np.asarray(node_ids, dtype=np.int64)
        return self.shared.values(self.structure, self.name, self.group,
                                  arr.ravel()).reshape(arr.shape)
