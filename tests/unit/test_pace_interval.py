"""The heartbeat pace (`activities.heartbeat`): a running call heartbeats for liveness
only, a fraction of its heartbeat timeout apart, never under the floor."""

from __future__ import annotations

import pytest

from duragent.activities.heartbeat import DEFAULT_LIVENESS_S, liveness_interval

pytestmark = pytest.mark.fast


def test_a_call_heartbeats_every_third_of_its_heartbeat_timeout() -> None:
    assert liveness_interval(10, 0.05) == pytest.approx(10 / 3)
    assert liveness_interval(60, 0.05) == pytest.approx(20)


def test_never_under_the_floor() -> None:
    assert liveness_interval(0.1, 0.05) == 0.05


def test_a_call_without_a_heartbeat_timeout_still_heartbeats() -> None:
    assert liveness_interval(None, 0.05) == DEFAULT_LIVENESS_S
