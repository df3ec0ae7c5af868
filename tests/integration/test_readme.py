"""The README's Python example runs as written: on the offline model (no key), which plays
a review through the agent's output tool, and the test's Temporal dev server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from integration.test_examples import example_env
from processes import REPO

from duragent.temporal_dev import DevServer


def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- python-example -->", 1)[1].split("<!-- /python-example -->", 1)[0]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_python_example_runs(dev_server: DevServer, tmp_path: Path) -> None:
    script = tmp_path / "review.yaml"
    review = {"approve": True, "summary": "Tests pass; ready."}
    step = {"reply": [{"tool_use": {"name": "final_result_reviewer", "input": review}}]}
    script.write_text(yaml.safe_dump({"pick": "turn", "conversations": {"*": [step]}}))
    program = tmp_path / "example.py"
    program.write_text(readme_example())
    env = example_env(dev_server, tmp_path / "home")
    env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
    env["DURAGENT_OFFLINE_SCRIPT"] = str(script)
    done = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True Tests pass; ready. $"), done.stdout
