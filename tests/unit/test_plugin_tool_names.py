"""Two plugins or agents may share one tool; two different tools of one name are refused."""

from __future__ import annotations

import pytest

import duragent
from duragent.client.plugins import PluginError, load_plugins

pytestmark = pytest.mark.fast


def lookup(key: str) -> str:
    """Look a key up."""
    return key


def other_lookup(key: str) -> str:
    """Look a key up elsewhere."""
    return key.upper()


def test_one_tool_shared_by_a_plugin_and_an_agent_is_served_once() -> None:
    agent = duragent.Agent("finder", tools=[lookup])
    loaded = load_plugins(duragent.Settings(), [duragent.Plugin(name="p", tools=[lookup]), agent])
    assert loaded.tool_names().count("lookup") == 1


def test_two_different_tools_of_one_name_are_refused() -> None:
    clash = duragent.Plugin(name="q", tools=[duragent.tool(name="lookup")(other_lookup)])
    loaded = load_plugins(duragent.Settings(), [duragent.Plugin(name="p", tools=[lookup]), clash])
    with pytest.raises(PluginError, match="plugin 'q': tool 'lookup' is defined twice"):
        loaded.tools()
