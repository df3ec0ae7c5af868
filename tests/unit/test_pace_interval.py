"""The heartbeat pace (`activities.heartbeat`): a process's running calls share a budget
of heartbeats, each as often as the floor while few run, never so rarely that a live
worker looks lost."""

from __future__ import annotations

import pytest

from duragent.activities.heartbeat import pace_interval

pytestmark = pytest.mark.fast


def test_few_calls_heartbeat_at_the_floor() -> None:
    assert pace_interval(1, 100, 0.05, 10) == 0.05
    assert pace_interval(5, 100, 0.05, 10) == 0.05


def test_many_calls_share_the_rate() -> None:
    assert pace_interval(50, 100, 0.05, 10) == pytest.approx(0.5)
    assert pace_interval(200, 100, 0.05, 10) == pytest.approx(2.0)


def test_never_further_apart_than_a_quarter_of_the_heartbeat_timeout() -> None:
    assert pace_interval(1000, 100, 0.05, 10) == pytest.approx(2.5)
    assert pace_interval(1000, 100, 0.05, 2) == pytest.approx(0.5)
    assert pace_interval(1000, 100, 0.05, 0.1) == 0.05  # the floor still holds
    assert pace_interval(1000, 100, 0.05, None) == pytest.approx(10.0)
