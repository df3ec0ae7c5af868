"""The timelines of a session's runs, fetched from Temporal."""

from __future__ import annotations

from temporalio.client import Client

from duragent.client.history.child_workflows import SUBAGENT
from duragent.client.history.reader import timeline_from_history
from duragent.client.history.timeline import EPOCH, RunTimeline
from duragent.domain.runs import session_workflow_id


async def session_timelines(
    temporal: Client,
    session_id: str,
    run_id: str | None = None,
    ui_base: str | None = None,
    *,
    subagents: bool = True,
) -> list[RunTimeline]:
    """Timelines of every execution of the session's workflow id, oldest first; with
    `run_id`, only the executions of that run (its continue-as-new chain included). With
    `subagents`, each run's sub-agent runs follow it (theirs in turn below them), each
    naming the session and call that started it.

    Executions are found through Temporal's visibility store (eventually consistent: one
    that just started or ended may be missing for a moment); continue-as-new successors
    are followed from the histories themselves. `ui_base` (the web UI's address, e.g.
    http://127.0.0.1:8233) adds a link to each execution's history page.
    """
    if "'" in session_id or "\\" in session_id:
        raise ValueError(f"not a session id: {session_id!r}")
    workflow_id = session_workflow_id(session_id)
    listed = [e async for e in temporal.list_workflows(f"WorkflowId = '{workflow_id}'")]
    listed.sort(key=lambda execution: execution.start_time)
    todo = [execution.run_id for execution in listed]
    if run_id is not None:  # runs carry their run id in the memo: fetch only theirs
        todo = [e.run_id for e in listed if await e.memo_value("run_id", None) == run_id]
    timelines: dict[str, RunTimeline] = {}
    while todo:
        temporal_run_id = todo.pop(0)
        if temporal_run_id in timelines:
            continue
        handle = temporal.get_workflow_handle(workflow_id, run_id=temporal_run_id)
        timeline = timeline_from_history(await handle.fetch_history())
        timelines[temporal_run_id] = timeline
        successor = _link(timeline, "continued_as_new", "new_execution_run_id")
        if successor:
            todo.insert(0, successor)
    ordered = sorted(timelines.values(), key=lambda t: t.items[0].at if t.items else EPOCH)
    for timeline in ordered:  # a successor without a RunInput continues its run
        previous = timelines.get(_link(timeline, "run_started", "continued_from") or "")
        if timeline.run_id is None and previous is not None:
            timeline.run_id = previous.run_id
        if ui_base:
            timeline.web_ui_url = (
                f"{ui_base.rstrip('/')}/namespaces/{temporal.namespace}/workflows/"
                f"{timeline.workflow_id}/{timeline.temporal_run_id}/history"
            )
    shown = [t for t in ordered if run_id is None or t.run_id == run_id]
    if not subagents:
        return shown
    with_children: list[RunTimeline] = []
    for timeline in shown:
        with_children.append(timeline)
        for item in timeline.items:
            child_session, child_run = (
                item.details.get("child_session_id"),
                item.details.get("child_run_id"),
            )
            if item.kind != SUBAGENT or not isinstance(child_session, str):
                continue
            below = await session_timelines(
                temporal, child_session, child_run if isinstance(child_run, str) else None, ui_base
            )
            for child in below:
                if child.parent_session_id is None:
                    child.parent_session_id = session_id
                    child.parent_tool_call_id = item.details.get("tool_call_id")
            with_children += below
    return with_children


def _link(timeline: RunTimeline, kind: str, key: str) -> str | None:
    for item in timeline.items:
        if item.kind == kind and isinstance(item.details.get(key), str):
            return str(item.details[key])
    return None
