"""A readable timeline of a session's runs, read from their Temporal workflow histories.

Each workflow execution under the session's workflow id (one per run, plus idle-session
changes and any continue-as-new successors) becomes a `RunTimeline`: one `TimelineItem`
per thing that happened, in time order. The workflow already records everything needed:
the run's input, every model call and tool call with their inputs and small results, the
save point each model call carried, the signals clients sent, timers, cancellation and
the result. Local activities (start_run, finish_run, record_events, apply_changes) leave
only a marker with their result and summary; their inputs are not in history.

Payloads are decoded as plain JSON (never validated against today's contracts), so
histories recorded by older versions read the same way.

The reader (`reader`, with `summaries` and `values`) is pure; `fetch` gets the histories
from Temporal; `view` prints timelines for people.
"""

from duragent.client.history.fetch import session_timelines
from duragent.client.history.reader import timeline_from_history
from duragent.client.history.timeline import RunTimeline, TimelineItem
from duragent.client.history.view import render

__all__ = [
    "RunTimeline",
    "TimelineItem",
    "render",
    "session_timelines",
    "timeline_from_history",
]
