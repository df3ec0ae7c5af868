"""Record workflow histories of representative runs, for the replay test.

    python tests/histories/record.py            # re-record every scenario
    python tests/histories/record.py tools      # just one

Starts its own dev server, offline model and worker. Re-record after a deliberate
workflow change only when the old histories no longer matter; otherwise guard the
change with `workflow.patched()` and keep the old files: they prove old runs replay.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent)]

from duragent.client.agent import Agent  # noqa: E402
from duragent.client.agent_session import AgentSession  # noqa: E402
from duragent.client.connection import connect_temporal  # noqa: E402
from duragent.activities.tools import ToolContext, tool  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from duragent.domain.compaction import CompactionSettings  # noqa: E402
from duragent.settings import Settings  # noqa: E402
from support import Stack, open_stack  # noqa: E402
from temporalio.client import Client  # noqa: E402
from duragent.temporal_dev import DevServer  # noqa: E402


@dataclass
class Scenario:
    name: str
    script: dict[str, Any]
    drive: Callable[[Stack, str], Awaitable[None]]
    host: str | None = None
    """The session's host (None: the worker's, recorded by its first run)."""
    agent: Agent[Any, Any] | None = None
    """The agent the session is made from (the worker serves it)."""


async def prompt_and_wait(stack: Stack, session_id: str) -> None:
    handle = await stack.client.runs.prompt(session_id, "Make two files and check them.")
    await handle.result()


async def steer_mid_run(stack: Stack, session_id: str) -> None:
    run = await stack.client.runs.prompt(session_id, "Answer, then take my note.")
    while len(stack.model.requests_for(session_id)) < 1:
        await asyncio.sleep(0.02)
    await stack.client.inputs.steer(session_id, "Also mention the tests.")
    await stack.client.inputs.follow_up(session_id, "Then summarise.")
    await stack.client.config.set_model(session_id, "claude-other")
    stack.model.release("go")
    await run.result()


async def abort_mid_tool(stack: Stack, session_id: str) -> None:
    await stack.client.runs.prompt(session_id, "Run the long job.")
    while not any(
        [
            e
            async for e in stack.client.events.stream(session_id, follow=False)
            if e.type == "tool_execution_start"
        ]
    ):
        await asyncio.sleep(0.02)
    await stack.client.runs.abort(session_id)


async def guide_mid_tool(stack: Stack, session_id: str) -> None:
    run = await stack.client.runs.prompt(session_id, "Build it.")
    while len(stack.model.requests_for(session_id)) < 1:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    item = await stack.client.inputs.next_turn(session_id, "Stop, use the cached build instead.")
    await stack.client.inputs.guide(session_id, item.id)
    await run.result()


async def auto_compaction_and_continue_as_new(stack: Stack, session_id: str) -> None:
    part = Path((await stack.client.sessions.get(session_id)).workspace) / "part.txt"
    part.write_text("0123456789 " * 400)
    options = stack.client.runs.default_options().model_copy(
        update={
            "continue_as_new_after_turns": 3,
            "compaction": CompactionSettings(
                context_window=4500, reserve_tokens=0, keep_recent_tokens=1200
            ),
        }
    )
    run = await stack.client.runs.prompt(session_id, "Read it, many times.", options=options)
    await run.result()


async def manual_compaction(stack: Stack, session_id: str) -> None:
    part = Path((await stack.client.sessions.get(session_id)).workspace) / "part.txt"
    part.write_text("0123456789 " * 400)
    await (await stack.client.runs.prompt(session_id, "Read it twice.")).result()
    await stack.client.tree.compact(session_id, settings=CompactionSettings(keep_recent_tokens=500))


async def approve_and_deny(stack: Stack, session_id: str) -> None:
    from duragent.domain.approvals import ApprovalPolicy, ApprovalRule

    allow_ls = ApprovalRule(tool="bash", command="ls *", action="allow")
    policy = ApprovalPolicy(rules=(allow_ls,), default="ask")
    await stack.client.approvals.set_policy(session_id, policy)
    run = await stack.client.runs.prompt(session_id, "Write a and b, and look.")
    while len(await stack.client.approvals.pending(session_id)) < 2:
        await asyncio.sleep(0.02)
    await stack.client.approvals.approve(session_id, "call_a", always=True)
    await stack.client.approvals.deny(session_id, "call_b", "not b")
    await run.result()


async def ask_and_answer(stack: Stack, session_id: str) -> None:
    """Two `ask_user` questions in one batch with a call that runs meanwhile: both wait
    (phase `awaiting_input`), then are answered, one with a choice."""
    await stack.client.config.set_active_tools(session_id, ["ls", "ask_user"])
    run = await stack.client.runs.prompt(session_id, "Set up the service.")
    while len(await stack.client.questions.pending(session_id)) < 2:
        await asyncio.sleep(0.02)
    await stack.client.questions.answer(session_id, "call_q1", "PostgreSQL")
    await stack.client.questions.answer(session_id, "call_q2", "8080")
    await run.result()


async def budget_wait_raise_stop(stack: Stack, session_id: str) -> None:
    """A session budget (so its spend is read), a run budget that asks: it waits, is
    raised, and then stops the run at the raised limit."""
    from duragent.domain.budgets import Budget

    await stack.client.budgets.set(session_id, Budget(max_tokens=1_000_000))
    budget = Budget(max_turns=1, on_exceed="ask")
    run = await stack.client.runs.prompt(session_id, "Three steps.", budget=budget)
    while not (await stack.client.budgets.get(session_id)).waiting:
        await asyncio.sleep(0.02)
    await stack.client.budgets.raise_limits(session_id, Budget(max_turns=2))
    await run.result()


async def compaction_reaches_the_budget(stack: Stack, session_id: str) -> None:
    """A run compacts itself, and its summary's tokens reach the run's token budget."""
    from duragent.domain.budgets import Budget

    part = Path((await stack.client.sessions.get(session_id)).workspace) / "part.txt"
    part.write_text("0123456789 " * 400)
    options = stack.client.runs.default_options().model_copy(
        update={
            "compaction": CompactionSettings(
                context_window=4500, reserve_tokens=0, keep_recent_tokens=1200
            ),
        }
    )
    budget = Budget(max_tokens=200_000)
    run = await stack.client.runs.prompt(
        session_id, "Read it, many times.", options=options, budget=budget
    )
    await run.result()


def bash(command: str, call_id: str) -> dict[str, Any]:
    return {"tool_use": {"id": call_id, "name": "bash", "input": {"command": command}}}


def ask(question: str, call_id: str, **more: Any) -> dict[str, Any]:
    return {
        "tool_use": {"id": call_id, "name": "ask_user", "input": {"question": question, **more}}
    }


async def delegate_and_wait(stack: Stack, session_id: str) -> None:
    """The parent hands the work to a sub-agent, which runs a tool and answers."""
    delegate = {"name": "delegate", "input": {"prompt": "Child: list the files", "name": "lister"}}
    steps = [
        {"reply": [{"tool_use": delegate}]},
        {"reply": [{"text": "The sub-agent listed them."}]},
    ]
    stack.model.add_steps(session_id, steps, replace=True)  # the "*" steps are the child's
    await (await stack.client.runs.prompt(session_id, "Have a sub-agent list the files.")).result()


def host_options(stack: Stack, wait_s: float) -> Any:
    return stack.client.runs.default_options().model_copy(
        update={"host_check_s": 1.0, "host_wait_s": wait_s}
    )


async def wait_for_host_then_start_it(stack: Stack, session_id: str) -> None:
    """The session's host has no worker when the run starts: the run waits for it, then
    goes on once a worker of that host is up."""
    from processes import WORKER_ARGS, spawn_python

    run = await stack.client.runs.prompt(
        session_id, "Make two files.", options=host_options(stack, 60)
    )
    while not any(
        [
            e
            async for e in stack.client.events.stream(session_id, follow=False)
            if e.type == "host_waiting"
        ]
    ):
        await asyncio.sleep(0.02)
    process = spawn_python(WORKER_ARGS, {**stack.env(), "DURAGENT_HOST": "later-host"})
    stack.processes.append(process)
    await run.result()


async def host_never_back(stack: Stack, session_id: str) -> None:
    run = await stack.client.runs.prompt(session_id, "Make a file.", options=host_options(stack, 2))
    await run.result()


async def run_then_move(stack: Stack, session_id: str) -> None:
    await prompt_and_wait(stack, session_id)
    moved = stack.settings.home / "moved"
    await stack.client.hosts.move(session_id, stack.settings.host, workspace=moved)


READ_PART = {"reply": [{"tool_use": {"name": "read", "input": {"path": "part.txt"}}}]}
SUMMARIES = [
    {"match": "You are compacting", "repeat": True, "reply": [{"text": "## Goal\nRead."}]},
    {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Reading."}]},
]


async def scheduled_firing(stack: Stack, session_id: str) -> None:
    """A schedule fired (triggered) into the idle session: its run is recorded as the
    scenario's, and the firing's own `ScheduledPrompt` as scheduled_prompt.json."""
    made = await stack.client.schedules.add(
        session_id, "Report the status.", every="1h", paused=True
    )
    try:
        await stack.client.schedules.trigger(made.id)
        while not (view := await stack.client.schedules.get(made.id, outcomes=True)).recent or not (
            view.recent[0].outcome
        ):
            await asyncio.sleep(0.05)
        await stack.client.runs.wait(session_id)
        firing = stack.temporal.get_workflow_handle(view.recent[0].workflow_id)
        target = HERE / "scheduled_prompt.json"
        target.write_text((await firing.fetch_history()).to_json())
        print(f"recorded {target.name}")
    finally:
        await stack.client.schedules.delete(made.id)


async def queue_while_busy(stack: Stack, session_id: str) -> None:
    """Input sent while the run is open (a chat box's, and a steer the run never reaches
    before its turn limit): the run's end starts the next run, which takes it."""
    first = await stack.client.runs.prompt(session_id, "Start on it.", max_turns=1)
    while len(stack.model.requests_for(session_id)) < 1:
        await asyncio.sleep(0.02)
    await stack.client.inputs.send(session_id, "And then this.")
    await stack.client.inputs.steer(session_id, "Steered too late.")
    stack.model.release("go")
    await first.result()
    while len(await stack.client.runs.list(session_id)) < 2:
        await asyncio.sleep(0.02)
    await stack.client.runs.wait(session_id)


