"""Agents in code (`duragent.Agent`): a session made from an agent gets its model,
instructions and tools (and no others); its tools get the run's typed dependencies; a
run ends with the output type's value, which the model corrects when the type refuses
it or when it answered in text, within the agent's retries; the command line runs an
agent a plugin brings and prints its output."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp_support import stdio_server
from pydantic import BaseModel
from support import IN_PROCESS_MODEL, ApiServer, Stack, eventually, run_finished
from wire import offered_tools, tool_results, user_texts

import duragent
from duragent.client.agent import Agent, AgentRunFailed
from duragent.client.api import DuragentClient, RunHandle
from duragent.domain.agents import output_reminder

pytestmark = IN_PROCESS_MODEL  # nothing here is about a provider's wire


class Forecast(BaseModel):
    city: str
    celsius: float


@dataclass
class Units:
    scale: str
    station: str


@duragent.tool(retry_safe=True)
def temperature(ctx: duragent.ToolContext[Units], city: str) -> str:
    """The temperature in a city now."""
    return f"{city}: 4.5 degrees {ctx.deps.scale} at station {ctx.deps.station}"


def weather_agent(retries: int = 2) -> Agent[Units, Forecast]:
    return Agent(
        "weather",
        instructions="You report the weather.",
        tools=[temperature],
        output_type=Forecast,
        deps_type=Units,
        output_retries=retries,
    )


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": name, "input": args}}]}


OUTPUT = "final_result_weather"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                call("temperature", city="Oslo"),
                call(OUTPUT, city="Oslo", celsius="warm"),  # refused: not a number
                call(OUTPUT, city="Oslo", celsius=4.5),
            ]
        }
    }
)
async def test_a_run_ends_with_the_typed_output_and_tools_get_the_deps(stack: Stack) -> None:
    agent = weather_agent()
    async with stack.worker(plugins=[agent]):
        result = await agent.run(
            "Weather in Oslo?", deps=Units(scale="C", station="Blindern"), client=stack.client
        )
    assert result.output == Forecast(city="Oslo", celsius=4.5)
    assert result.turns == 3 and result.usage.output_tokens > 0
    requests = [r.body for r in stack.model.requests_for(result.session_id)]
    # Its tools and its output tool, none of the workers' built-in ones.
    assert offered_tools(requests[0]) == ["temperature", OUTPUT]
    assert requests[0]["system"][0]["text"].startswith("You report the weather.")
    assert "4.5 degrees C at station Blindern" in tool_results(requests[1])[-1].text
    refused = tool_results(requests[2])[-1]
    assert refused.is_error and "celsius" in refused.text
    session = await stack.client.sessions.get(result.session_id)
    assert session.config.agent == "weather"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "It is 4.5 degrees in Oslo."}]},
                call(OUTPUT, city="Oslo", celsius=4.5),
            ]
        }
    }
)
async def test_an_answer_in_text_is_asked_again_through_the_output_tool(stack: Stack) -> None:
    agent = weather_agent()
    async with stack.worker(plugins=[agent]):
        result = await agent.run("Weather in Oslo?", client=stack.client)
    assert result.output.celsius == 4.5 and result.run.status == "completed"
    second = stack.model.requests_for(result.session_id)[1].body
    assert user_texts(second)[-1] == output_reminder(OUTPUT)


@pytest.mark.script({"conversations": {"*": [call(OUTPUT, city="Oslo", celsius="warm")] * 2}})
async def test_outputs_refused_past_the_retries_end_the_run_with_an_error(stack: Stack) -> None:
    agent = weather_agent(retries=1)
    async with stack.worker(plugins=[agent]):
        with pytest.raises(AgentRunFailed) as failed:
            await agent.run("Weather in Oslo?", client=stack.client)
    result = failed.value.result
    assert result.status == "error" and result.turns == 2
    assert "no valid Forecast output after 2 tries" in (result.error or "")
    assert "celsius" in (result.error or "")


async def test_bad_deps_and_names_are_refused_before_anything_runs(stack: Stack) -> None:
    agent = weather_agent()
    with pytest.raises(TypeError, match="deps are not"):
        agent.deps_json({"scale": "C"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent name"):
        Agent("Weather Bot")
    with pytest.raises(duragent.DuragentError, match="no agent named 'nope'; the agents are"):
        await stack.client.sessions.create(agent="nope")
    assert await stack.client.sessions.list() == []


@pytest.mark.script({"conversations": {"*": [call(OUTPUT, city="Oslo", celsius=4.5)]}})
async def test_the_command_line_runs_an_agent_a_plugin_brings(stack: Stack, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "weather_agent.py").write_text(
        "from pydantic import BaseModel\n"
        "import duragent\n\n"
        "class Forecast(BaseModel):\n"
        "    city: str\n"
        "    celsius: float\n\n"
        'agent = duragent.Agent("weather", output_type=Forecast)\n'
    )
    env = {"PYTHONPATH": str(project)}
    code, out, err = await stack.cli("agents", "--plugin", "weather_agent:agent", env=env)
    assert code == 0, err
    assert "weather" in out and "output Forecast" in out
    code, out, err = await stack.cli(
        "run", "--plugin", "weather_agent:agent", "--agent", "weather", "Oslo?", env=env
    )
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"city": "Oslo", "celsius": 4.5}
    shown = 'output {"city": "Oslo", "celsius": 4.5}'  # the output call, as it ended
    assert any("final_result_weather" in line and line.endswith(shown) for line in out.splitlines())
    session = (await stack.client.sessions.list())[0].id
    code, out, err = await stack.cli("show", session, env=env)
    assert code == 0, err
    assert '✓ final_result_weather output {"city": "Oslo", "celsius": 4.5}' in out
    code, _, err = await stack.cli(
        "run", "--plugin", "weather_agent:agent", "--agent", "nope", "Oslo?", env=env
    )
    assert code == 2 and "no agent named 'nope'; the agents are: weather" in err


async def test_an_agent_session_is_found_again_only_by_its_agent(stack: Stack) -> None:
    agent = weather_agent()
    other = Agent("other")
    client = DuragentClient(stack.temporal, stack.db, stack.settings, plugins=[agent.plugin])
    async with agent.session(client=client) as session:
        made = session.id
    async with agent.session(client=client, session_id=made) as again:
        assert again.id == made
    with pytest.raises(duragent.DuragentError, match="not a session of agent 'other'"):
        async with other.session(client=client, session_id=made):
            pass


async def test_the_http_api_lists_the_agents_and_makes_their_sessions(stack: Stack) -> None:
    agent = weather_agent()
    stack.client = DuragentClient(stack.temporal, stack.db, stack.settings, plugins=[agent])
    server = ApiServer(stack)
    await server.start()
    try:
        async with server.client() as http:
            listed = (await http.get("/api/agents")).json()
            assert listed == [
                {
                    "name": "weather",
                    "model": stack.settings.model,
                    "output": "Forecast",
                    "tools": ["temperature", OUTPUT],
                }
            ]
            made = await http.post("/api/sessions", json={"agent": "weather"})
            assert made.status_code == 201, made.text
            session = await stack.client.sessions.get(made.json()["session"]["id"])
            assert session.config.agent == "weather" and session.config.output is not None
            refused = await http.post("/api/sessions", json={"agent": "nope"})
            assert refused.status_code == 400
            assert "no agent named 'nope'; the agents are: weather" in refused.json()["detail"]
    finally:
        await server.stop()
    assert len(await stack.client.sessions.list()) == 1


@pytest.mark.script(
    {
        "conversations": {
            "*": [call("one__echo", text="hello"), {"reply": [{"text": "It said hello."}]}]
        }
    }
)
async def test_an_agents_mcp_server_is_served_and_offered_to_its_sessions_alone(
    stack: Stack, tmp_path: Path
) -> None:
    agent = Agent("echoer", mcp_servers={"one": stdio_server("one", tmp_path / "one.log")})
    async with stack.worker(plugins=[agent]):
        result = await agent.run("Echo hello.", client=stack.client)
        plain = await stack.client.sessions.create()
        await (await stack.client.runs.prompt(plain.id, "Echo hello.")).result()
    assert result.output == "It said hello."
    first = stack.model.requests_for(result.session_id)[0].body
    assert sorted(offered_tools(first)) == ["one__add", "one__broken", "one__echo", "one__wait"]
    assert (
        tool_results(stack.model.requests_for(result.session_id)[1].body)[-1].text
        == "one says: hello"
    )
    # A session of no agent is offered the workers' tools, not the agent's server's.
    assert not any(
        name.startswith("one__")
        for name in offered_tools(stack.model.requests_for(plain.id)[0].body)
    )


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"wait_for": "go", "reply": [{"text": "First answer."}]},
                call("temperature", city="Bergen"),
                {"reply": [{"text": "Bergen is cold."}]},
            ]
        }
    }
)
async def test_input_queued_while_busy_runs_with_the_same_deps(stack: Stack) -> None:
    agent: Agent[Units, str] = Agent("thermo", tools=[temperature], deps_type=Units)
    async with stack.worker(plugins=[agent]), agent.session(client=stack.client) as session:
        handle = await session.start("Oslo?", deps=Units(scale="C", station="Blindern"))
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        queued = await stack.client.inputs.send(session.id, "And Bergen?")
        assert not isinstance(queued, RunHandle)  # busy: it waits for the next run
        stack.model.release("go")
        assert (await session.result(handle)).output == "First answer."
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 3)
        await eventually(lambda: run_finished(stack, session.id))
    third = stack.model.requests_for(session.id)[2].body
    assert "Bergen: 4.5 degrees C at station Blindern" in tool_results(third)[-1].text
