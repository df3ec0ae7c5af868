"""The CLI's store-side commands as users run them: many at once on a fresh store, bad
input of every kind, long content, narrow terminals and pipes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from postgres_server import new_database
from sqlalchemy import create_engine
from support import BOTH_STORES, REPO

from store.db import MIGRATIONS_DIR

# Each process imports everything, says so, and waits for the go: then all of them open
# the fresh store at the same moment, as `for j in ...; do duragent sessions & done` does.
AT_ONCE = (
    "import sys\n"
    "from client.cli import main\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "sys.argv = ['duragent', 'sessions']\n"
    "main()\n"
)


def cli_env(home: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.update(DURAGENT_HOME=str(home), DURAGENT_DATABASE_URL=database_url, PYTHONPATH=str(REPO))
    return env


def head_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


@BOTH_STORES
def test_eight_commands_started_at_once_on_a_fresh_store_all_succeed(
    request: pytest.FixtureRequest, tmp_path: Path, database: str
) -> None:
    if database == "postgresql":
        url = new_database(request.getfixturevalue("postgres_server"))
    else:
        url = f"sqlite:///{tmp_path / 'fresh' / 'duragent.db'}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", AT_ONCE],
            cwd=tmp_path,
            env=cli_env(tmp_path, url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert [code for code, _ in outcomes] == [0] * 8, "\n".join(e for _, e in outcomes)
    engine = create_engine(url)
    with engine.connect() as connection:
        assert MigrationContext.configure(connection).get_current_heads() == (head_revision(),)
    engine.dispose()
