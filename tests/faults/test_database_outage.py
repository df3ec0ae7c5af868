"""PostgreSQL going away mid-run: the API says so (503 with a reason, not a 500), the run
waits for the database and goes on once it is back, and nothing is lost or doubled."""

from __future__ import annotations

from pathlib import Path

from checks import assert_session_sound, wait_for_event, worker_log
from postgres_server import PostgresServer, new_database
from support import ApiServer, eventually, open_stack, transcript_roles
from temporalio.client import Client

from duragent.temporal_dev import DevServer

SCRIPT = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"tool_use": {"name": "ls", "input": {}}}]},
            {"reply": [{"text": "Listed."}]},
        ]
    }
}


async def test_postgres_down_mid_run_gives_503_and_the_run_goes_on(
    own_postgres: PostgresServer, tmp_path: Path, temporal: Client, dev_server: DevServer
) -> None:
    server = own_postgres.start()
    try:
        url = new_database(server.url)
        async with open_stack(tmp_path, temporal, dev_server.address, SCRIPT, url) as stack:
            api = ApiServer(stack)
            await api.start()
            try:
                async with api.client() as http:
                    created = await http.post("/api/sessions", json={"name": "outage"})
                    session = created.json()["session"]["id"]
                    worker = stack.spawn_worker()
                    sent = await http.post(f"/api/sessions/{session}/input", json={"text": "ls"})
                    assert sent.json()["action"] == "started", sent.text
                    await eventually(lambda: len(stack.model.requests_for(session)) == 1)

                    server.halt()
                    # The reply is finished while the database is down: staging it waits.
                    stack.model.release("go")
                    listed = await http.get("/api/sessions")
                    assert listed.status_code == 503, listed.text
                    detail = listed.json()["detail"]
                    assert "database is unreachable" in detail and "nothing was lost" in detail
                    assert "postgresql" not in detail.lower()  # no server address or driver
                    assert listed.headers["retry-after"] == "5"
                    # Back once the worker has failed to stage the reply and backs off.
                    await eventually(lambda: "store unavailable" in worker_log(stack), timeout=60)
                    server.resume()

                    await eventually(
                        lambda: stack.client.sync.runs.list(session)[0].status != "running",
                        timeout=90,
                    )
                    assert (await http.get("/api/sessions")).status_code == 200
                    await wait_for_event(stack, session, "agent_end")
                stack.kill(worker)
            finally:
                await api.stop()
            path = assert_session_sound(stack, session)
            assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
            # The model was asked once per turn: the finished reply was kept, not asked again.
            assert len(stack.model.requests_for(session)) == 2
    finally:
        server.stop()


async def test_a_worker_started_while_postgres_is_down_waits_for_it(
    own_postgres: PostgresServer, tmp_path: Path, temporal: Client, dev_server: DevServer
) -> None:
    """Started during the outage (a machine that boots before its database, a restart),
    the worker says what it waits for, then works once the database is back."""
    server = own_postgres.start()
    try:
        url = new_database(server.url)
        async with open_stack(tmp_path, temporal, dev_server.address, SCRIPT, url) as stack:
            session = await stack.client.sessions.create()
            server.halt()
            worker = stack.spawn_worker()
            where = f"the database at 127.0.0.1:{server.port}"
            await eventually(lambda: f"{where} is not reachable" in worker_log(stack), timeout=60)
            server.resume()
            await eventually(lambda: f"{where} is up" in worker_log(stack), timeout=60)
            stack.model.release("go")
            result = await (await stack.client.runs.prompt(session.id, "ls")).result()
            assert result.status == "completed", result.error
            assert worker.poll() is None and "Traceback" not in worker_log(stack)
            stack.kill(worker)
            assert transcript_roles(assert_session_sound(stack, session.id)) == [
                "user",
                "assistant",
                "toolResult",
                "assistant",
            ]
    finally:
        server.stop()
