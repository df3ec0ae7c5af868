"""Triggers over HTTP: `POST /api/triggers/{id}` takes a webhook's delivery, authenticated
by its signature alone (no bearer token: the sender is GitHub or another program holding
the trigger's secret); the routes that add, list, delete triggers and rotate secrets are
the owner's only (another user's trigger is not found, as everywhere).

A delivery's body is bounded (`MAX_TRIGGER_BODY_BYTES`, 413) before it is read; a refused
delivery is a 4xx naming the check that failed (`client.triggers`), with nothing stored.
The secret appears in the answer that made it (add, rotate) and in no other.
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from duragent.api.ownership import LOCAL_USER, owned_session, owns
from duragent.client.api import DuragentClient
from duragent.client.errors import TriggerNotFound
from duragent.client.triggers import TriggerWithSecret
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.triggers import MAX_TEMPLATE_CHARS, MAX_TRIGGER_NAME_CHARS
from duragent.store.records import TriggerRecord

TRIGGERS_PREFIX = "/api/triggers/"
MAX_TRIGGER_BODY_BYTES = 1024 * 1024
"""A webhook's body: GitHub's events are mostly a few to some tens of KiB (a push of
many commits more); one over 1 MiB is refused before it is read."""
TRIGGER_BODY_TOO_LARGE = (
    f"request body is over {MAX_TRIGGER_BODY_BYTES} bytes, the most a trigger's delivery "
    f"may be ({MAX_TRIGGER_BODY_BYTES // (1024 * 1024)} MiB); nothing was done"
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddTrigger(_Body):
    name: str = Field(min_length=1, max_length=MAX_TRIGGER_NAME_CHARS)
    template: str = Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)
    """The prompt, with fields of the body by path: `{pull_request.title}`."""
    session_id: str | None = Field(default=None, max_length=64)
    """The session deliveries go to (one of the user's)..."""
    new_session: bool = False
    """... or a new session for each delivery: one of the two."""

    @model_validator(mode="after")
    def _one_target(self) -> "AddTrigger":
        if (self.session_id is None) != self.new_session:
            raise ValueError("say where deliveries go: session_id, or new_session true")
        return self


class TriggerSecret(BaseModel):
    """A trigger and its secret: the answer to add and rotate-secret only."""

    trigger: TriggerRecord
    secret: str
    """Shown this once: keep it where the sender signs with it (GitHub's webhook secret)."""
    path: str
    """Where deliveries go: POST it, signed."""

    @classmethod
    def of(cls, made: TriggerWithSecret) -> "TriggerSecret":
        return cls(trigger=made.trigger, secret=made.secret, path=TRIGGERS_PREFIX + made.trigger.id)


class DeliveryResult(BaseModel):
    delivery_id: str
    session_id: str | None
    action: Literal["started", "queued", "pong"]
    """started: a run of the session began with the prompt; queued: the session was busy,
    the prompt waits for its next run; pong: GitHub's `ping`, signed right (nothing done)."""
    run_id: str | None = None
    item_id: str | None = None


def trigger_routes(
    client: DuragentClient, current_user: Callable[..., str], policy: WorkspacePolicy
) -> APIRouter:
    router = APIRouter(prefix="/api/triggers")
    User = Annotated[str, Depends(current_user)]

    async def owned(trigger_id: str, owner: str) -> TriggerRecord:
        try:
            trigger = await client.triggers.get(trigger_id)
        except TriggerNotFound:
            trigger = None
        if trigger is None or not owns(owner, trigger):
            raise HTTPException(404, f"trigger {trigger_id[:100]!r} does not exist")
        return trigger

    @router.post("", status_code=201)
    async def add(body: AddTrigger, owner: User) -> TriggerSecret:
        if body.session_id is not None:
            await owned_session(client, body.session_id, owner)
        made = await client.triggers.add(
            body.name,
            body.template,
            session_id=body.session_id,
            owner=owner,
        )
        return TriggerSecret.of(made)

    @router.get("")
    async def list_triggers(owner: User) -> list[TriggerRecord]:
        return await client.triggers.list(owner=owner, unowned=owner == LOCAL_USER)

    @router.get("/{trigger_id}")
    async def get_trigger(trigger_id: str, owner: User) -> TriggerRecord:
        return await owned(trigger_id, owner)

    @router.delete("/{trigger_id}", status_code=204)
    async def delete_trigger(trigger_id: str, owner: User) -> Response:
        await owned(trigger_id, owner)
        await client.triggers.delete(trigger_id)
        return Response(status_code=204)

    @router.post("/{trigger_id}/rotate-secret")
    async def rotate_secret(trigger_id: str, owner: User) -> TriggerSecret:
        await owned(trigger_id, owner)
        return TriggerSecret.of(await client.triggers.rotate_secret(trigger_id))

    @router.post("/{trigger_id}", status_code=202)
    async def receive(trigger_id: str, request: Request) -> DeliveryResult:
        """A delivery: the body signed with the trigger's secret (docs/triggers.md, "A
        GitHub webhook, end to end"). No bearer token: the signature is the authentication."""
        body = await request.body()
        done = await client.triggers.receive(trigger_id, request.headers, body, policy=policy)
        return DeliveryResult(
            delivery_id=done.delivery_id,
            session_id=done.session_id,
            action=done.action,
            run_id=done.run_id,
            item_id=done.item_id,
        )

    return router
