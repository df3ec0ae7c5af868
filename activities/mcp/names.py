"""Tool names as the model sees them: `<server>__<tool>`, within Anthropic's rule.

The Messages API accepts tool names matching `^[a-zA-Z0-9_-]{1,64}$`. MCP allows more
(dots, slashes, any length), so a server's names are mapped: characters outside the rule
become `_`, and a name that would be too long, or that two tools would share after the
mapping, is cut and given a short hash of the server's own name, so each tool keeps a
name of its own and the same listing always maps the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Iterator

from duragent.domain.tools import TOOL_NAME

SEPARATOR = "__"
MAX_NAME = 64
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def split_name(name: str) -> tuple[str, str] | None:
    """(server, model-side tool name) of a prefixed name, or None if it has no prefix."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def model_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """The model's name for each of the server's tools: {model name: server's name}."""
    originals = list(dict.fromkeys(tools))
    cleaned = {tool: _OUTSIDE.sub("_", tool) or "_" for tool in originals}
    taken: dict[str, int] = {}
    for name in cleaned.values():
        taken[name] = taken.get(name, 0) + 1
    prefix = f"{server}{SEPARATOR}"
    mapped: dict[str, str] = {}
    for tool in originals:
        name = prefix + cleaned[tool]
        if len(name) > MAX_NAME or taken[cleaned[tool]] > 1:
            digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
            name = f"{name[: MAX_NAME - len(digest) - 1]}_{digest}"
        mapped[name] = tool
    return mapped


class KnownToolNames(Collection[str]):
    """The names a session's active tools may hold: the built-in tools', and for each MCP
    server any `<server>__<tool>` within the rule (a server's tools are listed only at run
    time, by the workers). Listed, the servers read as `<server>__*`."""

    def __init__(self, names: Iterable[str], servers: Iterable[str]) -> None:
        self._names = list(names)
        self._servers = list(servers)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self._names:
            return True
        parts = split_name(name)
        return parts is not None and parts[0] in self._servers and bool(TOOL_NAME.fullmatch(name))

    def __iter__(self) -> Iterator[str]:
        yield from self._names
        yield from (f"{server}{SEPARATOR}*" for server in self._servers)

    def __len__(self) -> int:
        return len(self._names) + len(self._servers)


def check_server_names(names: Iterable[str], known: Collection[str]) -> None:
    """Refuse MCP server names the config file does not list; `ValueError` naming them and
    the servers there are (a session chooses among the workers' servers, never adds one)."""
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        there = ", ".join(known) or "none (no MCP config file is set: DURAGENT_MCP_CONFIG)"
        raise ValueError(
            f"unknown MCP server{'s' if len(unknown) > 1 else ''} {listed}; the servers are {there}"
        )
