"""Host names and a workspace's move between hosts (the activities, on a real SQLite
store): what is copied, and what unpacking refuses so nothing escapes the workspace."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from duragent.activities.hosts import HostActivities
from duragent.domain.hosts import (
    MOVE_ERROR,
    PackWorkspaceInput,
    UnpackWorkspaceInput,
    host_task_queue,
    sanitized_host_name,
)
from duragent.settings import SettingError, Settings
from duragent.store import transfers
from duragent.store.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    store = Database(f"sqlite:///{tmp_path / 'store.db'}")
    yield store
    store.dispose()


def test_host_names_and_queues(tmp_path: Path) -> None:
    assert sanitized_host_name("build box #3.example.com") == "build-box-3.example.com"
    assert sanitized_host_name("???") == "localhost"
    assert host_task_queue("duragent", "a") == "duragent-host-a"
    settings = Settings.from_env(home=tmp_path, host="worker-1")
    assert settings.host_queue == "duragent-host-worker-1"
    assert Settings.from_env(home=tmp_path, shared_workspaces=True).host_queue is None
    with pytest.raises(SettingError, match="DURAGENT_HOST: 'a/b' is not a host name"):
        Settings.from_env(home=tmp_path, host="a/b")
    with pytest.raises(SettingError, match="DURAGENT_HOST_WAIT"):
        Settings.from_env(home=tmp_path, host_wait_s=0)


def test_a_workspace_moves_whole(tmp_path: Path, db: Database) -> None:
    source = tmp_path / "source"
    (source / "deep" / "er").mkdir(parents=True)
    (source / "deep" / "er" / "file.txt").write_text("content")
    (source / "link").symlink_to("deep/er/file.txt")
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o755)
    hosts = HostActivities("a", db)
    env = ActivityEnvironment()
    packed = env.run(
        hosts.pack_workspace, PackWorkspaceInput(transfer_id="t", workspace=str(source))
    )
    assert (packed.files, packed.chunks) == (3, 1)

    target = tmp_path / "elsewhere" / "target"
    unpacked = env.run(
        hosts.unpack_workspace, UnpackWorkspaceInput(transfer_id="t", workspace=str(target))
    )
    assert unpacked.files == 3
    assert (target / "deep" / "er" / "file.txt").read_text() == "content"
    assert (target / "link").readlink() == Path("deep/er/file.txt")
    assert (target / "run.sh").stat().st_mode & 0o111
    with db.transaction() as session:
        assert transfers.chunk_count(session, "t") == 0  # the pieces are gone
    assert not [p for p in target.parent.iterdir() if p.name != "target"]  # no leftovers


def stored_tar(db: Database, transfer_id: str, *members: tarfile.TarInfo) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    with db.transaction() as session:
        transfers.put_chunk(session, transfer_id, 0, buffer.getvalue())


def member(name: str, *, link: str | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    if link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
    else:
        info.size = 1
    return info


@pytest.mark.parametrize(
    "bad",
    [
        member("../escaped.txt"),
        member("passwd", link="/etc/passwd"),
        member("out", link="../../escaped.txt"),
    ],
    ids=["dotdot", "absolute-link", "link-out"],
)
def test_unpacking_refuses_what_would_leave_the_workspace(
    tmp_path: Path, db: Database, bad: tarfile.TarInfo
) -> None:
    stored_tar(db, "bad", member("fine.txt"), bad)
    target = tmp_path / "root" / "target"
    with pytest.raises(ApplicationError, match="cannot be unpacked safely") as refused:
        ActivityEnvironment().run(
            HostActivities("b", db).unpack_workspace,
            UnpackWorkspaceInput(transfer_id="bad", workspace=str(target)),
        )
    assert refused.value.type == MOVE_ERROR
    assert not target.exists()  # no half workspace
    assert not (tmp_path / "escaped.txt").exists()
    assert list((tmp_path / "root").iterdir()) == []


def test_unpacking_into_a_folder_with_files_is_refused(tmp_path: Path, db: Database) -> None:
    stored_tar(db, "t", member("fine.txt"))
    target = tmp_path / "target"
    target.mkdir()
    (target / "mine.txt").write_text("keep")
    with pytest.raises(ApplicationError, match="is not an empty folder"):
        ActivityEnvironment().run(
            HostActivities("b", db).unpack_workspace,
            UnpackWorkspaceInput(transfer_id="t", workspace=str(target)),
        )
    assert [p.name for p in target.iterdir()] == ["mine.txt"]


def test_packing_refuses_a_workspace_over_the_bound(tmp_path: Path, db: Database) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 2048)
    with pytest.raises(ApplicationError, match=r"more than the 0 MiB a move copies"):
        ActivityEnvironment().run(
            HostActivities("a", db).pack_workspace,
            PackWorkspaceInput(transfer_id="t", workspace=str(tmp_path), max_bytes=1024),
        )
