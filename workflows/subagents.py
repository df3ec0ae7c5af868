"""A `delegate` call: the sub-agent's session runs as a child workflow of the run.

    start_subagent (local activity)   make the child session, linked to the call
    SessionRun (child workflow)       the child's run, under the child session's own
                                      workflow id: steer, guide or abort it by its id
    finish_subagent (local activity)  stage the call's result: the child's answer

The child runs on the parent's task queue with the parent's run options. Cancelling the
call (the parent is aborted, or guidance interrupts the batch) asks the child to cancel,
which aborts its run as a user's abort would (its tools are killed), and waits for it:
the call's result then says it was stopped. If the parent's workflow closes some other
way, the parent-close policy asks the child to cancel too. The child's usage and cost add
to the parent run's; a parent with a budget gives the child what is left of it.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from duragent.domain.fallbacks import root_message
    from duragent.domain.messages import user_text
    from duragent.domain.runs import RunInput, RunResult, session_workflow_id
    from duragent.domain.search_attributes import session_attributes
    from duragent.domain.subagents import FinishSubagentInput, StartSubagentInput
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import ToolCallOutcome

from duragent.workflows import steps
from duragent.workflows.run_state import RunSteps


async def run_subagent(run: RunSteps, turn: TurnInProgress, call: ToolCallRef) -> ToolCallOutcome:
    """Run the call's sub-agent to its end and stage its answer as the call's result."""
    parent = run.state.input
    started_at = run.now_ms()
    child_id = run.new_id()
    start = await steps.start_subagent(
        StartSubagentInput(
            session_id=parent.session_id,
            run_id=parent.run_id,
            turn=run.state.turn,
            snapshot_id=run.state.snapshot.id,
            assistant_entry_id=turn.assistant_id,
            call=call,
            child_session_id=child_id,
        )
    )
    finish = FinishSubagentInput(
        session_id=parent.session_id,
        run_id=parent.run_id,
        result_entry_id=turn.result_id(call.id),
        call=call,
        started_at_ms=started_at,
        finished_at_ms=started_at,
        name=start.name,
    )
    if start.refused is not None:
        return await steps.finish_subagent(finish.model_copy(update={"error": start.refused}))
    finish.child_session_id = child_id
    child_run_id = run.new_id()
    child = RunInput(
        session_id=child_id,
        run_id=child_run_id,
        prompt=[user_text(start.prompt, started_at)],
        options=parent.options,
        max_turns=parent.max_turns,
        budget=run.state.budgets.child_budget(run.spent(), run.session_budget()),
    )
    try:
        result: RunResult = await workflow.execute_child_workflow(
            "SessionRun",
            child,
            id=session_workflow_id(child_id),
            result_type=RunResult,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            # What `duragent history` reads to link the call to the sub-agent's session.
            memo={
                "kind": "prompt",
                "run_id": child_run_id,
                "parent_session_id": parent.session_id,
                "tool_call_id": call.id,
                "name": start.name,
            },
            search_attributes=session_attributes(child_id, "prompt", child_run_id),
            static_summary=f"sub-agent {start.name!r} for {call.id}"[:200],
        )
    except ChildWorkflowError as err:
        # Not an aborted child (that returns its result): its workflow failed for good.
        finish.error = root_message(err)
    except asyncio.CancelledError:
        # Cancelled before the child could start: nothing of it ran.
        await steps.finish_subagent(
            finish.model_copy(update={"error": "stopped before it started"})
        )
        raise
    else:
        finish.child = result
        run.state.usage = run.state.usage.plus(result.usage)
        run.state.budgets.add_child(result)
    finish.finished_at_ms = run.now_ms()
    return await steps.finish_subagent(finish)
