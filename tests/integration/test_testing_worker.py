"""`duragent.testing`'s models in a real worker, on the real dev server and store: a
session's run asks a `FunctionModel` that calls a tool and then answers from the tool's
real result; a function that raises fails the run with its error; a scripted model's
turns play in order across two workers, each with its own copy of the script."""

from __future__ import annotations

from pathlib import Path

from support import IN_PROCESS_MODEL, Stack, assert_valid_pairing, transcript_roles

from duragent import testing
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of
from duragent.domain.transcript import LlmMessage
from duragent.testing import AgentInfo

pytestmark = IN_PROCESS_MODEL  # the models here are in-process: no offline model server


async def test_a_function_model_calls_a_tool_then_answers_from_its_result(stack: Stack) -> None:
    told: list[AgentInfo] = []

    def model(messages: list[LlmMessage], info: AgentInfo) -> testing.Reply:
        told.append(info)
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            return [testing.text("Let me look."), testing.call("ls", {"path": "."})]
        return f"The workspace holds: {text_of(results[-1].content).strip()}"

    session = await stack.client.sessions.create(name="function model")
    (Path((await stack.client.sessions.get(session.id)).workspace) / "notes.txt").write_text("hi\n")
    async with stack.worker(models=testing.model_clients(testing.FunctionModel(model))):
        handle = await stack.client.runs.prompt(session.id, "What is in the workspace?")
        result = await handle.result()

    assert result.status == "completed", result.error
    assert result.turns == 2 and result.final_text == "The workspace holds: notes.txt"
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    assert_valid_pairing(path)
    messages = [e.message for e in path if isinstance(e, MessageEntry)]
    asked, listed, answered = messages[1], messages[2], messages[3]
    assert isinstance(asked, AssistantMessage) and isinstance(answered, AssistantMessage)
    assert [(c.name, c.arguments) for c in asked.tool_calls] == [("ls", {"path": "."})]
    assert isinstance(listed, ToolResultMessage) and "notes.txt" in text_of(listed.content)
    assert (answered.provider, answered.model) == ("anthropic", "claude-sonnet-5-5")
    assert answered.usage.output_tokens > 0
    # The function was told what the model is: the session's model and tools.
    assert {info.model for info in told} == {stack.settings.model}
    ls = told[0].tool("ls")
    assert ls is not None and "path" in ls.input_schema["properties"]


async def test_a_function_that_raises_fails_the_run_with_its_error(stack: Stack) -> None:
    def model(messages: list[LlmMessage], info: AgentInfo) -> str:
        raise RuntimeError("the test's model has no answer")

    session = await stack.client.sessions.create(name="failing model")
    async with stack.worker(models=testing.model_clients(testing.FunctionModel(model))):
        result = await (await stack.client.runs.prompt(session.id, "Anything?")).result()

    assert result.status == "error"
    assert result.error is not None
    assert "RuntimeError: the test's model has no answer" in result.error, result.error


async def test_a_scripted_model_s_turns_play_in_order_on_two_workers(stack: Stack) -> None:
    """A worker plays the first run, another (its own copy of the script, as a second
    process would have) the second: the second run gets the script's second turn, after
    a scripted overload that its retry gets past."""
    replies: list[testing.ScriptedReply] = [
        "The first answer.",
        {"error": {"status": 529}},
        "The second answer.",
    ]
    session = await stack.client.sessions.create(name="scripted")
    texts = []
    for prompt in ("One?", "Two?"):
        models = testing.model_clients(testing.scripted_model(replies))
        async with stack.worker(models=models):
            result = await (await stack.client.runs.prompt(session.id, prompt)).result()
        assert result.status == "completed", result.error
        texts.append(result.final_text)
    assert texts == ["The first answer.", "The second answer."]
