"""`--every`: what an interval may be written as."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duragent.domain.schedules import every_text, parse_every

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("1h", 3600), ("1h30m", 5400), ("2d", 172800), (" 1H ", 3600)],
)
def test_intervals_it_reads(text: str, seconds: int) -> None:
    assert parse_every(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text", ["", "1", "h", "1 h", "1.5h", "30m1h", "1h1h", "-1h", "0s", "367d"]
)
def test_intervals_it_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="--every"):
        parse_every(text)


def test_an_interval_written_back() -> None:
    assert [every_text(timedelta(seconds=s)) for s in (90, 5400, 86400)] == ["1m30s", "1h30m", "1d"]
