"""A throwaway PostgreSQL server for the tests that need one, started from the
`initdb` / `pg_ctl` of the machine's PostgreSQL (Debian: `apt-get install postgresql`).

As root, the server runs as the `postgres` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text


def find_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


class PostgresServer:
    """Its data folder is a fresh one under the system temporary folder (which the
    `postgres` user can reach, unlike pytest's private folders), removed on `stop`."""

    def __init__(self, binaries: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="duragent-postgres-"))
        self.binaries = binaries
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        data = self.folder / "data"
        self._run(str(self.binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
        self.resume()
        return self

    def halt(self) -> None:
        """Stop the server as an outage would, keeping its data (`resume` starts it again)."""
        data = str(self.folder / "data")
        self._run(str(self.binaries / "pg_ctl"), "-D", data, "-m", "fast", "stop")

    def resume(self) -> None:
        """Start the server on its data folder (and wait until it takes connections)."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        data, log = str(self.folder / "data"), str(self.folder / "log")
        self._run(
            str(self.binaries / "pg_ctl"), "-D", data, "-o", options, "-l", log, "-w", "start"
        )

    def stop(self) -> None:
        try:
            data = str(self.folder / "data")
            self._run(str(self.binaries / "pg_ctl"), "-D", data, "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def store_url(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> str:
    """A fresh store of the test's kind: a new database on the suite's PostgreSQL server,
    or a SQLite file under `tmp_path`."""
    if database == "postgresql":
        return new_database(request.getfixturevalue("postgres_server"))
    return f"sqlite:///{tmp_path / 'store.db'}"


def new_database(server_url: str) -> str:
    """Create a fresh database on the server at `server_url`; return its URL."""
    name = f"duragent_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
