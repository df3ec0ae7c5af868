"""`bash` in the bubblewrap sandbox, with real bwrap and real processes: what a command can
write, read and reach, and that stopping and streaming still work. Skipped, with the
reason, where bwrap is missing or cannot create its namespaces; and the sandbox asked for
where it cannot run is a clear error, never an unsandboxed command."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from duragent.activities.tools import BashTool, ToolContext, ToolRegistry, process_group_alive
from duragent.activities.tools.sandbox import BwrapSandbox, SandboxUnavailable
from duragent.client.errors import DuragentError
from duragent.domain.messages import TextContent
from duragent.domain.tools import ToolResult
from duragent.settings import Settings
from duragent.worker import tool_registry

REPO = Path(__file__).resolve().parents[2]


def _sandbox_or_reason() -> BwrapSandbox | str:
    try:
        return BwrapSandbox.create([])
    except SandboxUnavailable as exc:
        return str(exc)


_AVAILABLE = _sandbox_or_reason()
needs_bwrap = pytest.mark.skipif(
    isinstance(_AVAILABLE, str), reason=f"no sandbox on this machine: {_AVAILABLE}"
)


def text(result: ToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A state directory: the database, this session's workspace and another user's."""
    home = tmp_path / "home"
    (home / "workspaces" / "mine").mkdir(parents=True)
    (home / "workspaces" / "theirs").mkdir()
    (home / "workspaces" / "theirs" / "notes.txt").write_text("their secret\n")
    (home / "duragent.db").write_text("the database\n")
    return home


def sandboxed(private: list[Path], *, system: bool = True) -> ToolRegistry:
    """bash in a sandbox hiding `private`, and /tmp, /run... unless `system` is False (to
    see one cover at work on its own: the test's files are all under /tmp)."""
    sandbox = BwrapSandbox.create(private)
    if not system:
        sandbox = dataclasses.replace(sandbox, private=tuple(p.resolve() for p in private))
    return ToolRegistry([BashTool(sandbox=sandbox)])


async def bash(registry: ToolRegistry, ctx: ToolContext, command: str, **args: object) -> str:
    return text(await registry.run("bash", {"command": command, **args}, ctx))


@needs_bwrap
async def test_only_the_workspace_is_writable_and_the_state_directory_is_hidden(
    state: Path,
) -> None:
    registry = sandboxed([state], system=False)
    mine = state / "workspaces" / "mine"
    ctx = ToolContext(workspace=mine)

    assert await bash(registry, ctx, "pwd; echo made > made.txt; cat made.txt") == f"{mine}\nmade"
    assert (mine / "made.txt").read_text() == "made\n"
    # The state directory shows nothing but the way to this workspace.
    listing = await bash(registry, ctx, f"ls -A {state}; ls -A {state / 'workspaces'}")
    assert listing == "workspaces\nmine"
    for private in (state / "duragent.db", state / "workspaces" / "theirs" / "notes.txt"):
        out = await bash(registry, ctx, f"cat {private}")
        assert "No such file or directory" in out and "secret" not in out
    # The rest of the file system is read-only.
    out = await bash(registry, ctx, f"touch {REPO}/sandbox-escape.txt")
    assert "Read-only file system" in out
    assert not (REPO / "sandbox-escape.txt").exists()


