"""An opt-in sandbox for tool commands: bubblewrap (`bwrap`), where the machine has it.

Inside, the file system is the host's, read-only, with the workspace bind-mounted
writable; private places are covered by empty scratch directories (the state directory
with the database and every other workspace, the worker user's home, /tmp, /var/tmp,
/run with its sockets); there is no network (only a loopback of its own), no view of
other processes, and no capability, so the covers cannot be unmounted. A worker asked
for the sandbox refuses to start without a working bwrap: it never runs commands
unsandboxed instead.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PRIVATE = (Path("/tmp"), Path("/var/tmp"), Path("/run"))
"""Covered in every sandbox: scratch space other programs share, and the sockets of
system services (a docker or database socket is reachable without a network)."""

_PROBE_TIMEOUT_S = 10.0


class SandboxUnavailable(RuntimeError):
    """The sandbox was asked for and cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class BwrapSandbox:
    """Builds the `bwrap` command line that runs a tool's command in the sandbox."""

    executable: str
    private: tuple[Path, ...]
    """Paths (directories or files) no command may read, whatever its workspace."""
    flags: tuple[str, ...] = ()
    """Extra hardening this bwrap supports (checked by `create`)."""

    @classmethod
    def create(cls, private: Iterable[Path]) -> BwrapSandbox:
        """A sandbox that hides `private` (and `SYSTEM_PRIVATE`), once bwrap has shown it
        can create its namespaces here; `SandboxUnavailable` otherwise."""
        executable = shutil.which("bwrap")
        if executable is None:
            raise SandboxUnavailable(
                "DURAGENT_TOOL_SANDBOX=bwrap, but bwrap is not installed "
                "(Debian and Ubuntu: apt-get install bubblewrap)"
            )
        help_text = _run([executable, "--help"]).stdout
        # Newer bwrap can also stop the sandbox from making user namespaces of its own.
        flags = ("--unshare-user", "--disable-userns") if "--disable-userns" in help_text else ()
        # Covering / (a service user whose home is /) would leave nothing to run.
        paths = tuple(p for p in _normalised([*SYSTEM_PRIVATE, *private]) if p != Path("/"))
        sandbox = cls(executable=executable, private=paths, flags=flags)
        with tempfile.TemporaryDirectory() as scratch:
            probe = _run(sandbox.command(Path(scratch), ["true"]))
        if probe.returncode != 0:
            reason = (probe.stderr or probe.stdout).strip() or f"exit code {probe.returncode}"
            raise SandboxUnavailable(
                f"DURAGENT_TOOL_SANDBOX=bwrap, but bwrap cannot create its sandbox here: "
                f"{reason} (it needs unprivileged user namespaces, or a setuid bwrap)"
            )
        return sandbox

    def command(self, workspace: Path, argv: Sequence[str]) -> list[str]:
        """`argv` to run in the sandbox, in `workspace` (the one writable place)."""
        workspace = workspace.resolve()
        args = [
            self.executable,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        args += _covers(p for p in self.private if not _within(p, workspace))
        args += ["--bind", str(workspace), str(workspace)]
        # Private places inside the workspace (a state directory in the project) stay hidden.
        args += _covers(p for p in self.private if _within(p, workspace) and p != workspace)
        args += [
            "--chdir",
            str(workspace),
            "--unshare-all",  # user, pid, network, ipc, uts, cgroup: no network at all
            *self.flags,
            "--cap-drop",
            "ALL",  # a worker running as root keeps none (they could unmount the covers)
            "--die-with-parent",  # the command dies with its worker
            # No --new-session: the command must stay in the process group the worker
            # stops. It has no terminal to abuse (stdin and output are pipes).
            "--",
            *argv,
        ]
        return args


def _covers(paths: Iterable[Path]) -> list[str]:
    """bwrap arguments that hide each existing path: an empty tmpfs over a directory,
    /dev/null over a file. A path under one already hidden needs nothing."""
    args: list[str] = []
    hidden: list[Path] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if any(_within(path, h) for h in hidden) or not path.exists():
            continue
        hidden.append(path)
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _normalised(paths: Iterable[Path]) -> list[Path]:
    seen: dict[Path, None] = {}
    for path in paths:
        seen[path.expanduser().resolve()] = None
    return list(seen)


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(
            f"DURAGENT_TOOL_SANDBOX=bwrap, but bwrap could not be run: {exc}"
        ) from exc
