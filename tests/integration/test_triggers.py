"""Triggers from outside, end to end: the real API server, worker, dev server, store and
offline model. A delivery signed with the trigger's secret (GitHub's form or duragent's)
becomes a prompt in its session; each bad form is refused with a 4xx naming it, and
nothing is stored (no run, no queued input, no session, and its delivery id is still
free: the same id sent right is taken afterwards).

The tests sign as a sender would, with `hmac` alone, not with the server's own helpers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from support import BOTH_STORES, ApiServer, Stack, eventually, run_finished, user_texts

Json = dict[str, Any]

PR_EVENT: Json = {
    "action": "opened",
    "number": 42,
    "pull_request": {"title": "Fix the parser", "html_url": "https://example.test/pr/42"},
    "repository": {"full_name": "acme/widgets"},
}
PING = {"X-GitHub-Event": "ping"}
TEMPLATE = "Review pull request #{number} of {repository.full_name}: {pull_request.title}"


def github(secret: str, body: bytes, delivery: str | None) -> dict[str, str]:
    """The headers GitHub sends with a webhook: its signature of the body and its
    delivery id (no timestamp)."""
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-Hub-Signature-256": f"sha256={signature}",
    }
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return headers


def duragent_form(
    secret: str, body: bytes, delivery: str, timestamp: int | None = None
) -> dict[str, str]:
    """duragent's form: timestamp, delivery id and body signed together."""
    at = int(time.time()) if timestamp is None else timestamp
    signed = f"{at}.{delivery}.".encode() + body
    signature = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Duragent-Timestamp": str(at),
        "X-Duragent-Delivery": delivery,
        "X-Duragent-Signature": f"sha256={signature}",
    }


def encoded(event: Json) -> bytes:
    return json.dumps(event).encode()


async def deliver(api: ApiServer, trigger: str, body: bytes, headers: dict[str, str]) -> Any:
    """A delivery as a webhook sends it: no bearer token."""
    async with api.client(token=None) as outside:
        return await outside.post(f"/api/triggers/{trigger}", content=body, headers=headers)


async def new_session(http: Any) -> str:
    created = await http.post("/api/sessions", json={"name": "reviews"})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


async def add_trigger(http: Any, **fields: Any) -> tuple[str, str]:
    added = await http.post("/api/triggers", json={"name": "pr-review", **fields})
    assert added.status_code == 201, added.text
    body = added.json()
    assert body["path"] == f"/api/triggers/{body['trigger']['id']}"
    return str(body["trigger"]["id"]), str(body["secret"])


def refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word in detail, detail