SCENARIOS = [
    Scenario(
        "tools",
        {
            "conversations": {
                "*": [
                    {"reply": [{"text": "Looking."}, {"tool_use": {"name": "ls", "input": {}}}]},
                    {
                        "reply": [
                            {
                                "tool_use": {
                                    "name": "write",
                                    "input": {"path": "a.txt", "content": "a"},
                                }
                            },
                            {"tool_use": {"name": "bash", "input": {"command": "echo b > b.txt"}}},
                        ]
                    },
                    {"reply": [{"text": "Done."}]},
                ]
            }
        },
        prompt_and_wait,
    ),
    Scenario(
        "provider_retry",
        {
            "conversations": {
                "*": [
                    {"error": {"status": 529, "message": "Overloaded", "retry_after": 0.1}},
                    {"error": {"status": 400, "message": "bad on purpose"}},
                ]
            }
        },
        prompt_and_wait,
    ),
    Scenario(
        "steer",
        {
            "conversations": {
                "*": [
                    {"wait_for": "go", "reply": [{"tool_use": {"name": "ls", "input": {}}}]},
                    {"reply": [{"text": "Noted, tests too."}]},
                    {"reply": [{"text": "Summary."}]},
                ]
            }
        },
        steer_mid_run,
    ),
    Scenario(
        "abort",
        {
            "conversations": {
                "*": [
                    {
                        "reply": [
                            {"tool_use": {"name": "write", "input": {"path": "a", "content": "a"}}},
                            {"tool_use": {"name": "bash", "input": {"command": "sleep 60"}}},
                        ]
                    }
                ]
            }
        },
        abort_mid_tool,
    ),
    Scenario(
        "guidance",
        {
            "conversations": {
                "*": [
                    {"reply": [{"tool_use": {"name": "bash", "input": {"command": "sleep 30"}}}]},
                    {"reply": [{"text": "Using the cached build."}]},
                ]
            }
        },
        guide_mid_tool,
    ),
    Scenario(
        "continue_as_new",
        {"conversations": {"*": [*SUMMARIES, *[READ_PART] * 7, {"reply": [{"text": "Done."}]}]}},
        auto_compaction_and_continue_as_new,
    ),
    Scenario(
        "subagent",
        {
            "conversations": {
                "*": [
                    {"match": "^Child", "reply": [{"tool_use": {"name": "ls", "input": {}}}]},
                    {"reply": [{"text": "Two files."}]},
                ]
            }
        },
        delegate_and_wait,
    ),
    Scenario(
        "compaction",
        {"conversations": {"*": [*SUMMARIES, READ_PART, READ_PART, {"reply": [{"text": "ok"}]}]}},
        manual_compaction,
    ),
    Scenario(
        "approval",
        {
            "conversations": {
                "*": [
                    {
                        "reply": [
                            bash("touch a.txt", "call_a"),
                            bash("echo b > b.txt", "call_b"),
                            bash("ls -la", "call_ls"),
                        ]
                    },
                    {"reply": [bash("touch a.txt", "call_a_again")]},
                    {"reply": [{"text": "Done."}]},
                ]
            }
        },
        approve_and_deny,
    ),
    Scenario(
        "ask_user",
        {
            "conversations": {
                "*": [
                    {
                        "reply": [
                            ask("Which database?", "call_q1", choices=["SQLite", "PostgreSQL"]),
                            ask("Which port?", "call_q2"),
                            {"tool_use": {"id": "call_ls", "name": "ls", "input": {}}},
                        ]
                    },
                    {"reply": [{"text": "Done."}]},
                ]
            }
        },
        ask_and_answer,
    ),
    Scenario(
        "host_wait",
        {
            "conversations": {
                "*": [{"reply": [bash("echo a > a.txt", "call_a")]}, {"reply": [{"text": "Done."}]}]
            }
        },
        wait_for_host_then_start_it,
        host="later-host",
    ),
    Scenario(
        "host_gone",
        {"conversations": {"*": [{"reply": [bash("echo a > a.txt", "call_a")]}]}},
        host_never_back,
        host="gone-host",
    ),
    Scenario(
        "move",
        {
            "conversations": {
                "*": [{"reply": [bash("echo a > a.txt", "call_a")]}, {"reply": [{"text": "Done."}]}]
            }
        },
        run_then_move,
    ),
    Scenario(
        "budget",
        {
            "conversations": {
                "*": [
                    {"reply": [bash("echo 1", "call_1")]},
                    {"reply": [bash("echo 2", "call_2")]},
                    {"reply": [bash("echo 3", "call_3")]},
                    {"reply": [{"text": "Done."}]},
                ]
            }
        },
        budget_wait_raise_stop,
    ),
    Scenario(
        "summary_budget",
        {
            "conversations": {
                "*": [
                    {**SUMMARIES[0], "usage": {"input_tokens": 300_000, "output_tokens": 100}},
                    SUMMARIES[1],
                    *[READ_PART] * 7,
                    {"reply": [{"text": "Done."}]},
                ]
            }
        },
        compaction_reaches_the_budget,
    ),
]

