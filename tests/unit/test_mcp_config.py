"""The MCP config file and tool names: what a worker and a client accept, and what they say
when they do not. No server is started here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from duragent.activities.mcp.config import HttpServer, McpConfigError, StdioServer, load_config
from duragent.activities.mcp.names import (
    KnownToolNames,
    check_server_names,
    model_names,
    split_name,
)
from duragent.client.errors import DuragentError
from duragent.client.workers import tool_registry
from duragent.domain.config import check_tool_names
from duragent.settings import Settings

pytestmark = pytest.mark.fast

ANTHROPIC_TOOL_NAME = r"[a-zA-Z0-9_-]{1,64}"


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.yaml"
    path.write_text(text)
    return path


def test_a_config_with_a_stdio_and_an_http_server(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        """
servers:
  docs:
    command: python
    args: [docs.py]
    env: {DOCS_TOKEN: secret-env-value}
    retry_safe: true
  tracker:
    url: https://tracker.example.com/mcp
    headers: {Authorization: Bearer secret-header-value}
    call_timeout_s: 120
""",
    )
    config = load_config(path)
    docs, tracker = config.servers["docs"], config.servers["tracker"]
    assert isinstance(docs, StdioServer) and docs.retry_safe and docs.args == ["docs.py"]
    assert isinstance(tracker, HttpServer) and not tracker.retry_safe
    assert tracker.call_timeout_s == 120 and tracker.connect_timeout_s == 30
    # Secrets never show in a repr (logs, tracebacks).
    assert "secret" not in repr(config) and "secret" not in str(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("servers: {docs: {}}", "servers.docs: give either `command` (a stdio server) or `url`"),
        ("servers: {docs: {command: x, url: 'http://h'}}", "servers.docs: give either"),
        ("servers: {docs: {url: 'ftp://h'}}", "servers.docs.url: must be an http:// or https://"),
        ("servers: {docs: {command: x, colour: red}}", "servers.docs.colour: Extra inputs"),
        ("servers: {docs: {command: x, connect_timeout_s: 0}}", "connect_timeout_s: Input should"),
        ("servers: {docs: {command: x, retry_safe: maybe}}", "servers.docs.retry_safe:"),
        ("servers: {a__b: {command: x}}", "server name 'a__b' breaks the rule"),
        ("servers: {'my server': {command: x}}", "server name 'my server' breaks the rule"),
        ("servers: {_a: {command: x}}", "server name '_a' breaks the rule"),
        ("- just a list", "must be a mapping with a `servers` key"),
        ("servers: [", "not YAML or JSON at line"),
        ("mcpServers: {}", "mcpServers: Extra inputs are not permitted"),
    ],
)
def test_a_bad_config_names_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = config_file(tmp_path, text)
    with pytest.raises(McpConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"MCP config {path}: ")
    assert message in str(raised.value)


def test_a_bad_value_of_a_secret_is_not_echoed(tmp_path: Path) -> None:
    path = config_file(
        tmp_path, "servers: {web: {url: 'http://h', headers: {Authorization: [Bearer, s3cr3t]}}}"
    )
    with pytest.raises(McpConfigError, match=r"servers\.web\.headers\.Authorization") as raised:
        load_config(path)
    assert "s3cr3t" not in str(raised.value)


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match=r"mcp\.yaml: cannot read it"):
        load_config(tmp_path / "mcp.yaml")


def test_the_worker_refuses_to_start_with_a_bad_config(tmp_path: Path) -> None:
    path = config_file(tmp_path, "servers: {docs: {}}")
    settings = Settings.from_env(home=tmp_path, mcp_config=path)
    with pytest.raises(DuragentError, match=r"MCP config .*mcp\.yaml: servers\.docs: give either"):
        tool_registry(settings)


def test_the_worker_offers_the_config_servers_as_providers(tmp_path: Path) -> None:
    path = config_file(tmp_path, "servers: {docs: {command: x}, web: {url: 'http://h/mcp'}}")
    registry = tool_registry(Settings.from_env(home=tmp_path, mcp_config=path))
    assert [p.name for p in registry.sources] == ["docs", "web"]
    assert registry.traits_of("docs__search").known
    assert not registry.traits_of("docs__search").retry_safe
    assert not registry.traits_of("nobody__search").known


def test_the_setting_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURAGENT_MCP_CONFIG", str(tmp_path / "mcp.yaml"))
    assert Settings.from_env().mcp_config == tmp_path / "mcp.yaml"


# --- names -----------------------------------------------------------------------------


def test_plain_tool_names_get_the_server_prefix() -> None:
    assert model_names("docs", ["search", "get-page"]) == {
        "docs__search": "search",
        "docs__get-page": "get-page",
    }
    assert split_name("docs__get__page") == ("docs", "get__page")
    assert split_name("bash") is None


def test_names_outside_the_rule_are_mapped_into_it_each_its_own() -> None:
    originals = ["issues.get", "issues/get", "naïve tool", "x" * 80, "ok"]
    mapped = model_names("tracker", originals)
    assert sorted(mapped.values()) == sorted(originals)  # every tool keeps a name
    for name in mapped:
        assert re.fullmatch(ANTHROPIC_TOOL_NAME, name), name
        assert name.startswith("tracker__")
    # The two that clash after mapping get a hash each; a lone one stays readable.
    assert "tracker__ok" in mapped and "tracker__naïve_tool" not in mapped
    assert "tracker__na_ve_tool" in mapped
    clashing = [n for n, tool in mapped.items() if tool in ("issues.get", "issues/get")]
    assert len(set(clashing)) == 2 and all(n.startswith("tracker__issues_get_") for n in clashing)
    # The same listing maps the same way, whatever its order.
    assert model_names("tracker", list(reversed(originals))) == mapped


def test_active_tools_may_name_the_tools_of_configured_servers() -> None:
    known = KnownToolNames(["read", "bash"], ["docs"])
    check_tool_names(["read", "docs__search", "docs__any-tool"], known)
    with pytest.raises(ValueError, match=r"unknown tool 'web__search'; the tools are .*docs__\*"):
        check_tool_names(["web__search"], known)
    with pytest.raises(ValueError, match="unknown tool"):
        check_tool_names(["docs__" + "x" * 64], known)  # too long to be a model's tool name


def test_a_session_chooses_only_configured_servers() -> None:
    check_server_names(["docs"], ["docs", "web"])
    with pytest.raises(ValueError, match="unknown MCP server 'wiki'; the servers are docs, web"):
        check_server_names(["wiki"], ["docs", "web"])
    with pytest.raises(ValueError, match="no MCP config file is set"):
        check_server_names(["docs"], [])
