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
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict


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

    @property
    def offline(self) -> bool:
        """No API key: the scripted offline model stands in for Claude."""
        return not self.anthropic_api_key

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

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
