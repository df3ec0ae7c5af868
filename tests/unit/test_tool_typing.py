"""`@duragent.tool` keeps the function's signature for type checkers: mypy, run on a user's
file as a user runs it, reports a wrong-typed call of a decorated function and passes a
right one, for `@tool`, `@tool(...)` and a method's tool."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import duragent

USERS_FILE = '''
from pathlib import Path

from pydantic import BaseModel

import duragent


@duragent.tool
def fetch_weather(city: str) -> str:
    """The weather in a city."""
    return city


@duragent.tool(retry_safe=True)
async def forecast(ctx: duragent.ToolContext[int], city: str, days: int = 3) -> list[str]:
    """The forecast."""
    return [city] * days + [str(ctx.deps + 1)]


class Inventory:
    @duragent.tool
    def lookup(self, sku: str) -> int:
        """Stock of an item."""
        return len(sku)


inventory = Inventory()
context = duragent.ToolContext(Path("."), deps=1)
as_tool: duragent.Tool[BaseModel] = fetch_weather
is_tool: duragent.FunctionTool[[str], str] = fetch_weather
bound = duragent.tool(inventory.lookup)

right: str = fetch_weather("Bern")
fetch_weather(123)  # wrong
soon = forecast(context, "Bern", days="x")  # wrong
inventory.lookup(7)  # wrong
bound(sku=7)  # wrong
wrong: int = fetch_weather("Bern")  # wrong
right_2 = forecast(context, "Bern", days=2)
right_3: int = inventory.lookup("A-1") + bound("B-2")
'''


@pytest.mark.slow  # mypy without a cache: about ten seconds
def test_mypy_reports_a_wrong_typed_call_of_a_tool_and_passes_a_right_one(
    tmp_path: Path,
) -> None:
    source = tmp_path / "users_tools.py"
    source.write_text(USERS_FILE.lstrip("\n"))
    # The package as installed (the root as `duragent`): the source tree's link folder,
    # since an editable install's import hook is invisible to mypy.
    package_path = Path(duragent.__file__).parent / ".mypy-path"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--follow-imports=silent",  # only the user's file is reported
            "--config-file",
            os.devnull,
            "--show-error-codes",
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(package_path)},
        timeout=240,
    )
    reported = sorted(
        {
            int(match.group(1))
            for match in re.finditer(r"users_tools\.py:(\d+): error", completed.stdout)
        }
    )
    lines = source.read_text().splitlines()
    wrong = [number for number, line in enumerate(lines, 1) if line.endswith("# wrong")]
    assert reported == wrong, completed.stdout + completed.stderr
    assert 'has incompatible type "int"; expected "str"' in completed.stdout
