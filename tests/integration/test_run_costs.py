"""What runs cost, as `duragent status`, `show`, `history` and the API's `/state` show it:
the figures the offline model's reported usage implies under the bundled price table."""

from __future__ import annotations

import json

import pytest
from support import BOTH_STORES, ApiServer, Stack

from duragent.activities.prices import bundled_prices
from duragent.domain.cost import cache_hit_rate, cost_text, usage_cost
from duragent.domain.messages import Usage

HAIKU = "claude-haiku-4-5"
SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [{"text": "Checking."}, {"tool_use": {"name": "ls", "input": {}}}],
                "usage": {
                    "input_tokens": 1000,
                    "output_tokens": 200,
                    "cache_read_input_tokens": 3000,
                    "cache_creation_input_tokens": 600,
                },
            },
            {
                "reply": [{"text": "Done."}],
                "usage": {
                    "input_tokens": 100,
                    "output_tokens": 50,
                    "cache_read_input_tokens": 4000,
                },
            },
            {
                "reply": [{"text": "Cheaper now."}],
                "usage": {"input_tokens": 2000, "output_tokens": 100},
            },
            {"reply": [{"text": "Who prices me?"}]},
        ]
    }
}


@BOTH_STORES
@pytest.mark.script(SCRIPT)
async def test_status_show_history_and_state_show_what_runs_cost(
    stack: Stack, api: ApiServer
) -> None:
    prices = bundled_prices()
    async with api.client() as http:
        session = (await http.post("/api/sessions", json={"name": "costs"})).json()["session"]
        session_id = session["id"]
        async with stack.worker():
            first = await (await stack.client.runs.prompt(session_id, "go")).result()
            # Read once between the runs: the second read adds only what came after it.
            between = (await http.get(f"/api/sessions/{session_id}/state")).json()
            await stack.client.config.set_model(session_id, HAIKU)
            second = await (await stack.client.runs.prompt(session_id, "again")).result()
        assert (first.status, second.status) == ("completed", "completed")
        runs = {run.run_id: run for run in await stack.client.runs.list(session_id)}
        one, two = runs[first.run_id], runs[second.run_id]
        # What the runs recorded (the offline model reported the scripted usage)...
        assert one.usage == Usage(
            input_tokens=1100, output_tokens=250, cache_read_tokens=7000, cache_write_tokens=600
        )
        assert two.usage == Usage(input_tokens=2000, output_tokens=100)
        # ...priced by the table: the first run on the default model, the second on Haiku.
        default = prices.price_of(stack.settings.model)
        haiku = prices.price_of(HAIKU)
        assert default is not None and haiku is not None
        one_usd, two_usd = usage_cost(one.usage, default), usage_cost(two.usage, haiku)
        total_usd = one_usd + two_usd
        assert one_usd > 0 and two_usd > 0
        one_rate = cache_hit_rate(one.usage)
        total_rate = cache_hit_rate(one.usage.plus(two.usage))
        assert one_rate is not None and total_rate is not None

        assert between["session_cost"]["cost_usd"] == pytest.approx(one_usd)
        assert between["run"]["cost"] == between["session_cost"]
        state = (await http.get(f"/api/sessions/{session_id}/state")).json()
        assert state["run"]["latest"]["run_id"] == second.run_id
        assert state["run"]["cost"]["cost_usd"] == pytest.approx(two_usd)
        assert state["session_cost"]["cost_usd"] == pytest.approx(total_usd)
        assert state["session_cost"]["cache_hit_rate"] == pytest.approx(total_rate)
        assert state["session_cost"]["unpriced_models"] == []
        assert [(m["model"], m["calls"]) for m in state["session_cost"]["by_model"]] == [
            (HAIKU, 1),
            (stack.settings.model, 2),
        ]
        assistant = [m for m in state["messages"] if m["role"] == "assistant"]
        assert [m["turn_cost"]["model"] for m in assistant] == [stack.settings.model] * 2 + [HAIKU]
        assert sum(m["turn_cost"]["cost_usd"] for m in assistant) == pytest.approx(total_usd)
        assert all(m["turn_cost"] is None for m in state["messages"] if m["role"] != "assistant")

    status = await stack.cli_ok("status", session_id)
    assert f"run {second.run_id} cost {cost_text(two_usd)}" in status
    assert f"session cost {cost_text(total_usd)}" in status
    assert f"{total_rate:.0%} cache hits" in status
    assert f"prices of {prices.as_of.isoformat()}" in status
    as_json = json.loads(await stack.cli_ok("status", session_id, "--json"))
    assert as_json["cost"]["session"]["cost_usd"] == pytest.approx(total_usd)
    assert as_json["cost"]["run"]["cost_usd"] == pytest.approx(two_usd)

    shown = await stack.cli_ok("show", session_id)
    run_rows = {line.split()[0]: line for line in shown.splitlines() if line[:32] in runs}
    assert cost_text(one_usd) in run_rows[first.run_id]
    assert cost_text(two_usd) in run_rows[second.run_id]
    assert f"session cost {cost_text(total_usd)}" in shown
    assert f"{HAIKU} · 2,000 in / 100 out tokens · {cost_text(two_usd)}" in shown
    assert "1,000 in / 200 out / 3,000 cache read / 600 cache write tokens" in shown

    history = await stack.cli_ok("history", session_id)
    # The runs' ends (the model change between them is an execution of its own).
    ended = [line for line in history.splitlines() if "run ended" in line and "turn(s)" in line]
    assert len(ended) == 2
    assert f"({one_rate:.0%} cache hits), {cost_text(one_usd)} in all" in ended[0]
    assert f"{cost_text(two_usd)} in all" in ended[1]
    calls = [line for line in history.splitlines() if f"{HAIKU}: stop" in line]
    assert len(calls) == 1 and cost_text(two_usd) in calls[0]


