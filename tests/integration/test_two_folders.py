"""Two projects at once on the defaults: two folders, `duragent run` in each, no Temporal
address, task queue or state directory set, as two terminals would. Each folder runs its
own dev server on its own history file (the first at the default port when it is free,
the other on a port of its own, recorded in its home) and its own worker on its own
store: both runs complete, and each folder's commands find its own session and history,
never the other's, and never make a store where there was none."""

from __future__ import annotations

import json
import re
from pathlib import Path

from integration.test_cli_lifecycle import SESSION, Command, cli_env, duragent, one_tool_call

STARTED_SERVER = re.compile(r"Started a Temporal dev server at (127\.0\.0\.1:\d+)")


def folder_env(folder: Path, script: Path) -> dict[str, str]:
    """A terminal in `folder`: no state directory, Temporal address or task queue set."""
    env = cli_env(folder / ".duragent", script)
    del env["DURAGENT_HOME"]  # ./.duragent, from the folder the command runs in
    return env


def test_two_folders_run_at_once_each_on_its_own_server_worker_and_store(tmp_path: Path) -> None:
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    for folder in (first, second, third):
        folder.mkdir()
    gate = tmp_path / "go"
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        one_tool_call(f"echo waiting; while [ ! -e {gate} ]; do sleep 0.05; done; echo went")
    )
    quick = tmp_path / "quick.yaml"
    quick.write_text(one_tool_call("echo from the second folder"))

    running = Command(folder_env(first, slow), "run", "go", cwd=first)
    try:
        first_session = running.err.wait_for(SESSION.pattern).group(1)
        running.out.wait_for(r"│ waiting$")  # the first folder's tool is running
        # The second folder's run, start to end, while the first one's tool runs.
        ran = duragent(folder_env(second, quick), "run", "go", cwd=second)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "from the second folder" in ran.stdout and "run completed" in ran.stdout
        gate.touch()
        assert running.wait() == 0, running.out.text + running.err.text
    finally:
        running.kill()
    first_address = STARTED_SERVER.search(running.err.text)
    second_address = STARTED_SERVER.search(ran.stderr)
    assert first_address and second_address, running.err.text + ran.stderr
    assert first_address.group(1) != second_address.group(1)
    for said in (running.err.text, ran.stderr):
        assert "Traceback" not in said, said
        assert "Using the worker" not in said, said  # each started its own worker
        assert "Keeping" not in said, said  # no command waited for the other folder's
    second_match = SESSION.search(ran.stderr)
    assert second_match is not None
    second_session = second_match.group(1)

    # Each folder's home records its own server, on its own history file.
    records = [
        json.loads((folder / ".duragent" / "temporal-dev-server.json").read_text())
        for folder in (first, second)
    ]
    assert records[0]["port"] != records[1]["port"]
    assert records[0]["cluster_id"] != records[1]["cluster_id"]

    # Each folder holds its own session and its history; the other's is named missing,
    # with the store that was looked in.
    for folder, own, other in (
        (first, first_session, second_session),
        (second, second_session, first_session),
    ):
        env = folder_env(folder, quick)
        listed = duragent(env, "sessions", cwd=folder)
        assert own in listed.stdout and other not in listed.stdout
        history = duragent(env, "history", own, cwd=folder)
        assert history.returncode == 0, history.stderr
        assert "bash" in history.stdout, history.stdout
        for command in ("show", "history", "status"):
            refused = duragent(env, command, other, cwd=folder)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            store = folder / ".duragent" / "duragent.db"
            assert f"session '{other}' does not exist in the store at {store}" in " ".join(
                refused.stderr.split()
            )
            assert "Traceback" not in refused.stderr

    # A folder where no session was made: the commands say so, and make no store there.
    env = folder_env(third, quick)
    for command in ("show", "history", "status"):
        refused = duragent(env, command, first_session, cwd=third)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        said = " ".join(refused.stderr.split())
        assert f"no duragent store at {third / '.duragent' / 'duragent.db'}" in said
    assert not (third / ".duragent" / "duragent.db").exists()
