"""A schedule's cron expressions: refused before the schedule is made, in plain words
naming what is wrong and what is accepted, rather than in Temporal's."""

from __future__ import annotations

import pytest

from duragent.domain.schedules import check_cron

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "expression",
    [
        "0 9 * * 1-5",
        "*/15 * * * *",
        "1-5/2,8 0 * jan-mar mon",
        "0 0 * * 7",
        "5 4 * * sun-sat",
        "0 0 * * mo",
        "0 0 * * * 2030",
        "30 0 0 1 * * *",
        "@hourly",
        "@daily",
        "@every 1h30m",
        "@every 14h/3h",
        "0 9 * * 1-5 # mornings",
        "CRON_TZ=Europe/Paris 0 9 * * *",
    ],
)
def test_forms_it_takes(expression: str) -> None:
    check_cron(expression)


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        (
            "every hour",
            "'every hour' has 2 fields; a cron expression has 5 fields: minute hour "
            "day-of-month month day-of-week, e.g. '0 * * * *' (every hour)",
        ),
        ("0 9 * *", "has 4 fields"),
        ("0 25 * * *", "the hour field '25' is not from 0 to 23"),
        ("60 * * * *", "the minute field '60' is not from 0 to 59"),
        ("0 0 0 * *", "the day-of-month field '0' is not from 1 to 31"),
        ("0 0 * 13 *", "the month field '13' is not from 1 to 12 or a month's name"),
        ("0 0 * ja *", "the month field 'ja'"),
        ("0 0 * * 8", "the day-of-week field '8' is not from 0 to 7 or a day's name"),
        ("0 0 5-1 * *", "the day-of-month field '5-1'"),
        ("*/0 * * * *", "the minute field '*/0'"),
        ("0 0 * * * 1999", "the year field '1999' is not from 2000 to 2100"),
        ("@often", "the shorthands are @hourly, @daily"),
        ("@every soon", "@every needs an interval after it"),
    ],
)
def test_what_it_refuses_is_named(expression: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_cron(expression)
    assert said in str(refused.value)
    assert "CronString" not in str(refused.value)
