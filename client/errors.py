"""Errors a client call can end with, each naming what was wrong."""

from __future__ import annotations

from temporalio.exceptions import FailureError

from duragent.domain.errors import DuragentError as DuragentError  # the base, shared
from duragent.domain.fallbacks import root_message
from duragent.domain.session_file_checks import MAX_NAME_CHARS as MAX_SESSION_NAME_CHARS
from duragent.store.errors import disk_refuses as disk_refuses  # what a 503 says, for api/
from duragent.store.errors import store_trouble as store_trouble


class SessionBusy(DuragentError):
    """The session already has an open run (or compaction, or navigation)."""

    def __init__(
        self, session_id: str, run_id: str | None, workflow_id: str, kind: str = "run"
    ) -> None:
        running = f"run {run_id}" if run_id else f"a {kind}"
        super().__init__(
            f"session {session_id} is busy: {running} is in progress (workflow {workflow_id}); "
            "wait for it, steer it, or abort it"
        )
        self.session_id = session_id
        self.run_id = run_id
        self.workflow_id = workflow_id


class SessionNotFound(DuragentError, LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} does not exist")
        self.session_id = session_id


class InvalidPrompt(DuragentError, ValueError):
    pass


class InputTooLarge(InvalidPrompt):
    """A text a client sent (any of them, not only a prompt) is over the one size limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} is {size} bytes; the limit is {limit} bytes ({limit // 1024} KiB) for "
            "any text sent to a session (put large content in a workspace file and refer to it)"
        )
        self.what = what
        self.size = size
        self.limit = limit


class InvalidWorkspace(DuragentError, ValueError):
    """A workspace path that cannot be one: malformed, not a folder, not creatable."""

    def __init__(self, workspace: str, reason: str) -> None:
        super().__init__(f"workspace {workspace[:200]!r} {reason}")
        self.workspace = workspace


class InvalidHost(DuragentError, ValueError):
    """A host name that breaks the rule (`domain.hosts`)."""

    def __init__(self, host: str) -> None:
        from duragent.domain.hosts import HOST_NAME_RULE

        super().__init__(f"{host[:100]!r} is not a host name ({HOST_NAME_RULE})")
        self.host = host


class WorkspaceNotAllowed(InvalidWorkspace):
    """A workspace outside what the caller may name (over the HTTP API: their own area or
    a root the operator allows)."""


class SessionIdle(DuragentError):
    """Steering, follow-ups and aborts need a run in progress."""

    def __init__(self, session_id: str, what: str) -> None:
        super().__init__(f"session {session_id} has no run in progress: cannot {what}")
        self.session_id = session_id


class InvalidChange(DuragentError, ValueError):
    """A config setter or session write with a bad value."""


class TemporalUnreachable(DuragentError):
    def __init__(self, address: str, detail: str) -> None:
        super().__init__(
            f"Temporal at {address} is not reachable ({detail.splitlines()[0][:200]}); "
            "start it with `duragent dev-server` or set TEMPORAL_ADDRESS"
        )


class QueueItemNotFound(DuragentError, LookupError):
    def __init__(self, session_id: str, item_id: str) -> None:
        super().__init__(f"input {item_id!r} does not exist in session {session_id}")


class ScheduleNotFound(DuragentError, LookupError):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} does not exist")
        self.schedule_id = schedule_id


class InvalidSchedule(DuragentError, ValueError):
    """A schedule's timetable, time zone, busy policy or prompt is not one it can have."""


class TooManySchedules(DuragentError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"you have {limit} schedules, the most one may have: delete one first")


class QueueItemNotPending(DuragentError):
    def __init__(self, item_id: str, status: str) -> None:
        super().__init__(f"input {item_id!r} is {status}, no longer pending")


class InputQueueFull(DuragentError):
    def __init__(self, session_id: str, limit: int) -> None:
        super().__init__(
            f"session {session_id}'s input queue holds {limit} pending items, the most it "
            "holds: send, guide or delete some first"
        )


