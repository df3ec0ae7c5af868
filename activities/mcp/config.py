"""The MCP config file: which servers a worker connects to, and how.

```yaml
servers:
  docs:                      # tools appear as docs__<tool>
    command: python          # stdio: the worker starts this process
    args: [docs_server.py]
    env: {DOCS_TOKEN: "..."} # on top of a minimal environment (PATH, HOME, ...)
    cwd: /srv/docs
    retry_safe: true         # its tools may run again after a worker crash
  tracker:
    url: https://tracker.example.com/mcp   # streamable HTTP
    headers: {Authorization: "Bearer ..."}
    connect_timeout_s: 10
    call_timeout_s: 120
```

YAML or JSON (JSON is YAML). Header and environment values are secrets: they are kept
as `SecretStr`, so neither a log line, a run event nor an error message shows them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    ValidationError,
    field_validator,
)

SERVER_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
SERVER_NAME_MAX = 32
SERVER_NAME_RULE = (
    f"1 to {SERVER_NAME_MAX} letters, digits, '-' and single '_' (not first or last): "
    "the server's tools are named <server>__<tool>, and '__' separates the two"
)


class McpConfigError(ValueError):
    """The config file is missing, unreadable or breaks a rule; the message names the file
    and the field, never a secret value."""


class _Server(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    retry_safe: bool = False
    """Its tools have no side effects: a call interrupted by a worker crash may run again.
    Otherwise (the default) such a call is reported as interrupted and never re-run."""
    connect_timeout_s: float = Field(30.0, gt=0)
    """How long starting the server (or reaching it) and the handshake may take."""
    call_timeout_s: float | None = Field(None, gt=0)
    """How long one call may wait for its answer; None: as long as the tool activity."""


class StdioServer(_Server):
    """A server the worker starts as a child process and talks to over stdin/stdout."""

    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, SecretStr] = {}
    """Added to the minimal environment the SDK gives a server (PATH, HOME, USER, ...):
    the worker's own variables (its API keys) are not passed on."""
    cwd: Path | None = None


class HttpServer(_Server):
    """A server reached over streamable HTTP."""

    transport: Literal["http"] = "http"
    url: str
    headers: dict[str, SecretStr] = {}

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not re.match(r"https?://[^/\s]+", url):
            raise ValueError("must be an http:// or https:// URL")
        return url


def _transport(data: Any) -> str | None:
    if isinstance(data, StdioServer | HttpServer):
        return data.transport
    if not isinstance(data, dict):
        return None
    if "command" in data and "url" in data:
        return "both"
    return "stdio" if "command" in data else "http" if "url" in data else None


ServerConfig = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")],
    Discriminator(
        _transport,
        custom_error_type="server_kind",
        custom_error_message="give either `command` (a stdio server) or `url` (streamable "
        "HTTP), not both or neither",
    ),
]


class McpConfig(BaseModel):
    """The servers, by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, ServerConfig] = {}

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            if len(name) > SERVER_NAME_MAX or not SERVER_NAME.fullmatch(name):
                raise ValueError(f"server name {name!r} breaks the rule: {SERVER_NAME_RULE}")
        return servers


def load_config(path: Path) -> McpConfig:
    """Read and check the config file; `McpConfigError` naming the file and what is wrong."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise McpConfigError(f"MCP config {path}: cannot read it ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise McpConfigError(f"MCP config {path}: not YAML or JSON{at}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise McpConfigError(f"MCP config {path}: must be a mapping with a `servers` key")
    try:
        return McpConfig.model_validate(data)
    except ValidationError as exc:
        raise McpConfigError(f"MCP config {path}: {_errors(exc)}") from None


def _errors(exc: ValidationError) -> str:
    """Each bad field, by where it is (`servers.docs.url: ...`); the discriminator's tag is
    left out of the path, and no input value is shown (it may be a secret)."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = [str(p) for p in err["loc"] if p not in ("stdio", "http")]
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc) or 'file'}: {message}")
    return "; ".join(parts)


__all__ = [
    "SERVER_NAME_RULE",
    "HttpServer",
    "McpConfig",
    "McpConfigError",
    "ServerConfig",
    "StdioServer",
    "load_config",
]
