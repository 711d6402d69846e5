"""`dpfreq serve`: run the FutureRand collection service (needs the ``[server]`` extra).

The server library is imported only when the command runs, so ``dpfreq`` works without the
extra. See :mod:`dpfreq.server` and the README's section on the collection service.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import click

from dpfreq.cli._common import COUNT, POSITIVE
from dpfreq.errors import EngineUnavailableError

__all__ = ["command", "read_admin_token"]


def read_admin_token(path: str | None) -> str | None:
    """The admin token from ``DPFREQ_ADMIN_TOKEN`` or a token file (created, mode 0600, with a
    fresh token when it does not exist)."""
    env = os.environ.get("DPFREQ_ADMIN_TOKEN")
    if env:
        return env.strip()
    if path is None:
        return None
    p = Path(path)
    if p.exists():
        token = p.read_text(encoding="utf-8").strip()
        if not token:
            raise click.UsageError(f"--admin-token-file {path} is empty.")
        return token
    from dpfreq.server.auth import new_token

    token = new_token()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    click.echo(f"dpfreq serve: wrote a new admin token to {path} (mode 0600)", err=True)
    return token


@click.group(name="serve", invoke_without_command=True,
             context_settings={"auto_envvar_prefix": "DPFREQ"})
@click.option("--db", default="dpfreq-server.db", show_default=True,
              help="SQLite file (default storage) or postgresql://user@host:port/dbname. Give "
                   "the password through DPFREQ_DB, PGPASSWORD or ~/.pgpass, never on the "
                   "command line (it shows in ps).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (keep loopback behind a TLS proxy).")
@click.option("--port", type=COUNT, default=8000, show_default=True,
              help="TCP port to listen on (0 picks a free one).")
@click.option("--admin-token-file", default=None, metavar="PATH",
              help="File holding the admin token (created with a fresh token if absent). "
                   "DPFREQ_ADMIN_TOKEN overrides it.")
@click.option("--max-body-bytes", type=POSITIVE, default=1 << 20, show_default=True,
              help="Largest request body accepted (413 above).")
@click.option("--rate", type=float, default=20.0, show_default=True,
              help="Requests per second per device token (0: no limit).")
@click.option("--burst", type=POSITIVE, default=40, show_default=True,
              help="Burst of the per-device rate limit.")
@click.option("--enrol-rate", type=float, default=1.0, show_default=True,
              help="Enrolments per second per study and client address (0: no limit).")
@click.option("--enrol-burst", type=POSITIVE, default=20, show_default=True,
              help="Burst of the enrolment rate limit.")
@click.option("--read-cache-seconds", type=float, default=1.0, show_default=True,
              help="Recompute a study's summary and estimates at most this often (0: always).")
@click.option("--db-wait", type=float, default=30.0, show_default=True,
              help="Seconds to keep retrying a database that does not answer at startup.")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="Allow this origin by CORS (repeatable; default: CORS off).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True,
              help="Least severe log lines written (JSON lines on stderr).")
@click.pass_context
def command(ctx: click.Context, db: str, host: str, port: int, admin_token_file: str | None,
            max_body_bytes: int,
            rate: float, burst: int, enrol_rate: float, enrol_burst: int,
            read_cache_seconds: float, db_wait: float, cors_origins: tuple[str, ...],
            log_level: str) -> None:
    """Collect FutureRand reports over HTTP and serve estimates, exports and dashboards.

    Every option can also be set by an environment variable: DPFREQ_ and the option's name in
    capitals with _ for - (DPFREQ_DB, DPFREQ_PORT, ...). Logs are JSON lines on stderr.
    SIGTERM or Ctrl-C stops accepting connections, finishes the
    requests in flight (their batches are committed or refused, never half-stored) and exits.
    ``dpfreq serve migrate`` applies the database migrations alone (the server also applies
    them on start, once, under a lock).
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        import uvicorn

        from dpfreq.server import ServerConfig, create_app
        from dpfreq.server.observe import configure_logging
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq serve needs the server extra: pip install 'dpfreq[server]'") from exc
    if max_body_bytes < 1024:
        raise click.UsageError("--max-body-bytes must be at least 1024.")
    admin = read_admin_token(admin_token_file)
    if admin is None:
        click.echo("dpfreq serve: warning: no admin token (--admin-token-file or "
                   "DPFREQ_ADMIN_TOKEN): no new study can be created", err=True)
    config = ServerConfig(db=db, admin_token=admin,
                          max_body_bytes=max_body_bytes, rate=rate, burst=burst,
                          enrol_rate=enrol_rate, enrol_burst=enrol_burst,
                          read_cache_seconds=read_cache_seconds,
                          cors_origins=tuple(cors_origins), freeze_gc=True)
    _prepare_database(db, db_wait)
    # Bind before the application starts: the lifespan registers the admin token (and revokes
    # the previous one), which must not happen for a server that cannot listen.
    sock = _bind(host, port)
    log_config = configure_logging(log_level)
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_config=log_config,
                                           access_log=False, timeout_graceful_shutdown=30))
    server.run(sockets=[sock])
    if not server.started:
        raise SystemExit(1)


@command.command(name="migrate")
@click.option("--db", envvar="DPFREQ_DB", default="dpfreq-server.db", show_default=True,
              help="SQLite file or postgresql://user@host:port/dbname (DPFREQ_DB).")
@click.option("--db-wait", envvar="DPFREQ_DB_WAIT", type=float, default=30.0,
              show_default=True, help="Seconds to keep retrying a database that does not answer.")
def migrate(db: str, db_wait: float) -> None:
    """Apply the collection service's database migrations up to the newest, then exit."""
    try:
        import dpfreq.server  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq serve needs the server extra: pip install 'dpfreq[server]'") from exc
    _prepare_database(db, db_wait)
    click.echo("dpfreq serve migrate: database is at the newest schema", err=True)


def _prepare_database(db: str, wait: float) -> None:
    """Connect and apply the migrations, retrying a database that does not answer for ``wait``
    seconds; then a one-line error naming the database (its URL without the password)."""
    import time

    import sqlalchemy as sa

    from dpfreq.server import storage

    shown = sa.engine.make_url(storage.normalize_url(db)).render_as_string(hide_password=True)
    deadline, pause = time.monotonic() + wait, 0.25
    while True:
        try:
            engine = storage.make_engine(db)  # creates a SQLite file 0600 (its folder must exist)
        except OSError as exc:
            raise click.ClickException(f"cannot open database {shown}: {exc.strerror}") from None
        try:
            storage.upgrade(engine)
            return
        except sa.exc.OperationalError as exc:
            reason = " ".join(str(exc.orig).split())[:200]
            if engine.dialect.name == "sqlite" or time.monotonic() + pause > deadline:
                raise click.ClickException(f"cannot open database {shown}: {reason}") from None
        finally:
            engine.dispose()
        time.sleep(pause)
        pause = min(2 * pause, 5.0)


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, or a one-line error naming the address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _name, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError:
            sock.close()
            raise
        sock.listen(2048)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    sock.set_inheritable(True)
    return sock
