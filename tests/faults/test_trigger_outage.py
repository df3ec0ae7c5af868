"""A trigger delivery in new-session mode that fails midway (the Temporal server is down,
so its run cannot start) is refused with a 503 that says so and leaves no session behind
(neither in the owner's list nor as a workspace folder); the sender's retry of the same
delivery makes its session and runs there, and a retry after a run did start finds that
run: no empty session, and no second run."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from sqlalchemy import text
from support import ApiServer, eventually, run_finished, user_texts
from test_temporal_restart import private_stack

from duragent.domain.trigger_signatures import DeliveryReplayed, sign_github

SCRIPT: dict[str, object] = {"conversations": {"*": [{"reply": [{"text": "Reviewed."}]}]}}


async def test_a_delivery_refused_in_an_outage_runs_in_its_session_when_resent(
    tmp_path: Path,
) -> None:
    async with private_stack(tmp_path, SCRIPT) as (stack, outage):
        api = ApiServer(stack)
        await api.start()
        made = await stack.client.triggers.add("pr-review", "Review {pull_request.title}")
        trigger = made.trigger.id
        body = json.dumps({"pull_request": {"title": "Fix the parser"}}).encode()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": sign_github(made.secret, body),
        }
        try:
            async with api.client(token=None) as sender:
                await outage.begin("stop")
                refused = await sender.post(
                    f"/api/triggers/{trigger}", content=body, headers=headers
                )
                assert refused.status_code == 503, refused.text
                assert "Temporal server cannot be reached" in refused.json()["detail"]
                assert refused.headers["Retry-After"] == "5"
                async with api.client(ApiServer.OPERATOR_TOKEN) as operator:
                    listed = await operator.get("/api/sessions")
                assert listed.status_code == 200 and listed.json() == [], listed.text
                assert _folders(stack.settings.workspaces) == []
                await outage.end()

                worker = stack.spawn_worker()
                resent = await sender.post(
                    f"/api/triggers/{trigger}", content=body, headers=headers
                )
                assert resent.status_code == 202, resent.text
                delivered = resent.json()
                [kept] = await stack.client.sessions.list()
                assert kept.name == "pr-review: d-1"
                assert (delivered["action"], delivered["session_id"]) == ("started", kept.id)
                replayed = await sender.post(
                    f"/api/triggers/{trigger}", content=body, headers=headers
                )
                assert replayed.status_code == 409, replayed.text
        finally:
            await api.stop()
        try:
            await eventually(partial(run_finished, stack, kept.id), timeout=30)
            # Resent once more after an attempt that started the run failed before it
            # could tell (its delivery remembered, not marked delivered): the run it
            # started is the delivery's, not a new one; once told, a resend is a replay.
            with stack.db.transaction() as db:
                db.execute(
                    text(
                        "UPDATE trigger_deliveries SET delivered = false "
                        "WHERE trigger_id = :t AND delivery_id = 'd-1'"
                    ),
                    {"t": trigger},
                )
            lowered = {name.lower(): value for name, value in headers.items()}
            again = await stack.client.triggers.receive(trigger, lowered, body)
            assert (again.session_id, again.run_id) == (kept.id, delivered["run_id"])
            with pytest.raises(DeliveryReplayed):
                await stack.client.triggers.receive(trigger, lowered, body)
        finally:
            stack.kill(worker)
        assert [s.id for s in await stack.client.sessions.list()] == [kept.id]
        assert [r.run_id for r in await stack.client.runs.list(kept.id)] == [delivered["run_id"]]
        [request] = stack.model.requests_for(kept.id)
        assert "Fix the parser" in user_texts(request.body)[-1]


def _folders(root: Path) -> list[Path]:
    """The session workspace folders under `root` (none before the first is made)."""
    return sorted(root.iterdir()) if root.exists() else []
