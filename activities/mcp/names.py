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
from collections.abc import Iterable

SEPARATOR = "__"
MAX_NAME = 64
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
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
