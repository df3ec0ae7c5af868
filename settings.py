"""Settings shared by the worker, the client and the CLI: environment first, then flags.

| variable | default |
|---|---|
| `DURAGENT_HOME` | `./.duragent` (state: database, dev server, workspaces) |
| `DURAGENT_DATABASE_URL` | `sqlite:///$DURAGENT_HOME/duragent.db` |
| `TEMPORAL_ADDRESS` | `127.0.0.1:7233` |
| `TEMPORAL_NAMESPACE` | `default` |
| `DURAGENT_TASK_QUEUE` | `duragent` |
| `DURAGENT_MODEL` | `claude-sonnet-5-5` |
| `ANTHROPIC_API_KEY` | none: the offline (scripted) model is used |
| `ANTHROPIC_BASE_URL` | Anthropic's; set by the CLI to the offline model when there is no key |
| `DURAGENT_OFFLINE_SCRIPT` | the bundled demo script |
| `DURAGENT_HEARTBEAT_TIMEOUT` | `10` seconds |
| `DURAGENT_HEARTBEAT_THROTTLE_MS` | `50` (abort latency is about this plus 5 ms) |
| `DURAGENT_MODEL_READ_TIMEOUT` | `120` seconds without a byte from the model: a hung stream |
| `DURAGENT_API_TOKENS` | `token=user,...` for the HTTP API (none: `serve` makes one up) |
| `DURAGENT_WORKSPACE_ROOTS` | none: `:`-separated folders API users may also put workspaces in |
| `DURAGENT_TEMPORAL_UI_PORT` | Temporal's port + 1000: the web UI a started dev server serves |
| `DURAGENT_TOOL_ENV` | tools get PATH, HOME, LANG, LC_*, TZ...; add `NAME`, `P*`, `NAME=value` |
| `DURAGENT_TOOL_SANDBOX` | `none`; `bwrap`: tool commands run in a bubblewrap sandbox |
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

ToolSandbox = Literal["none", "bwrap"]
TOOL_SANDBOXES: tuple[ToolSandbox, ...] = ("none", "bwrap")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    home: Path
    database_url: str
    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = "default"
    task_queue: str = "duragent"
    model: str = "claude-sonnet-5-5"
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    offline_script: Path | None = None
    heartbeat_timeout_s: float = 10.0
    heartbeat_throttle_ms: int = 50
    """At most one heartbeat per running activity this often: the abort latency bound,
    against one RPC per running activity per interval."""
    api_tokens: dict[str, str] = {}
    """Bearer token -> user name, for the HTTP API."""
    model_read_timeout_s: float = 120.0
    """Seconds without a byte from the model before the stream counts as hung."""
    workspace_roots: list[Path] = []
    """Folders under which HTTP API users may name a workspace, besides their own area
    (`client.workspaces`). Folders inside the state directory are never allowed."""
    temporal_ui_port: int | None = None
    """The Temporal web UI's port; None: Temporal's port + 1000, as the dev server does."""
    tool_env: list[str] = []
    """Environment for tool processes beyond the allow-list (`NAME`, `PREFIX*`,
    `NAME=value`); see `activities.tools.environment`."""
    tool_sandbox: ToolSandbox = "none"
    """Where tool commands run: on the host (`none`) or in a bubblewrap sandbox."""

    @field_validator("tool_env")
    @classmethod
    def _check_tool_env(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            check_tool_env_entry(entry)
        return entries

    @property
    def offline(self) -> bool:
        """No API key: the scripted offline model stands in for Claude."""
        return not self.anthropic_api_key

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

    @property
    def web_ui_port(self) -> int | None:
        """The port of Temporal's web UI (None: the address has no port to go by)."""
        if self.temporal_ui_port is not None:
            return self.temporal_ui_port
        port = self.temporal_address.rpartition(":")[2]
        return int(port) + 1000 if port.isdigit() and int(port) + 1000 < 65536 else None

    @property
    def resources_dir(self) -> Path:
        """Skills and prompt templates every session can use (`skills/`, `prompts/`)."""
        return self.home / "resources"

    @property
    def tool_processes(self) -> Path:
        """Where running tool processes are recorded, for the next attempt on this machine."""
        return self.home / "tool-processes"

    @property
    def dev_server_db(self) -> Path:
        return self.home / "temporal.db"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env = os.environ
        home = Path(str(overrides.pop("home", None) or env.get("DURAGENT_HOME", ".duragent")))
        home = home.expanduser().resolve()
        values: dict[str, object] = {
            "home": home,
            "database_url": env.get("DURAGENT_DATABASE_URL", f"sqlite:///{home / 'duragent.db'}"),
            "temporal_address": env.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
            "temporal_namespace": env.get("TEMPORAL_NAMESPACE", "default"),
            "task_queue": env.get("DURAGENT_TASK_QUEUE", "duragent"),
            "model": env.get("DURAGENT_MODEL", "claude-sonnet-5-5"),
            "anthropic_api_key": env.get("ANTHROPIC_API_KEY") or None,
            "anthropic_base_url": env.get("ANTHROPIC_BASE_URL") or None,
            "offline_script": env.get("DURAGENT_OFFLINE_SCRIPT") or None,
            "heartbeat_timeout_s": float(env.get("DURAGENT_HEARTBEAT_TIMEOUT", "10")),
            "heartbeat_throttle_ms": int(env.get("DURAGENT_HEARTBEAT_THROTTLE_MS", "50")),
            "model_read_timeout_s": float(env.get("DURAGENT_MODEL_READ_TIMEOUT", "120")),
            "api_tokens": parse_tokens(env.get("DURAGENT_API_TOKENS", "")),
            "workspace_roots": [
                Path(p.strip())
                for p in env.get("DURAGENT_WORKSPACE_ROOTS", "").split(":")
                if p.strip()
            ],
            "temporal_ui_port": env.get("DURAGENT_TEMPORAL_UI_PORT") or None,
            "tool_env": parse_tool_env(env.get("DURAGENT_TOOL_ENV", "")),
            "tool_sandbox": parse_tool_sandbox(env.get("DURAGENT_TOOL_SANDBOX", "")),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)


def parse_tokens(spec: str) -> dict[str, str]:
    """`"tok1=alice,tok2=bob"` -> {"tok1": "alice", "tok2": "bob"}; a bare token is user
    `default`."""
    tokens: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        token, _, user = part.partition("=")
        tokens[token] = user or "default"
    return tokens


_TOOL_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\*|=.*)?", re.DOTALL)
TOOL_ENV_RULE = "NAME (passed through), PREFIX* (every name starting so) or NAME=value"


def parse_tool_env(spec: str) -> list[str]:
    """`"GOPATH,CI=1,PIP_*"` -> ["GOPATH", "CI=1", "PIP_*"] (values cannot hold commas)."""
    entries = [part.strip() for part in spec.split(",") if part.strip()]
    for entry in entries:
        check_tool_env_entry(entry)
    return entries


def check_tool_env_entry(entry: str) -> None:
    if _TOOL_ENV_ENTRY.fullmatch(entry) is None:
        raise ValueError(f"DURAGENT_TOOL_ENV: {entry!r} is not {TOOL_ENV_RULE}")


def parse_tool_sandbox(value: str) -> ToolSandbox:
    """`DURAGENT_TOOL_SANDBOX`: empty or `none`, or `bwrap`."""
    name = value.strip().lower() or "none"
    for sandbox in TOOL_SANDBOXES:
        if name == sandbox:
            return sandbox
    raise ValueError(f"DURAGENT_TOOL_SANDBOX: {value!r} is not one of {', '.join(TOOL_SANDBOXES)}")