class SearchAttributesMissing(DuragentError):
    """The Temporal namespace lacks the search attributes duragent finds workflows by."""

    def __init__(self, namespace: str, names: str) -> None:
        super().__init__(
            f"Temporal namespace {namespace} lacks duragent's search attributes ({names}): "
            "add them with `duragent setup-temporal` (same settings), or on Temporal Cloud "
            "with its web UI or `tcld namespace search-attributes add`"
        )


class EntryNotInSession(DuragentError, LookupError):
    def __init__(self, session_id: str, entry_id: str) -> None:
        super().__init__(f"entry {entry_id!r} is not in session {session_id}")


class ResourceNotFound(DuragentError, LookupError):
    """A skill or prompt template that the session's workspace and the shared resources
    do not have."""

    def __init__(self, session_id: str, kind: str, name: str, known: list[str]) -> None:
        folder = "skills" if kind == "skill" else "prompts"
        super().__init__(
            f"no {kind} named {name!r} in session {session_id} "
            f"(available: {', '.join(known) or 'none'}; a {kind} is a "
            f".duragent/{folder}/NAME.md file in the workspace)"
        )
        self.name = name
        self.known = known


class ApprovalRefused(DuragentError):
    """A decision the run did not take: no such call waits, or it was decided already."""


class WorkerNotAnswering(DuragentError):
    """No worker answers for the session's run: what needs one cannot be done now."""

    def __init__(self, session_id: str, what: str) -> None:
        super().__init__(
            f"no worker answers for session {session_id}'s run, so {what}; "
            "start one (duragent worker) and try again"
        )
        self.session_id = session_id


class ApprovalNotRecorded(DuragentError):
    """No worker took a decision on a waiting tool call: nothing was recorded."""

    def __init__(self, session_id: str, detail: str) -> None:
        super().__init__(
            f"the decision was not recorded: {detail} for session {session_id}'s run; "
            "start one (duragent worker) and decide again (duragent approvals "
            f"{session_id} lists what waits)"
        )
        self.session_id = session_id


class AnswerRefused(DuragentError):
    """An answer the run did not take: no such question waits, it was answered already,
    or the answer is not one of its choices."""


class AnswerNotRecorded(DuragentError):
    """No worker took an answer to a waiting question: nothing was recorded."""

    def __init__(self, session_id: str, detail: str) -> None:
        super().__init__(
            f"the answer was not recorded: {detail} for session {session_id}'s run; "
            "start one (duragent worker) and answer again (duragent questions "
            f"{session_id} lists what waits)"
        )
        self.session_id = session_id


def failure_text(err: BaseException) -> str:
    """Why a workflow refused an update or failed, as its code said it: the innermost
    failure's message. Its `str()` puts the exception's type name first (`BudgetRefused: a
    raise must ...`), which tells a person nothing."""
    cause: BaseException = err
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return cause.message if isinstance(cause, FailureError) and cause.message else root_message(err)


class IdsInUse(DuragentError):
    """`keep_ids` asked for ids this deployment already has: nothing was imported."""

    def __init__(self, taken: list[str], session_id: str) -> None:
        if not taken:
            what = "some of them were stored here by another import meanwhile"
        elif taken[0] == session_id:
            what = f"session {session_id} exists here already"
        else:
            what = f"{len(taken)} of its entry ids are taken here (the first {taken[0]!r})"
        super().__init__(
            f"cannot keep the file's ids: {what}; import it without keeping ids to give "
            "it new ones. Nothing was imported"
        )
        self.taken = taken


class InvalidSessionName(DuragentError, ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"a session name is 1 to {MAX_SESSION_NAME_CHARS} characters, not {len(name)}; nothing "
            "was imported"
        )


class TriggerNotFound(DuragentError, LookupError):
    def __init__(self, trigger_id: str) -> None:
        super().__init__(f"trigger {trigger_id[:100]!r} does not exist")
        self.trigger_id = trigger_id
