"""`ask_user`'s question and answer rules, the tool's spec, and the CLI's lines for it."""

from __future__ import annotations

import io

import pytest
from pydantic import ValidationError
from rich.console import Console

from duragent.activities.tools import ToolRegistry, default_tools
from duragent.client.cli.questions import question_lines
from duragent.client.render import EventPrinter
from duragent.domain.questions import (
    ASK_USER_TOOL,
    MAX_CHOICES,
    PendingQuestion,
    UserAnswer,
    UserQuestion,
)
from duragent.store.records import StoredEvent

pytestmark = pytest.mark.fast


def test_a_question_with_choices_takes_other_answers_unless_it_says_not() -> None:
    open_question = UserQuestion(question="Which?", choices=["a", "b"])
    assert open_question.allow_other is True
    assert open_question.refusal("c, or both") is None
    closed = UserQuestion(question="Which?", choices=["a", "b"], allow_other=False)
    assert closed.refusal("a") is None
    assert closed.refusal("c") == "the answer must be one of the choices: 'a', 'b'"
    assert UserQuestion(question="Why?").refusal("   ") == "the answer must not be blank"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"question": " "}, "the question must not be blank"),
        ({}, "Field required"),
        ({"question": "q", "choices": []}, "at least 1 item"),
        ({"question": "q", "choices": ["a", "a"]}, "the choices must differ"),
        ({"question": "q", "choices": ["a", " "]}, "a choice must not be blank"),
        ({"question": "q", "choices": ["x"] * (MAX_CHOICES + 1)}, "at most 20 items"),
        ({"question": "q", "timeout": 5}, "Extra inputs are not permitted"),
    ],
)
def test_bad_questions_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        UserQuestion.model_validate(arguments)


def test_an_answer_is_bounded() -> None:
    with pytest.raises(ValidationError):
        UserAnswer(call_id="c", answer="")
    with pytest.raises(ValidationError):
        UserAnswer(call_id="c", answer="x" * 16_001)


def test_ask_user_is_offered_only_where_active() -> None:
    registry = ToolRegistry(default_tools())
    assert ASK_USER_TOOL not in [spec["name"] for spec in registry.api_specs()]
    assert "is not active" in (registry.refusal(ASK_USER_TOOL, None) or "")
    [spec] = registry.api_specs(active=[ASK_USER_TOOL])
    assert spec["input_schema"]["required"] == ["question"]
    assert registry.refusal(ASK_USER_TOOL, ["read", ASK_USER_TOOL]) is None


def test_the_command_line_shows_the_question_and_how_to_answer() -> None:
    pending = PendingQuestion(
        call_id="call_1",
        question="Deploy?",
        choices=["yes", "no"],
        allow_other=False,
        turn=2,
        assistant_entry_id="a",
        asked_at=0,
    )
    assert question_lines(pending) == [
        "call_1  Deploy?  (turn 2)",
        "  1. yes",
        "  2. no",
        "  (answer with one of the choices)",
    ]
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=200), "s1")
    payload: dict[str, object] = {
        "call_id": "call_1",
        "question": "Deploy?",
        "choices": ["yes", "no"],
    }
    printer.show(event("question_asked", payload))
    printer.show(
        event("question_answered", {"call_id": "call_1", "status": "answered", "by": "ann"})
    )
    assert out.getvalue().splitlines() == [
        "  ? the agent asks: Deploy?",
        "    1. yes",
        "    2. no",
        '    answer: duragent answer s1 call_1 "TEXT"',
        "  answered by ann: call_1",
    ]


def event(kind: str, payload: dict[str, object]) -> StoredEvent:
    return StoredEvent(
        seq=1, session_id="s1", run_id="r1", type=kind, payload=payload, created_at=0
    )