@needs_bwrap
async def test_tmp_and_home_are_scratch_directories_of_its_own(tmp_path: Path) -> None:
    """Nothing of the host's /tmp or of the user's home is there, nothing goes back."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "host-file.txt").write_text("host\n")
    registry = sandboxed([Path.home()])
    ctx = ToolContext(workspace=workspace)
    scratch = f"scratch-{os.getpid()}.txt"
    out = await bash(
        registry,
        ctx,
        f"cat {tmp_path}/host-file.txt; ls -A ~ | wc -l; "
        f"echo x > /tmp/{scratch}; echo x > ~/{scratch}",
    )
    assert "No such file or directory" in out and out.splitlines()[-1] == "0"
    assert not (Path("/tmp") / scratch).exists() and not (Path.home() / scratch).exists()


@needs_bwrap
async def test_a_state_directory_inside_the_workspace_stays_hidden(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".duragent").mkdir(parents=True)
    (project / ".duragent" / "duragent.db").write_text("the database\n")
    (project / "main.py").write_text("print('hi')\n")
    registry = sandboxed([project / ".duragent"])
    out = await bash(registry, ToolContext(workspace=project), "ls -A; ls -A .duragent")
    assert out == ".duragent\nmain.py"


@needs_bwrap
async def test_no_network_no_other_processes_no_capabilities(tmp_path: Path) -> None:
    registry = sandboxed([])
    ctx = ToolContext(workspace=tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo none"
        assert await text_of_host(probe, tmp_path) == "connected"  # the port does listen
        assert await bash(registry, ctx, probe) == "none"
    # This process (the worker) is not there to read: not its environment, not its memory.
    out = await bash(registry, ctx, f"cat /proc/{os.getpid()}/environ | head -c 20; ls /proc")
    assert "No such file or directory" in out
    pids = [line for line in out.splitlines() if line.isdigit()]
    assert len(pids) <= 4, out  # only the sandbox's own: its init, bash, ls
    caps = await bash(registry, ctx, "grep CapEff /proc/self/status")
    assert caps.split() == ["CapEff:", "0000000000000000"]


async def text_of_host(command: str, cwd: Path) -> str:
    done = await asyncio.to_thread(
        subprocess.run, ["bash", "-c", command], cwd=cwd, capture_output=True, text=True
    )
    return done.stdout.strip()


@needs_bwrap
async def test_sandboxed_output_streams_and_the_group_is_stopped(tmp_path: Path) -> None:
    registry = sandboxed([])
    updates: list[str] = []
    first = asyncio.Event()

    def on_update(chunk: str) -> None:
        updates.append(chunk)
        first.set()

    groups: list[int] = []
    ctx = ToolContext(workspace=tmp_path, on_update=on_update, on_process=groups.append)
    task = asyncio.create_task(
        registry.run("bash", {"command": "echo one; sleep 100 & sleep 100; echo never"}, ctx)
    )
    await asyncio.wait_for(first.wait(), timeout=10)
    assert updates == ["one\n"] and not task.done()  # streamed while it runs
    (pgid,) = groups
    assert process_group_alive(pgid)
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not process_group_alive(pgid)  # both sleeps too, inside the sandbox's namespace
    assert time.monotonic() - cancelled_at < 3

    started = time.monotonic()
    result = await registry.run("bash", {"command": "sleep 30 & sleep 30", "timeout": 0.5}, ctx)
    assert time.monotonic() - started < 3
    assert result.is_error and "timed out after 0.5 seconds" in text(result)
    assert result.details is not None and not process_group_alive(result.details["pid"])


@needs_bwrap
async def test_the_worker_wires_the_sandbox_from_its_settings(state: Path) -> None:
    settings = Settings.from_env(home=state, tool_sandbox="bwrap")
    registry = tool_registry(settings)
    bash_tool = registry.get("bash")
    assert isinstance(bash_tool, BashTool) and bash_tool.sandbox is not None
    assert "sandbox" in bash_tool.description and "nohup" not in bash_tool.description
    out = await bash(registry, ToolContext(workspace=state / "workspaces" / "mine"), "ls -A ..")
    assert out == "mine"


# --- the sandbox asked for where it cannot run ------------------------------------------


@pytest.fixture
def no_bwrap_path(tmp_path: Path) -> Iterator[str]:
    """A PATH with bash and python but no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "env"):
        (bin_dir / program).symlink_to(
            subprocess.check_output(["which", program], text=True).strip()
        )
    yield str(bin_dir)


def test_missing_bwrap_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, no_bwrap_path: str, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", no_bwrap_path)
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed"):
        BwrapSandbox.create([])
    settings = Settings.from_env(home=tmp_path, tool_sandbox="bwrap")
    with pytest.raises(DuragentError, match="apt-get install bubblewrap"):
        tool_registry(settings)


def test_the_worker_refuses_to_start_without_bwrap(no_bwrap_path: str, tmp_path: Path) -> None:
    env = {
        "PATH": no_bwrap_path,
        "HOME": str(tmp_path),
        "DURAGENT_HOME": str(tmp_path / "state"),
        "DURAGENT_TOOL_SANDBOX": "bwrap",
        "TEMPORAL_ADDRESS": "127.0.0.1:1",  # never reached: the check comes first
    }
    done = subprocess.run(
        [sys.executable, "-c", "from duragent.client.cli import main; main()", "worker"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "bwrap is not installed" in done.stderr
    assert "Traceback" not in done.stderr


UNSHARE = subprocess.run(["which", "unshare"], capture_output=True, text=True).stdout.strip()


@needs_bwrap
@pytest.mark.skipif(not UNSHARE, reason="util-linux unshare is not installed")
def test_bwrap_without_namespaces_is_a_clear_error(tmp_path: Path) -> None:
    """In a user namespace that may not make more of them, bwrap cannot build its sandbox:
    the worker says so and starts nothing."""
    no_namespaces = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    check = (
        "from duragent.worker import tool_registry; from duragent.settings import Settings; "
        + ("tool_registry(Settings.from_env(tool_sandbox='bwrap'))")
    )
    done = subprocess.run(
        [
            UNSHARE,
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            no_namespaces,
            "-",
            sys.executable,
            "-c",
            check,
        ],
        cwd=REPO,
        env={**os.environ, "DURAGENT_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "max_user_namespaces" in done.stderr and "Permission denied" in done.stderr:
        pytest.skip(f"cannot limit user namespaces here: {done.stderr.strip()}")
    if done.returncode == 0:
        pytest.skip("this bwrap builds its sandbox without a user namespace of its own")
    assert "bwrap cannot create its sandbox here" in done.stderr, done.stderr
    assert "namespace" in done.stderr
