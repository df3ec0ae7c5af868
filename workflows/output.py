"""A run that ends with a structured output (a session of an agent with an `output_type`,
`domain.agents.OutputSpec`): the model gives it by calling the agent's output tool.

Two ways it can go amiss, both answered here and both counted against the output's
`retries`: the tool refuses what the model gave (the model reads the validation error
as the call's result, and tries again in its next turn), or the model stops with a text
answer and no call (it is told to give its answer through the tool, as a follow-up).
Past `retries`, the run ends with an error saying which.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.agents import OutputSpec, output_reminder
    from duragent.domain.fallbacks import ToolRun
    from duragent.domain.messages import user_text
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turns import ToolCallOutcome

from duragent.workflows import patches
from duragent.workflows.run import Run


def _spec(run: Run) -> OutputSpec | None:
    config = run.state.inbox.config
    if config is None or config.output is None:
        return None
    # Only runs with an output reach this; those recorded before it had none.
    return config.output if workflow.patched(patches.AGENT_OUTPUT) else None


def refused(run: Run, calls: list[ToolCallRef], outcomes: list[ToolRun]) -> str | None:
    """Count the turn's output calls the output type refused; once more were refused
    than the output's `retries`, the error the run ends with (else None)."""
    spec = _spec(run)
    if spec is None:
        return None
    errors = [
        outcome.preview
        for call, outcome in zip(calls, outcomes, strict=True)
        if call.name == spec.tool and isinstance(outcome, ToolCallOutcome) and outcome.is_error
    ]
    if not errors:
        return None
    run.state.output_tries += len(errors)
    if run.state.output_tries <= spec.retries:
        return None
    return (
        f"no valid {spec.type_name} output after {run.state.output_tries} tries; "
        f"the last was refused: {errors[-1]}"
    )


def missing(run: Run) -> QueuedMessage | str | None:
    """For a run whose model stopped with a text answer: a follow-up asking for the
    output through its tool; the error the run ends with once tries are used up; or
    None when the run has no output to give."""
    spec = _spec(run)
    if spec is None:
        return None
    run.state.output_tries += 1
    if run.state.output_tries > spec.retries:
        return (
            f"no {spec.type_name} output: the model answered without calling "
            f"{spec.tool} ({run.state.output_tries} times)"
        )
    message = user_text(output_reminder(spec.tool), run.now_ms())
    return QueuedMessage(id=run.new_id(), message=message)
