"""What a session made from an agent carries of it (`duragent.Agent`, `client.agent`):
its name, and the structured output its runs end with. Plain data, read by the workflow
(to ask the model again for an output it did not give) and by the client (to read it)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
"""An agent's name: lower-case letters, digits, '_' and '-', up to 40, a letter first
(it names the agent in URLs, commands and its output tool)."""

MAX_DEPS_BYTES = 16 * 1024
"""The most a run's dependencies may be, as JSON: they travel in each turn's activity
input (so every tool call has them), and each turn's history holds them again."""

OUTPUT_KEY = "final_output"
"""The key of the validated output in the output tool's result details (shown to
people and read by the client, never sent to the model)."""


class OutputSpec(BaseModel):
    """The structured output an agent's runs end with: the model gives it by calling
    `tool` (its parameters are the output type's schema); a call the type refuses is
    answered with the validation error, and the model tries again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    """The output tool's name (`output_tool_name`)."""
    type_name: str
    """The output type's name, for people reading the session."""
    retries: int = Field(default=2, ge=0, le=10)
    """How many refused outputs (or answers given without the tool) the run tolerates
    before it ends with an error."""


def shown_output(details: Mapping[str, Any] | None) -> str | None:
    """An output call's result as people read it ("output {...}", the output as JSON), or
    None for any other result."""
    if not details or OUTPUT_KEY not in details:
        return None
    return "output " + json.dumps(details[OUTPUT_KEY], ensure_ascii=False)


def output_tool_name(agent: str) -> str:
    """The name of `agent`'s output tool: one per agent, since each has its own schema."""
    return f"final_result_{agent.replace('-', '_')}"


def output_reminder(tool: str) -> str:
    """What the run tells the model when it answered without its output tool."""
    return (
        f"Your answer must be given by calling the `{tool}` tool, with the result as its "
        "arguments. Call it now."
    )


def check_agent_name(name: str) -> str:
    """`name`, or `ValueError` saying what an agent's name may be."""
    if not AGENT_NAME.fullmatch(name):
        raise ValueError(
            f"agent name {name!r} must be 1-40 lower-case letters, digits, '_' or '-', "
            "starting with a letter"
        )
    return name
