"""The peer side of bench/peers.py: pydantic-ai's durable agent on a Temporal worker.

Runs in a virtual environment of its own (bench/peers.py makes it, with
`pydantic-ai-slim[temporal,anthropic,openai]`), never in duragent's: nothing of duragent is
imported here, and nothing of duragent imports this. It is a worker process only; the
bench starts the workflows (`PeerSession`, arguments: the prompt and the conversation
key) and reads their histories.

The agent is built as pydantic-ai's Temporal guide shows: a regular `Agent` with the
`TemporalDurability` capability (which replaced the deprecated `TemporalAgent` wrapper),
defined at module level, a workflow listing it in `__pydantic_ai_agents__`, the client
connected with `PydanticAIPlugin` and the worker given `AgentPlugin(agent)`. Its model
speaks PEER_PROTOCOL, pointed at the bench's model server: `AnthropicModel` through
`AnthropicProvider` (anthropic, the default), `OpenAIChatModel` (openai: Chat
Completions) or `OpenAIResponsesModel` (openai-responses) through `OpenAIProvider`; its
one tool is `ls`, doing what duragent's `ls` does. Every model request carries the
conversation key where duragent sends its session id, which is how the offline model
tells one conversation's requests from another's: `metadata.user_id` on Anthropic's wire,
`user` on OpenAI's.

The settings come from the environment, read at import (workflow code runs in Temporal's
sandbox, which refuses reading it): PEER_TEMPORAL_ADDRESS, PEER_TASK_QUEUE, PEER_PROTOCOL,
PEER_MODEL_URL (the model server's base URL for that protocol's SDK), PEER_MODEL (the
model's name as its API takes it), PEER_MAX_TOKENS, PEER_WORKSPACE, PEER_SYSTEM_PROMPT,
and the worker's tuning: PEER_MAX_ACTIVITIES, PEER_MAX_WORKFLOW_TASKS, PEER_CACHED_RUNS,
PEER_POLLERS; and PEER_HTTP=aiohttp for the model client over aiohttp (else httpx, as
pydantic-ai's providers ship).

    PEER_...=... python bench/peer_pydantic_ai.py
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import (
    AgentPlugin,
    PydanticAIPlugin,
    PydanticAIWorkflow,
    TemporalDurability,
)
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker


def _setting(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


WORKSPACE = Path(os.environ.get("PEER_WORKSPACE", "."))
MAX_TOKENS = _setting("PEER_MAX_TOKENS", 8192)
PROTOCOL = os.environ.get("PEER_PROTOCOL", "anthropic")
LS_LIMIT = 500


def _anthropic(name: str, url: str, aiohttp: bool) -> Model:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    if aiohttp:
        from anthropic import AsyncAnthropic, DefaultAioHttpClient

        client = AsyncAnthropic(base_url=url, api_key="offline", http_client=DefaultAioHttpClient())
        return AnthropicModel(name, provider=AnthropicProvider(anthropic_client=client))
    return AnthropicModel(name, provider=AnthropicProvider(base_url=url, api_key="offline"))


def _openai(name: str, url: str, aiohttp: bool, responses: bool) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    if aiohttp:
        from openai import AsyncOpenAI, DefaultAioHttpClient

        client = AsyncOpenAI(base_url=url, api_key="offline", http_client=DefaultAioHttpClient())
        provider = OpenAIProvider(openai_client=client)
    else:
        provider = OpenAIProvider(base_url=url, api_key="offline")
    if responses:
        return OpenAIResponsesModel(name, provider=provider)
    return OpenAIChatModel(name, provider=provider)


def _model() -> Model:
    """The model on PEER_PROTOCOL's wire; its SDK imported only for that protocol."""
    name = os.environ.get("PEER_MODEL", "claude-sonnet-4-5")
    url = os.environ.get("PEER_MODEL_URL", "http://127.0.0.1:1")
    aiohttp = os.environ.get("PEER_HTTP") == "aiohttp"
    if PROTOCOL == "anthropic":
        return _anthropic(name, url, aiohttp)
    if PROTOCOL in ("openai", "openai-responses"):
        return _openai(name, url, aiohttp, responses=PROTOCOL == "openai-responses")
    raise SystemExit(f"PEER_PROTOCOL={PROTOCOL!r}: expected anthropic, openai or openai-responses")


def _settings_for() -> Callable[[str], ModelSettings]:
    """A run's model settings by its conversation key: the output limit, and the key where
    the offline model reads it, in the protocol's own settings. Chosen at import: the
    workflow, in Temporal's sandbox, only calls it."""
    if PROTOCOL == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModelSettings

        return lambda key: AnthropicModelSettings(
            max_tokens=MAX_TOKENS, anthropic_metadata={"user_id": key}
        )
    from pydantic_ai.models.openai import OpenAIChatModelSettings, OpenAIResponsesModelSettings

    if PROTOCOL == "openai":
        return lambda key: OpenAIChatModelSettings(max_tokens=MAX_TOKENS, openai_user=key)
    return lambda key: OpenAIResponsesModelSettings(max_tokens=MAX_TOKENS, openai_user=key)


agent = Agent(
    _model(),
    name="peer",
    instructions=os.environ.get("PEER_SYSTEM_PROMPT") or None,
    capabilities=[TemporalDurability()],
)
_settings = _settings_for()


def _entries(path: Path) -> list[str]:
    names = [entry.name + "/" if entry.is_dir() else entry.name for entry in os.scandir(path)]
    return sorted(names, key=lambda name: (name.lower(), name))


@agent.tool_plain
async def ls(path: str = ".", limit: int = LS_LIMIT) -> str:
    """List a directory: one entry per line, sorted alphabetically, directories marked with
    a trailing '/', dotfiles included. At most limit entries (default 500). Not recursive.
    Paths are relative to the workspace root; absolute paths must be inside it."""
    folder = (WORKSPACE / path).resolve()
    if not folder.is_relative_to(WORKSPACE.resolve()):
        return f"{path} is outside the workspace"
    if not folder.is_dir():
        return f"Directory not found: {path}"
    entries = await asyncio.to_thread(_entries, folder)
    text = "\n".join(entries[:limit]) if entries else "(empty directory)"
    if len(entries) > limit:
        text += f"\n\n[Showing {limit} of {len(entries)} entries. Use a larger limit to see more.]"
    return text


@workflow.defn(name="PeerSession")
class PeerSession(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, prompt: str, key: str) -> str:
        # pydantic-ai stops a run at 50 model requests unless told otherwise.
        result = await agent.run(
            prompt, model_settings=_settings(key), usage_limits=UsageLimits(request_limit=None)
        )
        return result.output


async def main() -> None:
    client = await Client.connect(os.environ["PEER_TEMPORAL_ADDRESS"], plugins=[PydanticAIPlugin()])
    worker = Worker(
        client,
        task_queue=os.environ["PEER_TASK_QUEUE"],
        workflows=[PeerSession],
        plugins=[AgentPlugin(agent)],
        # What duragent's worker takes on at once (its "Worker tuning" settings).
        max_concurrent_activities=_setting("PEER_MAX_ACTIVITIES", 500),
        max_concurrent_workflow_tasks=_setting("PEER_MAX_WORKFLOW_TASKS", 10),
        max_cached_workflows=_setting("PEER_CACHED_RUNS", 1000),
        max_concurrent_workflow_task_polls=_setting("PEER_POLLERS", 5),
        max_concurrent_activity_task_polls=_setting("PEER_POLLERS", 5),
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
