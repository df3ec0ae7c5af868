"""The weather agent, tested offline: `pytest examples/weather` (no network, no key).

A function model stands in for the provider: it reads the station first, then answers
with the output. The run is real: Temporal's dev server, a store and a worker, in a
temporary folder, for the test alone (`duragent.testing.agent_env`).
"""

from __future__ import annotations

from weather import Forecast, Station, agent

from duragent import testing
from duragent.domain.messages import ToolResultMessage
from duragent.domain.transcript import LlmMessage


def forecaster(messages: list[LlmMessage], info: testing.AgentInfo) -> testing.Reply:
    readings = [m for m in messages if isinstance(m, ToolResultMessage)]
    if not readings:
        return testing.call("read_station", {"city": "Oslo"})
    reading = readings[-1].content[0]
    assert "OSL-1 (Oslo): 4.5 celsius" in getattr(reading, "text", "")
    return testing.output(Forecast(city="Oslo", celsius=4.5, summary="Cold and clear."))


async def test_the_forecast_comes_from_the_station() -> None:
    async with testing.agent_env(agent, model=testing.FunctionModel(forecaster)) as client:
        result = await agent.run("Weather in Oslo?", deps=Station(id="OSL-1"), client=client)
    assert result.output == Forecast(city="Oslo", celsius=4.5, summary="Cold and clear.")
    assert result.turns == 2


async def test_a_refused_answer_is_corrected() -> None:
    replies = testing.scripted_model(
        [
            testing.output({"city": "Oslo", "celsius": "cold", "summary": "?"}),
            testing.output(Forecast(city="Oslo", celsius=-3.0, summary="Freezing.")),
        ],
        agent="weather",
    )
    async with testing.agent_env(agent, model=replies) as client:
        result = await agent.run("Weather in Oslo?", deps=Station(id="OSL-1"), client=client)
    assert result.output.celsius == -3.0
