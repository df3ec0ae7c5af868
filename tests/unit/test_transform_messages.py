"""A transcript carried to another model (domain/transform_messages.py): what one model
wrote, as the next model's API takes it back."""

from __future__ import annotations

import re

import pytest

from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    user_text,
)
from duragent.domain.models import parse_model
from duragent.domain.transcript import MISSING_RESULT_TEXT, LlmMessage
from duragent.domain.transform_messages import transform_for

pytestmark = pytest.mark.fast

CLAUDE = parse_model("claude-sonnet-4-5")
GPT = parse_model("openai:gpt-4.1")


def claude_says(
    *content: AssistantContent, stop: StopReason = "stop", model: str = "claude-sonnet-4-5-20250929"
) -> AssistantMessage:
    """A reply as the Anthropic wire stores it: the model id the API returned."""
    return AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model=model,
        content=list(content),
        stop_reason=stop,
        timestamp=1,
    )


def gpt_says(*content: AssistantContent, api: str = "openai-chat") -> AssistantMessage:
    provider = "openai" if api == "openai-chat" else "openai-responses"
    return AssistantMessage(
        api=api, provider=provider, model="gpt-4.1-2025-04-14", content=list(content), timestamp=1
    )


def result(call_id: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="read", content=[TextContent(text=text)], timestamp=2
    )


def assistant_blocks(messages: list[LlmMessage]) -> list[AssistantContent]:
    return [b for m in messages if isinstance(m, AssistantMessage) for b in m.content]


def test_claude_s_thinking_reaches_openai_as_text_without_its_signature() -> None:
    messages: list[LlmMessage] = [
        user_text("plan it", 0),
        claude_says(
            ThinkingContent(thinking="First the tests.", signature="EqQBCkYIBxgCKkB..."),
            ThinkingContent(thinking="", signature="sig-of-nothing"),
            ThinkingContent(thinking="opaque", signature="redacted-data", redacted=True),
            TextContent(text="Here is the plan."),
        ),
        user_text("go on", 3),
    ]
    sent = transform_for(messages, GPT)
    assert assistant_blocks(sent) == [
        TextContent(text="First the tests."),
        TextContent(text="Here is the plan."),
    ]
    assert "EqQBCkYIBxgCKkB" not in repr(sent)
    # The target's own thinking goes back as it came, signature and all.
    reasoning = ThinkingContent(thinking="Checked.", signature='{"type":"reasoning"}')
    own = gpt_says(reasoning, TextContent(text="Done."))
    assert transform_for([user_text("x", 0), own], GPT) == [user_text("x", 0), own]


