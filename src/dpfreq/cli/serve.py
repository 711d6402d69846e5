"""`dpfreq serve`: run the FutureRand collection service (needs the ``[server]`` extra).

The server library is imported only when the command runs, so ``dpfreq`` works without the
extra. See :mod:`dpfreq.server` and the README's section on the collection service.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dpfreq.cli._common import COUNT, NON_NEGATIVE, POSITIVE
from dpfreq.cli.output import warn
from dpfreq.errors import EngineUnavailableError

if TYPE_CHECKING:
    from dpfreq.server import ServerConfig

__all__ = ["SETTINGS", "command", "read_admin_token"]

#: Keys of a --config file: the options of ``dpfreq serve`` (and of ``migrate``, ``purge``).
SETTINGS = ("admin_token_file", "burst", "closed_days", "cors_origins", "db", "db_wait",
            "enrol_burst",
            "enrol_rate", "host", "log_level", "max_body_bytes", "port", "rate",
            "read_cache_seconds", "role", "workers")


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


def _load_config(ctx: click.Context, _param: click.Parameter, path: str | None) -> str | None:
    """Read a TOML settings file into the command's defaults: a value given on the command line
    or by a DPFREQ_* variable still wins (click's order: command line, environment,
    ``default_map``, default)."""
    if path is None:
        return None
    import tomllib

    try:
        with open(path, "rb") as fh:
            table = tomllib.load(fh)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}.") from None
    except tomllib.TOMLDecodeError as exc:
        raise click.BadParameter(f"{path} is not valid TOML: {exc}.") from None
    known = {p.name for p in ctx.command.params if p.name and p.name != "config"}
    for key in table:
        if key not in SETTINGS:
            raise click.BadParameter(
                f"{path}: unknown setting {key!r}; the settings are {', '.join(SETTINGS)}.")
    url = table.get("db")
    if isinstance(url, str) and _has_password(url) and os.stat(path).st_mode & 0o077:
        raise click.BadParameter(
            f"{path} holds a database password and other users can read it; chmod 600 it.")
    ctx.default_map = {**(ctx.default_map or {}),
                       **{k: v for k, v in table.items() if k in known}}
    return path


def _has_password(db: str) -> bool:
    """Whether a database URL carries a password."""
    if "://" not in db:
        return False
    import sqlalchemy as sa

    try:
        return sa.engine.make_url(db).password is not None
    except sa.exc.ArgumentError:
        return False


def _refuse_password_argument(ctx: click.Context, db: str) -> None:
    """A password given in ``--db`` on the command line shows in ``ps``: refuse it."""
    if ctx.get_parameter_source("db") is click.core.ParameterSource.COMMANDLINE \
            and _has_password(db):
        raise click.UsageError(
            "--db must not carry the database password on the command line (it shows in ps); "
            "give it in DPFREQ_DB, the --config file, PGPASSWORD or ~/.pgpass.")


def _port(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    """A TCP port, 0..65535: a larger number would wrap (99999 listens on 34463)."""
    if not 0 <= value <= 65535:
        raise click.BadParameter(f"must be an integer in [0, 65535] (0 picks a free port); "
                                 f"got {value}")
    return value


_CONFIG_HELP = ("TOML file of settings: the option names with _ for - (db, port, rate, "
                "workers, ...), the keys of the DPFREQ_* variables. The command line wins over "
                "DPFREQ_* variables, which win over the file.")


@click.group(name="serve", invoke_without_command=True,
             context_settings={"auto_envvar_prefix": "DPFREQ"})
@click.option("--config", type=click.Path(dir_okay=False), default=None, is_eager=True,
              expose_value=False, callback=_load_config, help=_CONFIG_HELP)
@click.option("--db", default="dpfreq-server.db", show_default=True,
              help="SQLite file (default storage) or postgresql://user@host:port/dbname. Give "
                   "the password through DPFREQ_DB, PGPASSWORD or ~/.pgpass, never on the "
                   "command line (it shows in ps).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (keep loopback behind a TLS proxy).")
@click.option("--port", type=COUNT, default=8000, show_default=True, callback=_port,
              help="TCP port to listen on (0 picks a free one).")
@click.option("--admin-token-file", default=None, metavar="PATH",
              help="File holding the admin token (created with a fresh token if absent). "
                   "DPFREQ_ADMIN_TOKEN overrides it.")
@click.option("--max-body-bytes", type=POSITIVE, default=1 << 20, show_default=True,
              help="Largest request body accepted (413 above).")
@click.option("--rate", type=NON_NEGATIVE, default=20.0, show_default=True,
              help="Requests per second per device token (0: no limit).")
@click.option("--burst", type=POSITIVE, default=40, show_default=True,
              help="Burst of the per-device rate limit.")
@click.option("--enrol-rate", type=NON_NEGATIVE, default=1.0, show_default=True,
              help="Enrolments per second per study and client address (0: no limit).")
@click.option("--enrol-burst", type=POSITIVE, default=20, show_default=True,
              help="Burst of the enrolment rate limit.")
@click.option("--read-cache-seconds", type=NON_NEGATIVE, default=1.0, show_default=True,
              help="Recompute a study's summary and estimates at most this often (0: always).")
@click.option("--db-wait", type=NON_NEGATIVE, default=30.0, show_default=True,
              help="Seconds to keep retrying a database that does not answer at startup.")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="Allow this origin by CORS (repeatable; default: CORS off).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True,
              help="Least severe log lines written (JSON lines on stderr).")
@click.option("--role", type=click.Choice(["collector", "worker", "aggregator"]),
              default="collector", show_default=True,
              help="What to serve: the FutureRand collection service, or a worker or the "
                   "aggregator of the cross-party shuffle (docs/guide/crossparty.md; one "
                   "process, its own database).")
@click.option("--workers", type=POSITIVE, default=1, show_default=True,
              help="Server processes sharing the port. The rate limits are divided among them "
                   "(each allows rate/N and burst/N), so a device or address never gets more "
                   "than the limit in total. /metrics, whichever process answers, sums the "
                   "counters of all of them (and leaves out per-process runtime metrics).")
@click.pass_context
def command(ctx: click.Context, db: str, host: str, port: int, admin_token_file: str | None,
            max_body_bytes: int,
            rate: float, burst: int, enrol_rate: float, enrol_burst: int,
            read_cache_seconds: float, db_wait: float, cors_origins: tuple[str, ...],
            log_level: str, role: str, workers: int) -> None:
    """Collect FutureRand reports over HTTP and serve estimates, exports and dashboards.

    Every option can also be set by an environment variable, DPFREQ_ and the option's name in
    capitals with _ for - (DPFREQ_DB, DPFREQ_PORT, ...), or in a TOML file (--config) under
    the option's name (db, port, ...): the command line wins, then the environment, then the
    file. Logs are JSON lines on stderr.
    SIGTERM or Ctrl-C stops accepting connections, finishes the
    requests in flight (their batches are committed or refused, never half-stored) and exits.
    ``dpfreq serve migrate`` applies the database migrations alone (the server also applies
    them on start, once, under a lock).
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        import uvicorn

        from dpfreq.server import ServerConfig, create_app, create_role_app
        from dpfreq.server.observe import configure_logging
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq serve needs the server extra: pip install 'dpfreq[server]'") from exc
    _refuse_password_argument(ctx, db)
    if max_body_bytes < 1024:
        raise click.UsageError("--max-body-bytes must be at least 1024.")
    for name, limit, size in (("--burst", rate, burst), ("--enrol-burst", enrol_rate,
                                                          enrol_burst)):
        if limit > 0 and size < workers:
            raise click.UsageError(f"{name} must be at least --workers ({workers}): each "
                                   f"process allows {name[2:]}/workers; got {size}.")
    if role != "collector" and workers > 1:
        raise click.UsageError(f"--role {role} runs in one process (its driver keeps the "
                               f"measurements moving); got --workers {workers}.")
    admin = read_admin_token(admin_token_file)
    if admin is None:
        what = "study" if role == "collector" else "measurement"
        warn("no admin token (--admin-token-file or DPFREQ_ADMIN_TOKEN): no new "
             f"{what} can be created.")
    # Each process enforces its share of the limits: whichever process a request reaches, the
    # total allowed to one key stays within rate (per second) and burst.
    config = ServerConfig(db=db, admin_token=admin if workers == 1 else None,
                          max_body_bytes=max_body_bytes, rate=rate, burst=burst,
                          enrol_rate=enrol_rate, enrol_burst=enrol_burst,
                          read_cache_seconds=read_cache_seconds,
                          cors_origins=tuple(cors_origins), freeze_gc=True, workers=workers,
                          role=role)
    _prepare_database(db, db_wait)
    # Bind before the application starts: the lifespan registers the admin token (and revokes
    # the previous one), which must not happen for a server that cannot listen.
    sock = _bind(host, port)
    config = dataclasses.replace(config, listen_url=_url(sock))
    log_config = configure_logging(log_level)
    if workers > 1:
        _run_workers(config, admin, workers, sock, log_level)
        return
    app = create_app(config) if role == "collector" else create_role_app(config)
    server = uvicorn.Server(uvicorn.Config(app, log_config=log_config,
                                           access_log=False, timeout_graceful_shutdown=30))
    server.run(sockets=[sock])
    if not server.started:
        raise SystemExit(1)


