"""A throwaway PostgreSQL cluster from the installed server binaries (tests and benchmarks).

``initdb`` into a temporary directory, ``pg_ctl start`` listening on 127.0.0.1 only at a free
port (Unix socket in the same directory), trust authentication for the one local superuser,
``pg_ctl stop`` and removal on exit. PostgreSQL refuses to run as root; when the current user is
root the cluster runs as the ``postgres`` system user (else ``nobody``) through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["TemporaryPostgres", "find_pg_bin"]


def find_pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` and ``pg_ctl`` (or the
    directory of ``initdb`` on PATH), None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """Context manager: ``with TemporaryPostgres() as pg: pg.url("dbname")``."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        found = bin_dir or find_pg_bin()
        if found is None:
            raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.bin = found
        self.port = _free_port()
        self.user = "dpfreq"
        self.base = Path(tempfile.mkdtemp(prefix="dpfreq-pg-"))
        self.data = self.base / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:
            import pwd

            runas = "postgres"
            try:
                pw = pwd.getpwnam(runas)
            except KeyError:
                runas, pw = "nobody", pwd.getpwnam("nobody")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            os.chmod(self.base, 0o700)
            self._as = ["runuser", "-u", runas, "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120, cwd=self.base)

    def __enter__(self) -> TemporaryPostgres:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user,
                  "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base} "
                "-c max_connections=200 -c shared_buffers=128MB")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.base / "log"), "-o", opts, "-w", "-t", "60", "start")
        return self

    def url(self, dbname: str = "postgres") -> str:
        """``postgresql://`` URL of a database of this cluster."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create an empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def __exit__(self, *exc: object) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                      "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
