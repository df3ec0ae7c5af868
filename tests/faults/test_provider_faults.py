"""The model misbehaves: rate limits, overload, server errors, a stream cut off, a response
that never comes. Each failure is retried inside the run, visibly, and the run finishes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from checks import assert_session_sound, events_of, expect, model_requests
from support import Stack, transcript_roles

from duragent.domain.runs import RunOptions
from duragent.offline_model import Script
from duragent.worker import build_worker

LONG = "Part of an answer that never arrives whole. " * 10
RECOVERED = {"reply": [{"text": "Recovered."}]}
SHORT_READ_TIMEOUT = 2.0

# name: (the failing step, what its retry_scheduled error says, the delay it asks for)
FAILURES: dict[str, tuple[dict[str, Any], str, int | None]] = {
    "429-retry-after": (
        {"error": {"status": 429, "retry_after": 1}},
        "429 rate_limit_error",
        1000,
    ),
    "529-overloaded": ({"error": {"status": 529}}, "529 overloaded_error", None),
    "500-server-error": ({"error": {"status": 500}}, "500 api_error", None),
    "stream-cut": (
        {"chunk_delay_ms": 20, "cut_after_chunks": 3, "reply": [{"text": LONG}]},
        "stream interrupted: Response payload is not completed",
        None,
    ),
}
# name: (the hung step, what its retry_scheduled error says)
HUNG: dict[str, tuple[dict[str, Any], str]] = {
    "hang-before-headers": ({"hang": True}, "model request timed out"),
    "stall-mid-stream": (
        {"stall_after_chunks": 3, "reply": [{"text": LONG}]},
        "stream interrupted",
    ),
}


def options(stack: Stack) -> RunOptions:
    # Quick backoff: the point is that retries happen, not how long they wait.
    return stack.client.runs.default_options().model_copy(update={"provider_backoff_s": 0.2})


async def prompt_and_finish(stack: Stack, session_id: str) -> None:
    run = await stack.client.runs.prompt(session_id, "answer", options=options(stack))
    result = await asyncio.wait_for(run.result(), timeout=25)
    assert result.status == "completed", result.error
    assert result.final_text == "Recovered."


def assert_recovered(stack: Stack, session_id: str, failures: int) -> list[dict[str, Any]]:
    """The run retried `failures` times on turn 1 and stored one clean reply; returns the
    retry_scheduled events."""
    path = assert_session_sound(stack, session_id)
    assert transcript_roles(path) == ["user", "assistant"]
    assert LONG[:40] not in str([e.model_dump() for e in path])
    retries = events_of(stack, session_id, "retry_scheduled")
    assert [(r["turn"], r["attempt"]) for r in retries] == [(1, a) for a in range(1, failures + 1)]
    phases = [p["phase"] for p in events_of(stack, session_id, "phase_changed")]
    assert phases == ["retry", "turn"] * failures
    requests = model_requests(stack, session_id)
    assert len(requests) == failures + 1
    assert all(r.body["messages"] == requests[0].body["messages"] for r in requests)
    return retries


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_provider_failure_is_retried(stack_factory: Any, failure: str) -> None:
    step, error, delay_ms = FAILURES[failure]
    async with stack_factory(Script.of([step, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker():
            await prompt_and_finish(stack, session.id)
        (retry,) = assert_recovered(stack, session.id, failures=1)
        assert retry["error"].startswith(error), retry["error"]
        if delay_ms is not None:
            assert retry["delay_ms"] == delay_ms  # the server's retry-after, honoured
        else:
            assert retry["delay_ms"] == 200


async def test_failures_in_a_row_each_back_off_and_count(stack_factory: Any) -> None:
    steps = [step for step, _, _ in FAILURES.values()]
    async with stack_factory(Script.of([*steps, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker():
            await prompt_and_finish(stack, session.id)
        retries = assert_recovered(stack, session.id, failures=len(steps))
        assert [r["delay_ms"] for r in retries] == [1000, 400, 800, 1600]


@pytest.mark.parametrize("hung", list(HUNG))
async def test_a_hung_model_response_times_out_and_is_retried(
    stack_factory: Any, hung: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    step, error = HUNG[hung]
    async with stack_factory(Script.of([step, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        if hung == "hang-before-headers":
            # A worker process configured from its environment...
            monkeypatch.setenv("DURAGENT_MODEL_READ_TIMEOUT", str(SHORT_READ_TIMEOUT))
            worker = stack.spawn_worker()
            await prompt_and_finish(stack, session.id)
            stack.kill(worker)
        else:
            # ...and one built in code.
            settings = stack.settings.model_copy(
                update={"model_read_timeout_s": SHORT_READ_TIMEOUT}
            )
            async with build_worker(stack.temporal, stack.db, settings):
                await prompt_and_finish(stack, session.id)
        (retry,) = assert_recovered(stack, session.id, failures=1)
        assert retry["error"].startswith(error), retry["error"]
        # The hung request was given up after the read timeout, not after a heartbeat
        # timeout or the model's own stop.
        first, second = model_requests(stack, session.id)
        waited = second.received_at - first.received_at
        assert SHORT_READ_TIMEOUT <= waited < SHORT_READ_TIMEOUT + 2.5, waited


async def test_a_stalled_stream_names_the_read_timeout(stack_factory: Any) -> None:
    step, _ = HUNG["stall-mid-stream"]
    async with stack_factory(Script.of([step, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        settings = stack.settings.model_copy(update={"model_read_timeout_s": SHORT_READ_TIMEOUT})
        async with build_worker(stack.temporal, stack.db, settings):
            await prompt_and_finish(stack, session.id)
        (retry,) = events_of(stack, session.id, "retry_scheduled")
        expect("timeout" in retry["error"].lower(), f"retry error: {retry['error']!r}")


async def test_should_retry_true_retries_a_status_that_is_not_retried(
    stack_factory: Any,
) -> None:
    # A 403 is not retried (it will not get better) unless the API says otherwise.
    told_to_retry: dict[str, Any] = {
        "error": {"status": 403, "message": "try again", "should_retry": True}
    }
    async with stack_factory(Script.of([told_to_retry, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker():
            await prompt_and_finish(stack, session.id)
        (retry,) = assert_recovered(stack, session.id, failures=1)
        assert retry["error"].startswith("403 permission_error: try again"), retry["error"]


async def test_should_retry_false_stops_a_status_that_is_retried(stack_factory: Any) -> None:
    told_not_to: dict[str, Any] = {"error": {"status": 529, "should_retry": False}}
    async with stack_factory(Script.of([told_not_to, RECOVERED])) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker():
            run = await stack.client.runs.prompt(session.id, "answer", options=options(stack))
            result = await asyncio.wait_for(run.result(), timeout=25)
        assert result.status == "error"
        assert result.error is not None and "529 overloaded_error" in result.error
        assert events_of(stack, session.id, "retry_scheduled") == []
        assert len(model_requests(stack, session.id)) == 1
        assert_session_sound(stack, session.id, status="error")
