"""The examples run as a user runs them, on the offline model and the test's dev server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from mcp_support import free_port
from processes import REPO
from support import eventually, serves

from duragent.temporal_dev import DevServer

EXAMPLES = REPO / "examples"


def example_env(dev_server: DevServer, home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "DURAGENT_"))
    }
    env.update(
        DURAGENT_HOME=str(home),
        TEMPORAL_ADDRESS=dev_server.address,
        DURAGENT_TASK_QUEUE=f"examples-{uuid.uuid4().hex[:8]}",
    )
    return env


def run_example(name: str, dev_server: DevServer, home: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=home.parent,
        env=example_env(dev_server, home),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_support_agent_waits_for_its_refund_approval(
    dev_server: DevServer, tmp_path: Path
) -> None:
    out = run_example("support_agent.py", dev_server, tmp_path / "home")
    assert 'waiting for approval: refund_order {"order_id":"A-1","reason":"six days late"}' in out
    assert "completed: Order A-1 was six days late; I refunded it in full." in out


def test_duragent_runs_inside_an_existing_worker(dev_server: DevServer, tmp_path: Path) -> None:
    out = run_example("existing_worker.py", dev_server, tmp_path / "home")
    assert "Hello, duragent!" in out
    assert "completed after 4 turns:" in out


async def test_a_fastapi_app_streams_a_sessions_events(
    dev_server: DevServer, tmp_path: Path
) -> None:
    port = free_port()
    log = open(tmp_path / "app.log", "wb")  # noqa: SIM115
    app = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--port", str(port)],
        cwd=EXAMPLES,
        env=example_env(dev_server, tmp_path / "home"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"

        await eventually(lambda: serves(f"{url}/docs"), timeout=60)
        kinds: list[str] = []
        texts: list[str] = []
        async with (
            httpx.AsyncClient(timeout=120) as client,
            client.stream("GET", f"{url}/ask", params={"q": "Write a hello script"}) as reply,
        ):
            assert reply.headers["content-type"].startswith("text/event-stream")
            async for line in reply.aiter_lines():
                if line.startswith("data: "):
                    event = json.loads(line.removeprefix("data: "))
                    kinds.append(event["type"])
                    if event["type"] == "message_end":
                        texts.append(json.dumps(event))
        assert kinds[-1] == "agent_end"
        assert "tool_execution_start" in kinds and "message_update" in kinds
        assert any("hello from duragent" in text for text in texts)
    finally:
        app.terminate()
        app.wait(timeout=30)


WEATHER = EXAMPLES / "weather"
PYTHON_M = (sys.executable, "-m")


def test_the_weather_agent_answers_with_its_typed_output(
    dev_server: DevServer, tmp_path: Path
) -> None:
    out = run_example("weather/weather.py", dev_server, tmp_path / "home")
    assert "Oslo: 4.5 °C. Cold and clear in Oslo." in out


async def test_the_weather_agent_runs_from_its_folder_on_the_command_line(
    dev_server: DevServer, tmp_path: Path
) -> None:
    env = example_env(dev_server, tmp_path / "home")
    env["DURAGENT_OFFLINE_SCRIPT"] = str(WEATHER / "offline.yaml")
    done = subprocess.run(
        [*PYTHON_M, "duragent", "run", "--plugin", "weather:agent", "--agent", "weather", "Oslo?"],
        cwd=WEATHER,  # the project's own folder: its module is found there
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert json.loads(last) == {
        "city": "Oslo",
        "celsius": 4.5,
        "summary": "Cold and clear in Oslo.",
    }


def test_the_weather_project_tests_its_agent_offline(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DURAGENT_", "TEMPORAL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n0", "-p", "no:cacheprovider", str(WEATHER)],
        cwd=WEATHER,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


@pytest.mark.slow
def test_the_weather_project_passes_mypy_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [*PYTHON_M, "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path), "."],
        cwd=WEATHER,
        # The package as an installed wheel has it: `duragent` importable, typed (py.typed).
        env={**os.environ, "MYPYPATH": str(REPO / ".mypy-path")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
