"""Triggers (`client.triggers`): webhooks from outside made into prompts.

A trigger has a secret, made here (`secrets`, 256 bits) and shown once: in what `add`
and `rotate_secret` return, never in a record, a list or a log. A delivery
(`receive`) is checked in this order, and a refusal names which check failed with
nothing stored: its signature (`domain.trigger_signatures`), its timestamp, its delivery
id, a replay of a remembered delivery, its body (a JSON object) and the template's fields
in it, the prompt's size. Then the delivery is remembered and the prompt goes to the
trigger's session the way a chat box's input does (an idle session starts a run, a busy
one queues it to start the next run when the open one ends), or to a new session; a
resend of a delivery that was not delivered (a failure midway) is taken again, and
finds what the first attempt did (`client.inputs.deliver_once`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session

from duragent.client.bounds import bounded
from duragent.client.errors import SessionBusy, SessionNotFound, TriggerNotFound
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.client.run_control import RunHandle
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.session_file_checks import MAX_NAME_CHARS
from duragent.domain.trigger_signatures import (
    DELIVERY_MEMORY_S,
    GITHUB_EVENT,
    DeliveryReplayed,
    SignedDelivery,
    check_delivery,
)
from duragent.domain.triggers import (
    check_trigger_name,
    parse_body,
    template_fields,
    trigger_prompt,
)
from duragent.store import triggers
from duragent.store.clock import now_ms
from duragent.store.records import TriggerRecord

SECRET_BYTES = 32


@dataclass(frozen=True)
class TriggerWithSecret:
    """A trigger and its new secret: the one time the secret is shown."""

    trigger: TriggerRecord
    secret: str


@dataclass(frozen=True)
class Delivered:
    """What a delivery did."""

    delivery_id: str
    session_id: str | None
    action: Literal["started", "queued", "pong"]
    """pong: GitHub's `ping` event (sent when a webhook is made), answered once its
    signature holds; nothing else is done with it."""
    run_id: str | None = None
    item_id: str | None = None


class SyncTriggers(SyncPart):
    """Stored triggers (`client.sync.triggers`): add, read, delete, rotate secrets; the
    checks of a delivery."""

    def add(
        self,
        name: str,
        template: str,
        *,
        session_id: str | None = None,
        owner: str | None = None,
    ) -> TriggerWithSecret:
        """A new trigger whose deliveries go to `session_id` (None: a new session for
        each); the template is checked first (`InvalidTemplate` naming what is wrong).
        The caller checks that `owner` may name the session."""
        check_trigger_name(name)
        template_fields(template)
        if session_id is not None:
            self._client.sync.sessions.get(session_id)
        secret = new_secret()
        with self._client.db.transaction() as db:
            record = triggers.add_trigger(
                db,
                trigger_id=uuid.uuid4().hex,
                owner=owner,
                name=name,
                secret=secret,
                session_id=session_id,
                template=template,
                at_ms=now_ms(),
            )
        return TriggerWithSecret(record, secret)

    def get(self, trigger_id: str) -> TriggerRecord:
        """The trigger (without its secret); `TriggerNotFound` for an unknown id."""
        with self._client.db.transaction() as db:
            record = triggers.get_trigger(db, trigger_id)
        if record is None:
            raise TriggerNotFound(trigger_id)
        return record

    def list(
        self, *, owner: str | None = None, unowned: bool = False, every: bool = False
    ) -> list[TriggerRecord]:
        """The triggers of `owner` (with `unowned`, also those of no owner; `every`: all)."""
        with self._client.db.transaction() as db:
            return triggers.list_triggers(db, owner=owner, unowned=unowned, every=every)

    def delete(self, trigger_id: str) -> None:
        """Delete the trigger: deliveries to it are refused (404) from now on."""
        with self._client.db.transaction() as db:
            if not triggers.delete_trigger(db, trigger_id):
                raise TriggerNotFound(trigger_id)

    def rotate_secret(self, trigger_id: str) -> TriggerWithSecret:
        """A new secret for the trigger; the old one stops working at once."""
        secret = new_secret()
        with self._client.db.transaction() as db:
            if not triggers.set_secret(db, trigger_id, secret, now_ms()):
                raise TriggerNotFound(trigger_id)
            record = triggers.get_trigger(db, trigger_id)
        assert record is not None
        return TriggerWithSecret(record, secret)

    def _checked(
        self, trigger_id: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[TriggerRecord, str | None, SignedDelivery]:
        """The trigger, the delivery's prompt and its signature, once every check passed
        and the delivery is remembered (in one transaction with its last check); no
        prompt for GitHub's ping."""
        with self._client.db.transaction() as db:
            secret = triggers.secret_of(db, trigger_id)
            trigger = triggers.get_trigger(db, trigger_id)
        if secret is None or trigger is None:
            raise TriggerNotFound(trigger_id)
        signed = check_delivery(secret, headers, body, time.time())
        if signed.form == "github" and headers.get(GITHUB_EVENT) == "ping":
            return trigger, None, signed
        with self._client.db.transaction() as db:
            _refuse_replay(db, trigger.id, signed)
        prompt = trigger_prompt(
            trigger.name,
            signed.delivery_id,
            trigger.template,
            parse_body(body),
            lambda: secrets.token_hex(6),
        )
        bounded("the trigger's prompt", prompt)
        at = now_ms()
        with self._client.db.transaction() as db:
            if not triggers.remember_delivery(
                db, trigger.id, signed.delivery_id, signed.signature, at
            ):
                _refuse_replay(db, trigger.id, signed)  # raced: delivered meanwhile?
            triggers.prune_deliveries(db, at - DELIVERY_MEMORY_S * 1000)
        return trigger, prompt, signed

    def _delivered(self, trigger_id: str, delivery_id: str) -> None:
        with self._client.db.transaction() as db:
            triggers.mark_delivered(db, trigger_id, delivery_id)


