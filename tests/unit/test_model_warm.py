"""A worker makes its default model's client before it polls: its first call (often a
lost worker's call moved on to it) must not wait about a second for the SDK's import."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.fast

PROBE = """
import sys
from duragent.activities.models.clients import ModelClients
clients = ModelClients(offline_base_url="http://127.0.0.1:9")
assert "anthropic" not in sys.modules, "imported before any model was named"
clients.warm("not-a-provider:some-model")  # left for its first call to report
clients.warm("claude-sonnet-4-5")
assert "anthropic" in sys.modules, "the default model's SDK was not imported"
assert clients.for_model("claude-sonnet-4-5") is clients.for_model("claude-sonnet-4-5")
print("warm")
"""


def test_warming_imports_the_models_sdk_and_passes_over_a_model_no_provider_serves() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "warm"
