"""Agents over HTTP: the agents the plugins bring (`GET /api/agents`), for a client that
makes sessions of them (`POST /api/sessions` with `agent`)."""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from duragent.client.api import DuragentClient


class AgentView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    model: str
    """The model its sessions start with (the default model when the agent names none)."""
    output: str | None
    """The name of its output type; None: its runs answer in text."""
    tools: list[str]


def agent_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = APIRouter(prefix="/api")
    User = Annotated[str, Depends(current_user)]

    @router.get("/agents")
    def list_agents(owner: User) -> list[AgentView]:
        del owner  # every signed-in user may make sessions of any agent
        return [
            AgentView(
                name=agent.name,
                model=agent.model or client.settings.model,
                output=agent.output.type_name if agent.output else None,
                tools=agent.tool_names,
            )
            for agent in client.plugins.agents()
        ]

    return router
