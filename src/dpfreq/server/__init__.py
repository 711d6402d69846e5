"""The FutureRand collection service (``dpfreq serve``, extra ``[server]``).

Devices enrol in a study and upload their locally randomized reports over HTTP; the service
validates and stores them (SQLite by default, PostgreSQL by URL), keeps the aggregator's
running sums, and serves per-period estimates with confidence bands, exports and a dashboard.
:mod:`dpfreq.server.uploader` is the device side. The same stack serves the roles of the
cross-party shuffle (:mod:`dpfreq.server.roles`: two workers and the aggregator).

Importing this package needs the ``[server]`` extra: ``pip install 'dpfreq[server]'``.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
    from dpfreq.errors import EngineUnavailableError

    raise EngineUnavailableError(
        "the collection service needs the server extra: pip install 'dpfreq[server]'") from exc

from .app import ServerConfig, create_app
from .roles import create_role_app

__all__ = ["ServerConfig", "create_app", "create_role_app"]