class Triggers(StoreBackedPart[SyncTriggers]):
    """Add, list, delete triggers and rotate their secrets; take their deliveries."""

    add = in_thread(SyncTriggers.add)
    get = in_thread(SyncTriggers.get)
    list = in_thread(SyncTriggers.list)
    delete = in_thread(SyncTriggers.delete)
    rotate_secret = in_thread(SyncTriggers.rotate_secret)

    async def receive(
        self,
        trigger_id: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        policy: WorkspacePolicy | None = None,
    ) -> Delivered:
        """Take a delivery (`headers` by lower-case name): checked as the module says,
        then delivered. A new session for it works where `policy` gives the trigger's
        owner a fresh folder (none: the state directory's, as the command line's)."""
        trigger, prompt, signed = await asyncio.to_thread(
            self._store._checked, trigger_id, headers, body
        )
        if prompt is None:
            return Delivered(signed.delivery_id, None, "pong")
        # Remembered as not delivered until here: a sender's resend after a failure (a
        # service down midway, this answer lost) is taken again, and finds what this
        # attempt did, rather than being refused as a replay and lost.
        delivered = await self._deliver(trigger, signed.delivery_id, prompt, policy)
        await asyncio.to_thread(self._store._delivered, trigger.id, signed.delivery_id)
        return delivered

    async def _deliver(
        self, trigger: TriggerRecord, delivery_id: str, prompt: str, policy: WorkspacePolicy | None
    ) -> Delivered:
        key = f"trigger/{trigger.id}/{delivery_id}"
        if trigger.session_id is not None:
            sent = await self._client.inputs.deliver_once(
                trigger.session_id,
                prompt,
                run_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/run").hex,
                item_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/item").hex,
            )
            if isinstance(sent, RunHandle):
                return Delivered(delivery_id, trigger.session_id, "started", run_id=sent.run_id)
            return Delivered(delivery_id, trigger.session_id, "queued", item_id=sent.id)
        # The delivery's session, the same for every attempt: a sender's retry of a
        # delivery that failed midway finds the run that attempt started, if it did
        # (rather than starting a second); one whose run did not start left no session.
        session_id = uuid.uuid5(uuid.NAMESPACE_URL, key).hex
        try:
            found = await self._client.sessions.get(session_id)
        except SessionNotFound:
            found = None
        if found is not None and found.owner != trigger.owner:
            # Someone else's session under that id (an import keeps its file's ids): not
            # this delivery's, and its prompt must not go there.
            session_id, found = uuid.uuid4().hex, None
        earlier = await self._client.runs.list(session_id) if found else []
        if found is None:
            await self._client.sessions.create(
                name=f"{trigger.name}: {delivery_id}"[:MAX_NAME_CHARS],
                owner=trigger.owner,
                policy=policy if trigger.owner is not None else None,
                session_id=session_id,
            )
        if earlier:
            return Delivered(delivery_id, session_id, "started", run_id=earlier[-1].run_id)
        try:
            handle = await self._client.runs.prompt(session_id, prompt)
        except SessionBusy:
            raise  # a run of an earlier attempt holds the session: it is not empty
        except Exception:
            # The run did not start: the session made for it goes too, rather than
            # staying empty in the owner's list (a retry of the delivery makes it again,
            # under the same id). Kept if anything reached it meanwhile, or if the store
            # cannot be reached either (the retry then finds it): the caller hears of
            # the failure that stopped the run, not of this.
            with contextlib.suppress(Exception):
                await self._client.sessions.discard_unused(session_id)
            raise
        return Delivered(delivery_id, session_id, "started", run_id=handle.run_id)


def new_secret() -> str:
    """A trigger's secret: 256 random bits from the OS (`secrets`), URL-safe text."""
    return secrets.token_urlsafe(SECRET_BYTES)


def _refuse_replay(db: Session, trigger_id: str, signed: SignedDelivery) -> None:
    """`DeliveryReplayed` if the delivery repeats one remembered and delivered, or uses
    a remembered id or signed body for another delivery. One remembered but not delivered
    (an attempt that failed midway, or is under way) is taken again: delivering is
    idempotent (`Triggers._deliver`)."""
    seen = triggers.seen_delivery(db, trigger_id, signed.delivery_id, signed.signature)
    if seen in ("delivered", "other"):
        raise DeliveryReplayed(f"delivery {signed.delivery_id} was received already")
    if seen == "signature":
        raise DeliveryReplayed(
            "this signed body was received already, under another delivery id than "
            f"{signed.delivery_id}"
        )
