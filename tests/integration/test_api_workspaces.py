"""Workspaces over the HTTP API: the server decides where a user's session works.

A user's sessions work in their own area (`workspaces/<user>/...`) or under roots the
operator allows (`DURAGENT_WORKSPACE_ROOTS`); anything else is refused with the rule, and
nothing is created on disk or in the store. The local client may name any folder.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import ApiServer, Stack

from duragent.api.app import create_app
from duragent.client.api import DuragentClient
from duragent.settings import Settings


def tree(folder: Path) -> set[str]:
    """Every path below `folder` (symlinks not followed)."""
    return {str(Path(d) / n) for d, dirs, files in os.walk(folder) for n in dirs + files}


async def create(http: Any, workspace: str | None = None) -> httpx.Response:
    body = {} if workspace is None else {"workspace": workspace}
    response: httpx.Response = await http.post("/api/sessions", json=body)
    return response


@asynccontextmanager
async def app_client(
    stack: Stack, tokens: dict[str, str], settings: Settings | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """The API app over the test's store with these tokens (and settings), in process,
    as the first token's user."""
    client = DuragentClient(stack.temporal, stack.db, settings or stack.settings)
    transport = httpx.ASGITransport(app=create_app(client, tokens))
    headers = {"Authorization": f"Bearer {next(iter(tokens))}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api", headers=headers
    ) as http:
        yield http


async def test_a_session_works_in_its_users_own_area(stack: Stack, api: ApiServer) -> None:
    root = stack.settings.workspaces.resolve()
    async with api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        made = (await create(alice)).json()["session"]
        assert made["workspace"] == str(root / "alice" / made["id"])
        assert Path(made["workspace"]).is_dir()
        theirs = (await create(bob)).json()["session"]
        assert theirs["workspace"] == str(root / "bob" / theirs["id"])
        named = await create(alice, "project")
        assert named.status_code == 201, named.text
        assert named.json()["session"]["workspace"] == str(root / "alice" / "project")
        again = await create(alice, "project/src/../docs")  # `..` inside the area is fine
        assert again.json()["session"]["workspace"] == str(root / "alice" / "project" / "docs")
        assert (await create(alice, str(root / "alice" / "abs"))).status_code == 201


async def test_paths_outside_the_users_area_are_refused_and_nothing_is_created(
    stack: Stack, api: ApiServer, tmp_path: Path
) -> None:
    home, root = stack.settings.home.resolve(), stack.settings.workspaces.resolve()
    outside = tmp_path / "outside"
    outside.mkdir()
    async with api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        bobs = Path((await create(bob)).json()["session"]["workspace"])
        area = Path((await create(alice)).json()["session"]["workspace"]).parent
        (area / "to-outside").symlink_to(outside)
        (area / "to-bob").symlink_to(bobs)
        refused = [
            "/",
            "/etc",
            "../../..",
            "..",
            "../bob",
            f"../bob/{bobs.name}",
            "project/../../bob/new",
            str(bobs),
            str(root / "bob" / "new"),
            str(root),
            str(home),
            str(home / "duragent.db"),
            str(outside / "new"),
            "to-outside",
            "to-outside/new",
            "to-bob",
            "to-bob/new",
            "~/new",
        ]
        before, sessions = tree(tmp_path), len(await stack.client.sessions.list())
        for workspace in refused:
            response = await create(alice, workspace)
            assert response.status_code == 403, (workspace, response.status_code, response.text)
            detail = response.json()["detail"]
            assert "not allowed" in detail and "your own area" in detail, detail
            assert "DURAGENT_WORKSPACE_ROOTS" in detail
        for workspace, reason in (("a\x00b", "NUL"), ("x" * 5000, "longer than 4096")):
            response = await create(alice, workspace)
            assert response.status_code == 422 and reason in response.json()["detail"]
        assert tree(tmp_path) == before, "a refused request created something"
        assert len(await stack.client.sessions.list()) == sessions
        assert not (root / "bob" / "new").exists() and not (outside / "new").exists()
    # The local client (a user on their own machine) may still use any folder.
    local = await stack.client.sessions.create(workspace=outside / "mine")
    assert local.workspace == str(outside / "mine") and (outside / "mine").is_dir()


async def test_roots_the_operator_allows(
    stack: Stack,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    projects, shared = tmp_path / "projects", tmp_path / "shared"
    for folder in (projects, shared):
        folder.mkdir()
    secret = tmp_path_factory.mktemp("secret")  # under no allowed root
    (projects / "to-secret").symlink_to(secret)
    # The second root holds the state directory: its other users' areas and the store stay
    # out of reach.
    monkeypatch.setenv("DURAGENT_WORKSPACE_ROOTS", f"{projects}: {stack.settings.home.parent}")
    roots = Settings.from_env(home=stack.settings.home).workspace_roots
    assert roots == [projects, stack.settings.home.parent]
    settings = stack.settings.model_copy(update={"workspace_roots": roots})
    home, root = settings.home.resolve(), settings.workspaces.resolve()
    async with app_client(stack, {"a": "alice", "b": "bob"}, settings) as http:
        for workspace in (projects, projects / "app", shared / "team"):
            made = await create(http, str(workspace))
            assert made.status_code == 201, (workspace, made.text)
            assert made.json()["session"]["workspace"] == str(workspace)
            assert workspace.is_dir()
        before = tree(tmp_path)
        for workspace in (
            projects / "to-secret",
            projects / ".." / ".." / "elsewhere",
            home,
            home / "temporal.db",
            root,
            root / "bob",
            tmp_path,  # holds the state directory
            home.parent.parent,
        ):
            refused = await create(http, str(workspace))
            assert refused.status_code == 403, (workspace, refused.text)
            assert str(projects) in refused.json()["detail"]
        assert tree(tmp_path) == before


@pytest.mark.parametrize("user", ["..", ".", "../../etc", "a/b", "/abs", "", "%2E%2E", "x\\y"])
async def test_a_user_name_stays_one_folder_inside_the_workspaces_root(
    stack: Stack, user: str
) -> None:
    root = stack.settings.workspaces.resolve()
    async with app_client(stack, {"t": user, "u": "alice"}) as http:
        made = (await create(http)).json()["session"]  # as `user`
        area = Path(made["workspace"]).parent
        assert area.parent == root and area.name not in (".", "..")
        http.headers["Authorization"] = "Bearer u"  # another user cannot name that area
        assert (await create(http, f"../{area.name}/x")).status_code == 403