# Recorded again once a turn was one activity (the `turn-one-activity` patch): tool calls
# run inside the turn's activity, guidance and abort reach them there, approvals still
# cut the turn short, and a host that does not take a turn in time gets the old shape.
ONE_ACTIVITY = ("tools", "guidance", "abort", "approval", "host_wait", "steer")
SCENARIOS.append(
    Scenario(
        "queued",
        {
            "conversations": {
                "*": [
                    {"wait_for": "go", "reply": [{"text": "Started."}]},
                    {"reply": [{"text": "Did that too."}]},
                ]
            }
        },
        queue_while_busy,
    )
)
SCENARIOS.append(
    Scenario(
        "scheduled",
        {"conversations": {"*": [{"reply": [{"text": "All green."}]}]}},
        scheduled_firing,
    )
)


class Verdict(BaseModel):
    passed: bool
    note: str


@tool(retry_safe=True)
def check(ctx: ToolContext[dict[str, str]], what: str) -> str:
    """Check something against the run's deps."""
    return f"{what}: ok on {ctx.deps['branch']}"


REVIEWER = Agent(
    "reviewer", tools=[check], output_type=Verdict, deps_type=dict[str, str], output_retries=2
)


async def agent_run_with_deps(stack: Stack, session_id: str) -> None:
    session = await AgentSession.open(REVIEWER, stack.client, session_id)
    result = await session.run("Review it.", deps={"branch": "main"})
    assert result.output == Verdict(passed=True, note="Tests pass on main.")


