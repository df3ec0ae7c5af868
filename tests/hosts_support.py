"""Worker processes as hosts: each with a host name and a state directory of its own (its
workspaces root and tool-process records), all on the stack's store and task queue."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from processes import WORKER_ARGS, spawn_python
from support import Stack


@dataclass
class Host:
    name: str
    home: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"


def host_env(stack: Stack, host: Host) -> dict[str, str]:
    env = stack.env()
    env["DURAGENT_HOST"] = host.name
    env["DURAGENT_HOME"] = str(host.home)
    env["DURAGENT_DATABASE_URL"] = stack.settings.database_url  # the one store of all hosts
    return env


def start_host(stack: Stack, host: Host) -> subprocess.Popen[bytes]:
    """The host's worker, in a process of its own (its log in the host's home)."""
    host.home.mkdir(parents=True, exist_ok=True)
    with open(host.home / "worker.log", "ab") as log:  # the child has its own
        host.process = spawn_python(WORKER_ARGS, host_env(stack, host), log)
    stack.processes.append(host.process)
    return host.process


def stop_host(stack: Stack, host: Host) -> None:
    """SIGKILL the host's worker, as a machine failure would."""
    assert host.process is not None
    stack.kill(host.process)
    host.process = None


def hosts(stack: Stack, *names: str) -> list[Host]:
    return [Host(name, stack.settings.home / f"host-{name}") for name in names]
