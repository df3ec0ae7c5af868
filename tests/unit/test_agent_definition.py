"""What an agent's definition makes of a session: its config, its tools, its output."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

import duragent
from duragent.domain.agents import OutputSpec

pytestmark = pytest.mark.fast


class Answer(BaseModel):
    text: str


@dataclass
class Account:
    id: str


def test_a_session_of_an_agent_gets_its_model_instructions_tools_and_output() -> None:
    agent = duragent.Agent(
        "helper",
        model="openai:gpt-4.1",
        instructions="Be brief.",
        tools=["read"],
        mcp_servers=["docs"],
        output_type=Answer,
        deps_type=Account,
        output_retries=3,
    )

    @agent.tool
    def lookup(ctx: duragent.ToolContext[Account], key: str) -> str:
        """Look a key up in the account."""
        return f"{ctx.deps.id}/{key}"

    assert lookup.__name__ == "lookup"  # the function itself, for calling and type checks
    config = agent.session_config("claude-sonnet-4-5")
    assert config.model == "openai:gpt-4.1" and config.system_prompt == "Be brief."
    assert config.active_tools == ["read", "lookup", "final_result_helper", "docs__*"]
    assert config.mcp_servers == ["docs"] and config.agent == "helper"
    assert config.output == OutputSpec(tool="final_result_helper", type_name="Answer", retries=3)
    assert agent.deps_json(Account(id="a-1")) == {"id": "a-1"}
    with pytest.raises(RuntimeError, match="served already"):
        agent.plugin.agents[0].own_tools()
        agent.tool(lookup)


def test_a_text_agent_has_no_output_tool_and_bad_parts_are_refused() -> None:
    agent = duragent.Agent("plain")
    assert agent.output is None and agent.tool_names == []
    assert agent.session_config("claude-sonnet-4-5").model == "claude-sonnet-4-5"
    with pytest.raises(ValueError, match="agent name 'Plain Agent'"):
        duragent.Agent("Plain Agent")
    with pytest.raises(ValueError, match="nosuch"):
        duragent.Agent("plain", model="nosuch:model")
