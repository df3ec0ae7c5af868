"""duragent as a user installs it: the wheel, non-editable, in a fresh virtualenv, used
from a project of the user's that has its own `settings.py`, `api/` and `client/`."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest
from mcp_support import free_port
from processes import REPO
from support import eventually, serves

from duragent.temporal_dev import DevServer

USES = '''
import duragent

@duragent.tool(retry_safe=True)
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)

plugin = duragent.Plugin(name="mine", tools=[add])

async def ask(settings: duragent.Settings) -> str | None:
    client = await duragent.DuragentClient.connect(settings, plugins=[plugin])
    session = await client.sessions.create(name="mine")
    result = await (await client.runs.prompt(session.id, "hi")).result()
    return result.final_text
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed (its dependencies are this one's)."""
    where = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", where / "dist", REPO],
        check=True,
        timeout=300,
    )
    (wheel,) = (where / "dist").glob("duragent-*.whl")
    top = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert top == {
        "duragent",
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel],
        check=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies: this environment's (a path line adds no editable finder of ours).
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project whose own modules have the names duragent's parts have."""
    (tmp_path / "settings.py").write_text("MINE = True\n")
    for package in ("api", "client"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "uses.py").write_text(USES)
    return tmp_path


def user_env(project: Path, dev_server: DevServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        DURAGENT_HOME=str(project / ".duragent"),
        TEMPORAL_ADDRESS=dev_server.address,
        DURAGENT_TASK_QUEUE=f"wheel-{uuid.uuid4().hex[:8]}",
    )
    return env


def test_the_wheel_is_duragent_alone_and_leaves_the_users_modules_be(
    installed: Path, project: Path, dev_server: DevServer
) -> None:
    python = installed / "bin" / "python"
    check = (
        "import duragent, settings, api, client\n"
        "assert settings.MINE and api.MINE and client.MINE\n"
        "from duragent import DuragentClient, Settings, tool\n"
        "print(duragent.__file__)\n"
    )
    done = subprocess.run(
        [python, "-c", check],
        cwd=project,
        env=user_env(project, dev_server),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith(str(installed)), done.stdout
    duragent = installed / "bin" / "duragent"
    version = subprocess.run([duragent, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "duragent 0.1.0"
    ran = subprocess.run(
        [duragent, "run", "Write a hello script and run it"],
        cwd=project,
        env=user_env(project, dev_server),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr
    assert (project / ".duragent" / "duragent.db").exists()


async def test_serve_serves_the_page_from_the_wheel(
    installed: Path, project: Path, dev_server: DevServer
) -> None:
    port = free_port()
    server = subprocess.Popen(
        [installed / "bin" / "duragent", "serve", "--port", str(port)],
        cwd=project,
        env=user_env(project, dev_server),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        await eventually(lambda: serves(url), timeout=60)
        async with httpx.AsyncClient() as http:
            html = (await http.get(url)).text
            assert "<script" in html
            assert (await http.get(f"{url}/web/app.css")).status_code == 200
            assert (await http.get(f"{url}/web/js/session_view.js")).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_mypy_strict_checks_a_users_code_against_the_public_api(
    installed: Path, project: Path
) -> None:
    # One cache, fresh in the test's folder, for both runs: the second takes what the first
    # learnt of duragent and its dependencies from it and checks its own file alone.
    cache = project / ".mypy-cache"

    def mypy(file: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--cache-dir",
                str(cache),
                "--python-executable",
                str(installed / "bin" / "python"),
                file,
            ],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
        )

    good = mypy("uses.py")
    assert good.returncode == 0, good.stdout
    (project / "wrong.py").write_text(
        USES.replace('client.sessions.create(name="mine")', "client.sessions.create(name=5)")
    )
    bad = mypy("wrong.py")
    assert bad.returncode == 1
    assert 'Argument "name" has incompatible type "int"; expected "str | None"' in bad.stdout, (
        bad.stdout
    )