def _run_workers(config: ServerConfig, admin: str | None, workers: int, sock: socket.socket,
                 log_level: str) -> None:
    """Serve ``sock`` from ``workers`` processes (uvicorn's supervisor: it restarts a worker
    that dies, and on SIGTERM stops them all gracefully). The admin token is registered once,
    here, after the port is bound and before any worker starts."""
    import functools

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from dpfreq.server import storage
    from dpfreq.server.app import log_bootstrap, worker_app
    from dpfreq.server.observe import MULTIPROC_ENV
    from dpfreq.server.service import Service

    if admin:
        engine = storage.make_engine(config.db)
        try:
            log_bootstrap(Service(engine).bootstrap_admin(admin))
        finally:
            engine.dispose()
    uv = uvicorn.Config(functools.partial(worker_app, config, log_level), factory=True,
                        workers=workers, log_config={"version": 1,
                                                     "disable_existing_loggers": False},
                        access_log=False, timeout_graceful_shutdown=30,
                        timeout_worker_healthcheck=60)  # a worker's imports take seconds
    # The workers keep their metrics in one private directory, so /metrics gives the sums
    # over all of them whichever worker answers (see dpfreq.server.observe.Metrics).
    shared = tempfile.mkdtemp(prefix="dpfreq-metrics-")
    os.environ[MULTIPROC_ENV] = shared
    try:
        Multiprocess(uv, sockets=[sock]).run()
    finally:
        del os.environ[MULTIPROC_ENV]
        shutil.rmtree(shared, ignore_errors=True)


