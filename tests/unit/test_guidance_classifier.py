# ruff: noqa: RUF001 (Chinese text and full-width punctuation are meant here)
"""The guidance classifier (`domain.guidance.classify`): which wording interrupts a run.

`interrupt` stops a running tool and skips planned ones; `supplement` lets running tools
finish. A client's explicit intent always wins; this is the rule for when there is none.
"""

from __future__ import annotations

import pytest

from duragent.domain.guidance import GuidanceIntent, classify

pytestmark = pytest.mark.fast

CASES: list[tuple[str, GuidanceIntent]] = [
    # English: asking to stop, change course or correct.
    ("stop", "interrupt"),
    ("Stop that, use the cached build instead", "interrupt"),
    ("wait, the tests live in tests/unit", "interrupt"),
    ("don't touch the migrations", "interrupt"),
    ("Do not push yet", "interrupt"),
    ("never mind the docs", "interrupt"),
    ("that's wrong: the port is 8080", "interrupt"),
    ("actually use pathlib", "interrupt"),
    ("revert the last edit", "interrupt"),
    # "no" as a refusal.
    ("no, use pathlib", "interrupt"),
    ("No,use pathlib", "interrupt"),
    ("no , the other file", "interrupt"),
    ("No! Not the prod database", "interrupt"),
    ("no", "interrupt"),
    ("No.", "interrupt"),
    ("no，用 pathlib", "interrupt"),
    # English: adding to the task.
    ("also update the changelog", "supplement"),
    ("and then run the linter", "supplement"),
    ("please add a test for empty input", "supplement"),
    ("don't forget to update the docs", "supplement"),
    # Redirecting words alone say how to go on, not to stop what runs.
    ("please use pathlib instead", "supplement"),
    ("switch the output to JSON", "supplement"),
    ("change the log level to debug as well", "supplement"),
    ("I'd rather have short names", "supplement"),
    # Near misses: words that contain an interrupting one, or "no" that is not a refusal.
    ("I know, keep going", "supplement"),
    ("nothing else, carry on", "supplement"),
    ("notice the second file too", "supplement"),
    ("now, also log the timing", "supplement"),
    ("there are no tests yet; add some", "supplement"),
    ("note: no rush", "supplement"),
    ("add a stopwatch to the benchmark", "supplement"),
    ("also print the unstoppable flag", "supplement"),
    ("the changelog needs a line too", "supplement"),
    ("a waiter class would help as well", "supplement"),
    # Chinese: stopping, correcting, changing course.
    ("停一下", "interrupt"),
    ("别改那个文件", "interrupt"),
    ("不要动数据库", "interrupt"),
    ("不对，端口是 8080", "interrupt"),
    ("改成用 pathlib", "interrupt"),
    ("算了，先不做这个", "interrupt"),
    ("等等，先看测试", "interrupt"),
    ("不是这个目录，而是 src", "interrupt"),
    ("取消刚才的修改", "interrupt"),
    ("你写错了，重新来", "interrupt"),
    # Chinese: adding to the task.
    ("另外更新一下文档", "supplement"),
    ("补充：还要加一个测试", "supplement"),
    ("顺便把日志也打印出来", "supplement"),
    # Chinese near misses: words containing an interrupting character.
    ("特别注意边界情况", "supplement"),
    ("另外再加一个别的测试", "supplement"),
    ("别忘了更新文档", "supplement"),
    ("另外加上错误处理", "supplement"),
    ("补充日志、指标等等", "supplement"),
    ("让它不停地重试", "supplement"),
    ("区分一下两者的区别", "supplement"),
]


@pytest.mark.parametrize(("text", "intent"), CASES)
def test_classify(text: str, intent: GuidanceIntent) -> None:
    assert classify(text) == intent
