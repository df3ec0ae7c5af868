"""A weather agent: a typed output, typed dependencies and one tool.

    python examples/weather/weather.py Oslo

With no key for the default model's provider, the offline model plays `offline.yaml`
(it reads the station, then answers). From the command line, in this folder:

    DURAGENT_OFFLINE_SCRIPT=offline.yaml duragent run --plugin weather:agent --agent weather "Oslo?"
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

import duragent


# --8<-- [start:agent]
class Forecast(BaseModel):
    """What the agent answers with."""

    city: str
    celsius: float = Field(description="The temperature now, in degrees Celsius")
    summary: str = Field(description="One sentence for a person")


@dataclass
class Station:
    """The run's dependencies: which weather station the tools read."""

    id: str
    units: str = "celsius"


@duragent.tool(retry_safe=True)
def read_station(ctx: duragent.ToolContext[Station], city: str) -> str:
    """Read the temperature a city's weather station reports.

    Args:
        city: The city, as a person names it.
    """
    return f"{ctx.deps.id} ({city}): 4.5 {ctx.deps.units}"


agent = duragent.Agent(
    "weather",
    instructions="You report the weather from the station's reading.",
    tools=[read_station],
    output_type=Forecast,
    deps_type=Station,
)


async def main(city: str) -> Forecast:
    settings = duragent.Settings.from_env(offline_script=Path(__file__).with_name("offline.yaml"))
    async with duragent.local(settings, plugins=[agent]) as client:
        result = await agent.run(f"Weather in {city}?", deps=Station(id="OSL-1"), client=client)
    print(f"{result.output.city}: {result.output.celsius} °C. {result.output.summary}")
    return result.output


# --8<-- [end:agent]


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Oslo"))
