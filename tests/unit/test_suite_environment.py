"""The suite does not depend on the caller's shell: duragent's, Temporal's and the model
provider's variables set there are cleared for the tests (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_suite_passes_with_duragent_variables_set_in_the_shell(tmp_path: Path) -> None:
    shell = {
        **os.environ,
        "DURAGENT_TASK_QUEUE": "someone-elses-queue",
        "DURAGENT_HOME": str(tmp_path / "elsewhere"),
        "DURAGENT_HOST": "another-host",
        "TEMPORAL_ADDRESS": "temporal.example:7233",
        "ANTHROPIC_API_KEY": "sk-not-for-the-tests",
    }
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/unit/test_host_moves.py",
            "tests/unit/test_settings.py",
        ],
        cwd=REPO,
        env=shell,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert not (tmp_path / "elsewhere").exists()
