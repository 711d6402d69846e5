"""The device bundle: what a device of another language needs besides the public parameters.

A device samples exact integer laws (:mod:`dpfreq.longitudinal.laws`) that this library computes
once in floating point and then fixes as integers; a client written elsewhere cannot recompute
them bit for bit, so the service hands them out with the parameters (``GET /v1/studies/{study}``
answers with ``bundle``) and ``docs/protocol.md`` §1 states the format.
"""

from __future__ import annotations

from typing import Any

from dpfreq.longitudinal.laws import distance_law
from dpfreq.longitudinal.params import ProtocolParams
from dpfreq.noise import epsilon_to_fraction

__all__ = ["device_bundle"]


def device_bundle(params: ProtocolParams) -> dict[str, Any]:
    """The device bundle for ``params`` (a JSON-ready dict; ``protocol`` is their version).

    Parameters
    ----------
    params : ProtocolParams
        The study's parameters.

    Returns
    -------
    dict
        ``protocol``, ``param_id``, ``horizon``, ``padded_horizon``, ``max_changes``,
        ``method``, ``per_order_sparsity``; ``laws``: for every change budget in use, the
        integer weights of the distance law as decimal strings (distance randomizers); ``gamma``:
        the exact fraction ``"s/t"`` of the keep probability (``erlingsson`` only).

    Notes
    -----
    Public: a function of the public parameters only, no privacy cost.

    Examples
    --------
    >>> from dpfreq.longitudinal import device_bundle, make_params
    >>> b = device_bundle(make_params(horizon=8, max_changes=2, epsilon=1.0,
    ...                               method="threshold"))
    >>> b["protocol"], b["padded_horizon"], sorted(b["laws"]), b["gamma"]
    (2, 8, ['2'], None)
    """
    p = params
    laws: dict[str, list[str]] = {}
    gamma = None
    if p.method == "erlingsson":
        g = epsilon_to_fraction(p.epsilon)
        gamma = f"{g.numerator}/{g.denominator}"
    else:
        for h in range(p.orders):
            k = p.changes_at_order(h)
            laws.setdefault(str(k), [str(w) for w in distance_law(p.method, k,
                                                                  p.epsilon).weights])
    return {"protocol": p.version, "param_id": p.param_id, "horizon": p.horizon,
            "padded_horizon": p.padded_horizon, "max_changes": p.max_changes,
            "method": p.method, "per_order_sparsity": p.per_order_sparsity,
            "laws": laws, "gamma": gamma}