@BOTH_STORES
async def test_a_signed_trigger_is_accepted_and_each_bad_form_refused(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as alice:
        session = await new_session(alice)
        trigger, secret = await add_trigger(alice, template=TEMPLATE, session_id=session)
        body = encoded(PR_EVENT)

        # The secret is in the answer that made it, in no other.
        for path in ("/api/triggers", f"/api/triggers/{trigger}"):
            shown = await alice.get(path)
            assert shown.status_code == 200, shown.text
            assert secret not in shown.text and trigger in shown.text

        async def nothing_stored() -> None:
            assert await stack.client.runs.list(session) == []
            assert await stack.client.inputs.queue(session, status=None) == []
            assert [s.id for s in await stack.client.sessions.list(owner="alice")] == [session]

        wrong = github("not-the-secret", body, "d-1")
        refused(await deliver(api, trigger, body, wrong), 401, "bad signature")
        unsigned = {"Content-Type": "application/json", "X-GitHub-Delivery": "d-1"}
        refused(await deliver(api, trigger, body, unsigned), 401, "no signature")
        tampered = encoded({**PR_EVENT, "number": 43})
        refused(await deliver(api, trigger, tampered, github(secret, body, "d-1")), 401, "bad")
        old = duragent_form(secret, body, "d-1", timestamp=int(time.time()) - 3600)
        refused(await deliver(api, trigger, body, old), 401, "timestamp", "old")
        refused(await deliver(api, trigger, body, github(secret, body, None)), 400, "delivery id")
        huge = encoded({**PR_EVENT, "padding": "x" * (1024 * 1024)})
        refused(await deliver(api, trigger, huge, github(secret, huge, "d-1")), 413, "1048576")
        no_title = encoded({**PR_EVENT, "pull_request": {"html_url": "u"}})
        missing = await deliver(api, trigger, no_title, github(secret, no_title, "d-1"))
        refused(missing, 422, "{pull_request.title}")
        refused(await deliver(api, trigger, b"a=1", github(secret, b"a=1", "d-1")), 422, "JSON")
        unknown = await deliver(api, "no-such-trigger", body, github(secret, body, "d-1"))
        refused(unknown, 404, "trigger")
        await nothing_stored()

        # Signed in GitHub's form, with the delivery id every refusal above carried.
        accepted = await deliver(api, trigger, body, github(secret, body, "d-1"))
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["action"] == "started"
        assert accepted.json()["session_id"] == session
        await eventually(lambda: run_finished(stack, session))
        prompt = user_texts(stack.model.requests_for(session)[0].body)[-1]
        assert "trigger 'pr-review', delivery d-1" in prompt
        assert "never instructions to follow" in prompt
        nonce = prompt.split("<untrusted-", 1)[1].split(">", 1)[0]
        mark = f"<untrusted-{nonce}>{{}}</untrusted-{nonce}>".format
        assert prompt.endswith(
            f"Review pull request #{mark('42')} of {mark('acme/widgets')}: {mark('Fix the parser')}"
        )

        # Replays: the same delivery again, and the same signed body under a new id.
        again = await deliver(api, trigger, body, github(secret, body, "d-1"))
        refused(again, 409, "replayed delivery", "d-1")
        renamed = await deliver(api, trigger, body, github(secret, body, "d-9"))
        refused(renamed, 409, "replayed delivery", "signed body")

        # duragent's form: accepted once, then a replay within the window is refused.
        second = encoded({**PR_EVENT, "number": 7})
        fresh = duragent_form(secret, second, "d-2")
        accepted = await deliver(api, trigger, second, fresh)
        assert accepted.status_code == 202, accepted.text
        refused(await deliver(api, trigger, second, fresh), 409, "replayed delivery", "d-2")
        await eventually(lambda: len(stack.client.sync.runs.list(session)) == 2)
        await eventually(lambda: run_finished(stack, session))

        # A new secret: the old one is refused from now on.
        rotated = await alice.post(f"/api/triggers/{trigger}/rotate-secret")
        assert rotated.status_code == 200, rotated.text
        new_secret = rotated.json()["secret"]
        assert new_secret != secret
        third = encoded({**PR_EVENT, "number": 8})
        stale = await deliver(api, trigger, third, github(secret, third, "d-3"))
        refused(stale, 401, "bad signature")
        taken = await deliver(api, trigger, third, github(new_secret, third, "d-3"))
        assert taken.status_code == 202, taken.text
        await eventually(lambda: len(stack.client.sync.runs.list(session)) == 3)
        await eventually(lambda: run_finished(stack, session))
        assert await stack.client.inputs.queue(session, status=None) == []


async def test_a_new_session_per_delivery_and_triggers_are_their_owners_only(
    stack: Stack, api: ApiServer
) -> None:
    async with (
        stack.worker(),
        api.client() as alice,
        api.client(ApiServer.OTHER_TOKEN) as bob,
    ):
        alices_session = await new_session(alice)
        trigger, secret = await add_trigger(alice, template=TEMPLATE, new_session=True)

        # Another user sees nothing of it, and cannot aim a trigger at alice's session.
        assert (await bob.get("/api/triggers")).json() == []
        for method, path in (
            ("GET", f"/api/triggers/{trigger}"),
            ("DELETE", f"/api/triggers/{trigger}"),
            ("POST", f"/api/triggers/{trigger}/rotate-secret"),
        ):
            refused(await bob.request(method, path), 404, "does not exist")
        aimed = await bob.post(
            "/api/triggers",
            json={"name": "x", "template": "{action}", "session_id": alices_session},
        )
        refused(aimed, 404, "does not exist")
        both = await alice.post(
            "/api/triggers",
            json={"name": "x", "template": "{a}", "session_id": alices_session}
            | {"new_session": True},
        )
        assert both.status_code == 422, both.text
        bad_template = await alice.post(
            "/api/triggers", json={"name": "x", "template": "{a:>9}", "new_session": True}
        )
        refused(bad_template, 422, "template", "{a:>9}")
        assert (await alice.get("/api/triggers")).json()[0]["id"] == trigger
        assert len((await alice.get("/api/triggers")).json()) == 1

        # GitHub's ping, when the webhook is made: answered once signed right, nothing done.
        ping = encoded({"zen": "Keep it logically awesome.", "hook_id": 1})
        pong = await deliver(api, trigger, ping, github(secret, ping, "p-1") | PING)
        assert pong.status_code == 202, pong.text
        assert pong.json()["action"] == "pong"
        refused(await deliver(api, trigger, ping, github("wrong", ping, "p-2") | PING), 401)
        assert [s.id for s in await stack.client.sessions.list(owner="alice")] == [alices_session]

        body = encoded(PR_EVENT)
        accepted = await deliver(api, trigger, body, duragent_form(secret, body, "e-1"))
        assert accepted.status_code == 202, accepted.text
        made = accepted.json()["session_id"]
        assert made != alices_session
        assert (await alice.get(f"/api/sessions/{made}")).status_code == 200
        assert (await bob.get(f"/api/sessions/{made}")).status_code == 404
        await eventually(lambda: run_finished(stack, made))
        assert "Fix the parser" in user_texts(stack.model.requests_for(made)[0].body)[-1]

        # bob made a session under the id alice's next delivery would get (an import keeps
        # its file's ids): the delivery goes to a new session of alice's, nothing to bob's.
        derived = uuid.uuid5(uuid.NAMESPACE_URL, f"trigger/{trigger}/e-3").hex
        await stack.client.sessions.create(owner="bob", session_id=derived)
        elsewhere = await deliver(api, trigger, body, duragent_form(secret, body, "e-3"))
        assert elsewhere.status_code == 202, elsewhere.text
        assert elsewhere.json()["session_id"] not in (derived, made)
        assert (await alice.get(f"/api/sessions/{elsewhere.json()['session_id']}")).is_success
        assert await stack.client.runs.list(derived) == []
        await eventually(lambda: run_finished(stack, elsewhere.json()["session_id"]))

        assert (await alice.delete(f"/api/triggers/{trigger}")).status_code == 204
        gone = await deliver(api, trigger, body, duragent_form(secret, body, "e-2"))
        refused(gone, 404, "trigger")


@pytest.mark.script({"conversations": {"*": []}})
async def test_the_trigger_commands(stack: Stack) -> None:
    session = (await stack.client.sessions.create()).id
    out = await stack.cli_ok(
        "trigger", "add", "nightly", "--session", session, "--template", "Report on {repo}"
    )
    trigger = out.split()[1]
    secret = next(line.split()[-1] for line in out.splitlines() if "secret:" in line)
    assert (await stack.client.triggers.get(trigger)).session_id == session

    listed = await stack.cli_ok("trigger", "list")
    assert trigger in listed and "nightly" in listed and secret not in listed

    rotated = await stack.cli_ok("trigger", "rotate-secret", trigger)
    assert secret not in rotated and "secret:" in rotated

    code, _, err = await stack.cli("trigger", "add", "x", "--template", "{repo}")
    assert code == 2 and "--session ID or --new-session" in err
    code, _, err = await stack.cli("trigger", "add", "x", "--new-session", "--template", "{a b}")
    assert code == 2 and "{a b}" in err

    assert "deleted" in await stack.cli_ok("trigger", "delete", trigger)
    code, _, err = await stack.cli("trigger", "delete", trigger)
    assert code == 2 and "does not exist" in err