def output_call(**fields: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": "final_result_reviewer", "input": fields}}]}


# An agent's run (the `agent-output` patch): a tool reads the run's deps, the model answers
# in text (asked again through the output tool), gives an output the type refuses (told
# why), then a valid one.
SCENARIOS.append(
    Scenario(
        "agent_output",
        {
            "conversations": {
                "*": [
                    {"reply": [{"tool_use": {"name": "check", "input": {"what": "tests"}}}]},
                    {"reply": [{"text": "It passes."}]},
                    output_call(passed="maybe", note="?"),
                    output_call(passed=True, note="Tests pass on main."),
                ]
            }
        },
        agent_run_with_deps,
        agent=REVIEWER,
    )
)

SCENARIOS += [
    replace(scenario, name=f"one_activity_{scenario.name}")
    for scenario in SCENARIOS
    if scenario.name in ONE_ACTIVITY
]


async def save_histories(temporal: Client, session_id: str, name: str) -> None:
    """Every execution under the session's workflow id, as NAME.json (NAME-1.json, ...)."""
    executions = [
        listed async for listed in temporal.list_workflows(f"WorkflowId = 'session-{session_id}'")
    ]
    executions.sort(key=lambda listed: listed.start_time)
    # Changes applied to the idle session before the run are not the run.
    executions = [e for e in executions if e.workflow_type != "SessionChanges"]
    for number, listed in enumerate(executions, start=1):
        handle = temporal.get_workflow_handle(listed.id, run_id=listed.run_id)
        history = await handle.fetch_history()
        suffix = f"-{number}" if len(executions) > 1 else ""
        target = HERE / f"{name}{suffix}.json"
        target.write_text(history.to_json())
        print(f"recorded {target.name}: {len(history.events)} events")


async def record(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = DevServer(Path(tmp) / "temporal.db")
        await server.astart()
        try:
            temporal = await connect_temporal(
                Settings.from_env(home=Path(tmp), temporal_address=server.address)
            )
            for scenario in SCENARIOS:
                if names and scenario.name not in names:
                    continue
                home = Path(tmp) / scenario.name
                home.mkdir()
                async with open_stack(home, temporal, server.address, scenario.script) as stack:
                    session = await stack.client.sessions.create(host=scenario.host, agent=scenario.agent)
                    plugins = [scenario.agent] if scenario.agent else []
                    async with stack.worker(plugins=plugins):
                        await scenario.drive(stack, session.id)
                    # A sub-agent's session is recorded too, as NAME-child.
                    sessions = {"": session.id}
                    sessions.update(
                        (f"-child{'' if n == 1 else n}", child.id)
                        for n, child in enumerate(
                            await stack.client.sessions.children(session.id), start=1
                        )
                    )
                    for tag, session_id in sessions.items():
                        await save_histories(temporal, session_id, scenario.name + tag)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:]))