def test_thinking_stays_with_the_model_that_wrote_it_whatever_id_its_api_returned() -> None:
    signed = ThinkingContent(thinking="Hmm.", signature="sig")
    redacted = ThinkingContent(thinking="", signature="data", redacted=True)
    reply = claude_says(signed, redacted, TextContent(text="Yes."))
    # The session asked for `claude-sonnet-4-5`; the API answered as its dated snapshot.
    assert transform_for([user_text("q", 0), reply], CLAUDE)[1] == reply
    # Stored before messages named their provider and API: Anthropic's, as they were then.
    older = reply.model_copy(update={"api": None, "provider": None})
    assert transform_for([user_text("q", 0), older], CLAUDE)[1] == older
    # Claude on Bedrock, asked for by Bedrock's id, kept its thinking too.
    on_bedrock = reply.model_copy(update={"provider": "bedrock"})
    bedrock = parse_model("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert transform_for([user_text("q", 0), on_bedrock], bedrock)[1] == on_bedrock
    # Another Claude, or the same one from another provider, signed nothing of theirs.
    for target in (parse_model("claude-opus-4-5"), parse_model("vertex:claude-sonnet-4-5")):
        blocks = assistant_blocks(transform_for([user_text("q", 0), reply], target))
        assert blocks == [TextContent(text="Hmm."), TextContent(text="Yes.")], target


def test_call_ids_become_what_the_target_api_takes_and_their_results_follow() -> None:
    long_id = "call_" + "Ab9" * 15  # 50 characters: Anthropic's limit is 64, Chat's 40
    odd_id = "fc.7|rs/x+y="  # characters Anthropic refuses
    messages: list[LlmMessage] = [
        user_text("read both", 0),
        gpt_says(
            ToolCall(id=long_id, name="read", arguments={"path": "a"}),
            ToolCall(id=odd_id, name="read", arguments={"path": "b"}),
            api="openai-responses",
        ),
        result(long_id, "A"),
        result(odd_id, "B"),
    ]
    for target, limit in ((CLAUDE, 64), (GPT, 40)):
        sent = transform_for(messages, target)
        calls = [b for b in assistant_blocks(sent) if isinstance(b, ToolCall)]
        results = [m for m in sent if isinstance(m, ToolResultMessage)]
        for call in calls:
            assert re.fullmatch(rf"[A-Za-z0-9_-]{{1,{limit}}}", call.id), (target, call.id)
        # Each result answers its own call, under the call's new id.
        assert [(r.tool_call_id, r.content) for r in results] == [
            (calls[0].id, [TextContent(text="A")]),
            (calls[1].id, [TextContent(text="B")]),
        ]
        assert calls[1].id == "fc_7_rs_x_y_"
        assert calls[0].arguments == {"path": "a"}
    # An id the target takes already is left as it is.
    assert assistant_blocks(transform_for(messages, CLAUDE))[0] == ToolCall(
        id=long_id, name="read", arguments={"path": "a"}
    )


def test_ids_that_would_become_one_stay_two() -> None:
    messages: list[LlmMessage] = [
        user_text("two", 0),
        gpt_says(
            ToolCall(id="a.b", name="read"),
            ToolCall(id="a|b", name="read"),
            ToolCall(id="a_b", name="read"),
            api="openai-responses",
        ),
        result("a.b", "first"),
        result("a|b", "second"),
        result("a_b", "third"),
    ]
    sent = transform_for(messages, CLAUDE)
    ids = [b.id for b in assistant_blocks(sent) if isinstance(b, ToolCall)]
    assert len(set(ids)) == 3 and ids[2] == "a_b"  # the one that fitted keeps its id
    answered = {r.tool_call_id: r.content[0] for r in sent if isinstance(r, ToolResultMessage)}
    assert [answered[i] for i in ids] == [
        TextContent(text="first"),
        TextContent(text="second"),
        TextContent(text="third"),
    ]


def test_a_call_left_without_a_result_gets_one_saying_so() -> None:
    messages: list[LlmMessage] = [
        user_text("go", 0),
        gpt_says(ToolCall(id="call.1", name="bash"), TextContent(text="Running it.")),
        user_text("stop that, do this instead", 3),
    ]
    sent = transform_for(messages, CLAUDE)
    assert [m.role for m in sent] == ["user", "assistant", "toolResult", "user"]
    missing = sent[2]
    assert isinstance(missing, ToolResultMessage) and missing.is_error
    assert missing.tool_call_id == "call_1" and missing.tool_name == "bash"
    assert missing.content == [TextContent(text=MISSING_RESULT_TEXT)]


@pytest.mark.parametrize("stop", ["error", "aborted"])
def test_a_reply_that_failed_or_was_aborted_is_left_out_with_its_results(
    stop: StopReason,
) -> None:
    cut = claude_says(
        ThinkingContent(thinking="Let me", signature=None),
        ToolCall(id="toolu_cut", name="bash"),
        stop=stop,
    )
    messages: list[LlmMessage] = [
        user_text("go", 0),
        cut,
        result("toolu_cut", "interrupted"),
        user_text("again", 3),
    ]
    for target in (CLAUDE, GPT):
        sent = transform_for(messages, target)
        assert sent == [user_text("go", 0), user_text("again", 3)], target


def test_the_same_transcript_is_carried_the_same_way_every_time() -> None:
    messages: list[LlmMessage] = [
        user_text("go", 0),
        claude_says(
            ThinkingContent(thinking="Think.", signature="s"),
            ToolCall(id="toolu_" + "x" * 60, name="read"),
            ToolCall(id="toolu_" + "x" * 61, name="read"),
        ),
        result("toolu_" + "x" * 60),
        UserMessage(content=[TextContent(text="more")], timestamp=4),
    ]
    before = [m.model_copy(deep=True) for m in messages]
    first = transform_for(messages, GPT)
    assert transform_for(messages, GPT) == first
    assert messages == before  # the stored messages are not touched
    ids = [b.id for b in assistant_blocks(first) if isinstance(b, ToolCall)]
    assert len(set(ids)) == 2 and all(len(i) <= 40 for i in ids)
