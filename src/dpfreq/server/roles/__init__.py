"""The roles of the cross-party shuffle as services: two workers and the aggregator.

``dpfreq serve --role worker`` and ``dpfreq serve --role aggregator`` run them on the
collection service's stack (:mod:`dpfreq.server`); the protocol is
:mod:`dpfreq.crossparty.shuffle`, used through its public functions like any caller.
"""

from .app import ROLES, create_role_app

__all__ = ["ROLES", "create_role_app"]
