"""The soak's short run (bench/soak.py): six sessions at work for about 45 seconds while
workers, the dev server and PostgreSQL fail at random (each kind of failure at least once)
and the model answers with random faults, input coming by every channel; then nothing
lost, nothing doubled, no run failed but on an injected model fault, no process left behind.

`DURAGENT_SOAK_SEED` replays a failing run with its seed (the failure message prints it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from postgres_server import find_binaries

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak import SoakOptions, print_report, soak
from soak_chaos import KINDS

SEED = int(os.environ.get("DURAGENT_SOAK_SEED", "2404"))


@pytest.mark.timeout(420)
async def test_nothing_lost_under_a_short_soak(capsys: pytest.CaptureFixture[str]) -> None:
    if find_binaries() is None and not os.environ.get("DURAGENT_REQUIRE_POSTGRES"):
        pytest.skip("the soak's store is PostgreSQL, which is not installed")
    options = SoakOptions(sessions=6, minutes=0.7, seed=SEED, chaos_every_s=4.5, drain_s=150)
    report = await soak(options, say=lambda line: None)
    print_report(report)
    seen = capsys.readouterr().out
    print(seen)  # shown when the test fails
    verdict = report.verdict
    assert not verdict.lost, f"seed {SEED}: lost\n{seen}"
    assert not verdict.doubled, f"seed {SEED}: doubled\n{seen}"
    assert not verdict.failed, f"seed {SEED}: failed\n{seen}"
    assert verdict.runs >= 12, f"seed {SEED}: only {verdict.runs} runs\n{seen}"
    assert sum(report.kills.values()) >= 4, f"seed {SEED}: too few failures\n{seen}"
    assert set(report.kills) == set(KINDS), f"seed {SEED}: a kind of failure missing\n{seen}"
    silent = [c for c in ("chat", "webhook", "schedule firing") if not report.accepted[c]]
    assert not silent, f"seed {SEED}: no input by {silent}\n{seen}"
    assert verdict.statuses["completed"] >= verdict.runs // 2, seen
