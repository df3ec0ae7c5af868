"""The peer side of bench/peers.py: pydantic-ai's durable agent on a Temporal worker.

Runs in a virtual environment of its own (bench/peers.py makes it, with
`pydantic-ai-slim[temporal,anthropic]`), never in duragent's: nothing of duragent is
imported here, and nothing of duragent imports this. It is a worker process only; the
bench starts the workflows (`PeerSession`, arguments: the prompt and the conversation
key) and reads their histories.

The agent is built as pydantic-ai's Temporal guide shows: a regular `Agent` with the
`TemporalDurability` capability (which replaced the deprecated `TemporalAgent` wrapper),
defined at module level, a workflow listing it in `__pydantic_ai_agents__`, the client
connected with `PydanticAIPlugin` and the worker given `AgentPlugin(agent)`. Its model is
`AnthropicModel` through `AnthropicProvider`, pointed at the bench's model server; its one
tool is `ls`, doing what duragent's `ls` does. Every model request carries the
conversation key as `metadata.user_id`, which is how the offline model tells one
conversation's requests from another's (duragent sends its session id there).

The settings come from the environment, read at import (workflow code runs in Temporal's
sandbox, which refuses reading it): PEER_TEMPORAL_ADDRESS, PEER_TASK_QUEUE,
PEER_MODEL_URL, PEER_MODEL, PEER_MAX_TOKENS, PEER_WORKSPACE, PEER_SYSTEM_PROMPT, and the
worker's tuning: PEER_MAX_ACTIVITIES, PEER_MAX_WORKFLOW_TASKS, PEER_CACHED_RUNS,
PEER_POLLERS; and PEER_HTTP=aiohttp for the model client over aiohttp (else httpx, as
pydantic-ai's provider ships).

    PEER_...=... python bench/peer_pydantic_ai.py
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import (
    AgentPlugin,
    PydanticAIPlugin,
    PydanticAIWorkflow,
    TemporalDurability,
)
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import UsageLimits
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker


def _setting(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


WORKSPACE = Path(os.environ.get("PEER_WORKSPACE", "."))
MAX_TOKENS = _setting("PEER_MAX_TOKENS", 8192)
LS_LIMIT = 500


def _provider() -> AnthropicProvider:
    url = os.environ.get("PEER_MODEL_URL", "http://127.0.0.1:1")
    if os.environ.get("PEER_HTTP") == "aiohttp":
        from anthropic import AsyncAnthropic, DefaultAioHttpClient

        client = AsyncAnthropic(base_url=url, api_key="offline", http_client=DefaultAioHttpClient())
        return AnthropicProvider(anthropic_client=client)
    return AnthropicProvider(base_url=url, api_key="offline")


agent = Agent(
    AnthropicModel(os.environ.get("PEER_MODEL", "claude-sonnet-4-5"), provider=_provider()),
    name="peer",
    instructions=os.environ.get("PEER_SYSTEM_PROMPT") or None,
    capabilities=[TemporalDurability()],
)


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
        settings = AnthropicModelSettings(
            max_tokens=MAX_TOKENS, anthropic_metadata={"user_id": key}
        )
        # pydantic-ai stops a run at 50 model requests unless told otherwise.
        result = await agent.run(
            prompt, model_settings=settings, usage_limits=UsageLimits(request_limit=None)
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