@pytest.mark.script(SCRIPT)
async def test_a_model_without_a_price_is_cost_unknown_and_named(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        created = await http.post("/api/sessions", json={"name": "n", "model": "house-model-1"})
        session_id = created.json()["session"]["id"]
        async with stack.worker():
            result = await (await stack.client.runs.prompt(session_id, "go")).result()
        assert result.status == "completed"
        state = (await http.get(f"/api/sessions/{session_id}/state")).json()
    assert state["run"]["cost"]["cost_usd"] is None
    assert state["session_cost"]["unpriced_models"] == ["house-model-1"]
    assistant = [m for m in state["messages"] if m["role"] == "assistant"]
    assert assistant and all(m["turn_cost"]["cost_usd"] is None for m in assistant)
    status = await stack.cli_ok("status", session_id)
    assert "cost unknown (no price for model house-model-1)" in status
    shown = await stack.cli_ok("show", session_id)
    assert "house-model-1 · 1,000 in / 200 out" in shown
    assert "cost unknown (no price for model house-model-1)" in shown


@pytest.mark.script(SCRIPT)
async def test_run_closes_with_what_the_run_cost(stack: Stack) -> None:
    """`duragent run`'s last line gives the run's cost and cache hit rate, as `status`."""
    prices = bundled_prices()
    session = await stack.client.sessions.create()
    async with stack.worker():
        ran = await stack.cli_ok("run", "--session", session.id, "go")
    [run] = await stack.client.runs.list(session.id)
    price = prices.price_of(stack.settings.model)
    assert price is not None
    cost = usage_cost(run.usage, price)
    rate = cache_hit_rate(run.usage)
    [closing] = [line for line in ran.splitlines() if line.startswith("run completed")]
    assert closing == (
        f"run completed after 2 turn(s), {cost_text(cost)} "
        f"({run.usage.total_tokens:,} tokens, {rate:.0%} cache hits)"
    )