@command.command(name="migrate")
@click.option("--config", type=click.Path(dir_okay=False), default=None, is_eager=True,
              expose_value=False, callback=_load_config, help=_CONFIG_HELP)
@click.option("--db", envvar="DPFREQ_DB", default="dpfreq-server.db", show_default=True,
              help="SQLite file or postgresql://user@host:port/dbname (DPFREQ_DB).")
@click.option("--db-wait", envvar="DPFREQ_DB_WAIT", type=NON_NEGATIVE, default=30.0,
              show_default=True, help="Seconds to keep retrying a database that does not answer.")
@click.pass_context
def migrate(ctx: click.Context, db: str, db_wait: float) -> None:
    """Apply the collection service's database migrations up to the newest, then exit."""
    _refuse_password_argument(ctx, db)
    try:
        import dpfreq.server  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq serve needs the server extra: pip install 'dpfreq[server]'") from exc
    _prepare_database(db, db_wait)
    click.echo("dpfreq serve migrate: database is at the newest schema", err=True)


@command.command(name="purge")
@click.option("--config", type=click.Path(dir_okay=False), default=None, is_eager=True,
              expose_value=False, callback=_load_config, help=_CONFIG_HELP)
@click.option("--db", envvar="DPFREQ_DB", default="dpfreq-server.db", show_default=True,
              help="SQLite file or postgresql://user@host:port/dbname (DPFREQ_DB).")
@click.option("--closed-days", "closed_days", envvar="DPFREQ_CLOSED_DAYS", type=float,
              required=True, help="Delete the raw reports of studies that stopped taking "
                                  "reports (closed or expired) at least this many days ago.")
@click.pass_context
def purge(ctx: click.Context, db: str, closed_days: float) -> None:
    """Retention: delete the raw reports of studies closed (or expired) at least
    --closed-days days ago. Their estimates stay exact (they come from the running sums, and a
    closed study takes no report that could be counted twice); their raw-report export is
    gone. Open studies keep every raw report. Prints the studies purged."""
    _refuse_password_argument(ctx, db)
    if not closed_days >= 0:
        raise click.UsageError(f"--closed-days must be >= 0; got {closed_days!r}.")
    try:
        from dpfreq.server import storage
        from dpfreq.server.service import Service
    except ImportError as exc:
        raise EngineUnavailableError(
            "dpfreq serve needs the server extra: pip install 'dpfreq[server]'") from exc
    _prepare_database(db, 0.0)
    engine = storage.make_engine(db)
    try:
        for study in Service(engine).purge_raw_reports(closed_days):
            click.echo(study)
    finally:
        engine.dispose()


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


def _url(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (the port it got when asked for 0)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


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
