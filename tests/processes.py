"""Child processes of a local stack (workers, the API, Chromium), shared by the tests and bench/.

A child gets the stack's settings through the environment, runs in a process group of
its own, and is stopped with SIGKILL to the whole group, as a machine failure would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from duragent.settings import Settings

CHROMIUM = Path(os.environ.get("DURAGENT_CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium reaches out to other hosts on start,
# which a closed network refuses (and a test must not depend on).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

REPO = Path(__file__).resolve().parents[1]


def stack_env(settings: Settings, model_base_url: str, **extra: str) -> dict[str, str]:
    """This process's environment with the stack's settings, and no real API key."""
    env = dict(os.environ)
    env.update(
        DURAGENT_HOME=str(settings.home),
        DURAGENT_DATABASE_URL=settings.database_url,
        TEMPORAL_ADDRESS=settings.temporal_address,
        DURAGENT_MODEL=settings.model,
        DURAGENT_TASK_QUEUE=settings.task_queue,
        ANTHROPIC_BASE_URL=model_base_url,
        DURAGENT_OFFLINE_MODEL_URL=model_base_url,
        DURAGENT_HEARTBEAT_TIMEOUT=str(settings.heartbeat_timeout_s),
        DURAGENT_WORKER_LEASE=str(settings.worker_lease_s),
        PYTHONPATH=str(REPO),
        **extra,
    )
    env.pop("ANTHROPIC_API_KEY", None)
    return env


def spawn_python(
    args: list[str], env: dict[str, str], output: IO[bytes] | int = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """`python ARGS` from the repository, in its own process group."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


WORKER_ARGS = ["-m", "duragent.worker"]


def kill_group(process: subprocess.Popen[bytes], timeout: float | None = 10) -> None:
    """SIGKILL the process's whole group and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=timeout)
