"""A user's project folder, as a Python developer starts one: a `mytools.py` beside them,
no PYTHONPATH, the stock commands run from that folder (`duragent ...` and
`python -m duragent ...`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MYTOOLS = '''
import duragent


@duragent.tool
def fetch_weather(city: str) -> str:
    """The weather in a city, today.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


plugin = duragent.Plugin(name="mytools", tools=[fetch_weather])
'''


def run_in(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env.update(DURAGENT_HOME=str(folder / ".duragent"), COLUMNS="200")
    return subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_stock_commands_find_a_plugin_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text(MYTOOLS)
    script = Path(sys.executable).parent / "duragent"

    listed = run_in(tmp_path, str(script), "tools", "--plugin", "mytools:plugin")
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert "The weather in a city, today." in lines["fetch_weather"]
    assert "plugin" in lines["fetch_weather"] and "built-in" in lines["read"]

    helped = run_in(tmp_path, sys.executable, "-m", "duragent", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "Usage: python -m duragent" in helped.stdout and "worker" in helped.stdout

    by_module = run_in(
        tmp_path, sys.executable, "-m", "duragent", "tools", "--plugin", "mytools:plugin"
    )
    assert by_module.returncode == 0, by_module.stderr
    assert "fetch_weather" in by_module.stdout


def test_a_plugin_that_is_nowhere_is_named_in_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "duragent"
    missing = run_in(tmp_path, str(script), "tools", "--plugin", "nothere:plugin")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "error: plugin 'nothere:plugin': cannot import nothere: No module named 'nothere'"
    )
