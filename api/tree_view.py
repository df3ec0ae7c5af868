"""The session tree as a page shows it: branches, labels and compactions, not every entry;
and the marks a page puts in the display history (compactions, guidance taken).

A long session holds thousands of entries, almost all of them one assistant turn after
another on a single line. A person looking at the tree wants the places they can act on:
their own messages (go back and edit one), where the tree branches, the tips of branches,
labels, compactions and branch summaries. Everything else is folded into the nearest node
shown above it (`folded` counts it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
    current_labels,
)
from duragent.domain.fallbacks import REPLANNED_TEXT, SKIPPED_TEXT, STOPPED_TEXT
from duragent.domain.guidance import GUIDANCE_TYPE, sent_text
from duragent.domain.messages import (
    AssistantMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
    text_of,
)

PREVIEW_CHARS = 120
MAX_NODES = 500

NodeKind = Literal["user", "assistant", "tool", "custom", "compaction", "branch_summary", "other"]
_ROLE_KINDS: dict[str, NodeKind] = {"user": "user", "assistant": "assistant", "toolResult": "tool"}


class TreeNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    parent_id: str | None
    """The nearest node shown above this one (None at a root)."""
    depth: int
    """How many branch points lie above it: the page indents by this."""
    kind: NodeKind
    preview: str
    label: str | None
    timestamp: int
    on_path: bool
    """On the current branch (root to leaf): what the model sees."""
    is_leaf: bool
    """The session's current leaf."""
    branches: int
    """Children of this entry: more than one where the tree branches."""
    folded: int
    """Entries below it on the same line that are not shown."""
    child_session_id: str | None = None
    """A `delegate` call's result: the sub-agent session that answered it (to open it)."""


class TreeView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    leaf_id: str | None
    nodes: list[TreeNode]
    truncated: bool
    """More nodes exist than `MAX_NODES`; the newest are shown."""


class CompactionMark(BaseModel):
    """Where the model's context was compacted, placed after a displayed message."""

    model_config = ConfigDict(extra="forbid")

    entry_id: str
    after_message_id: str | None
    """The display message that was the latest when it happened (None: before any)."""
    tokens_before: int
    timestamp: int


def _kind(entry: SessionEntry) -> NodeKind:
    if isinstance(entry, MessageEntry):
        return _ROLE_KINDS.get(entry.message.role, "custom")
    if isinstance(entry, CustomMessageEntry):
        return "custom"
    if isinstance(entry, CompactionEntry):
        return "compaction"
    if isinstance(entry, BranchSummaryEntry):
        return "branch_summary"
    return "other"


def _subagent(entry: SessionEntry) -> str | None:
    """The sub-agent session whose answer the entry is (a `delegate` result), or None."""
    if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage):
        found = (entry.message.details or {}).get("child_session_id")
        return found if isinstance(found, str) else None
    return None


def _preview(entry: SessionEntry) -> str:
    text = ""
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, UserMessage | CustomMessage):
            text = text_of(message.content)
        elif isinstance(message, AssistantMessage):
            text = text_of(message.content) or ", ".join(c.name for c in message.tool_calls)
        elif (child := _subagent(entry)) is not None:
            text = f"sub-agent {child[:8]}: {text_of(message.content)}"
        else:
            text = f"{message.tool_name} result"
    elif isinstance(entry, CustomMessageEntry):
        text = text_of(entry.content)
    elif isinstance(entry, CompactionEntry):
        text = f"context compacted ({entry.tokens_before} tokens summarised)"
    elif isinstance(entry, BranchSummaryEntry):
        text = "summary of the branch left behind"
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


_CONVERSATION = (MessageEntry, CustomMessageEntry, CompactionEntry, BranchSummaryEntry)
"""Entries of the conversation. Labels, config changes, leaf moves and the like are
bookkeeping: the tree shows them as part of the conversation entry they follow."""


def _is_conversation(entry: SessionEntry) -> bool:
    return isinstance(entry, _CONVERSATION)


def _nearest(
    by_id: dict[str, SessionEntry], entry_id: str | None, wanted: Callable[[SessionEntry], bool]
) -> str | None:
    """`entry_id` or its nearest ancestor that is `wanted` (None: none is)."""
    seen: set[str] = set()
    while entry_id is not None and entry_id in by_id and entry_id not in seen:
        if wanted(by_id[entry_id]):
            return entry_id
        seen.add(entry_id)
        entry_id = by_id[entry_id].parent_id
    return None


def tree_view(entries: Sequence[SessionEntry], leaf_id: str | None) -> TreeView:
    """The tree of `entries` (stored order) with the current leaf `leaf_id`."""
    labels = current_labels(entries)
    by_id = {e.id: e for e in entries}
    # Each conversation entry under its nearest conversation ancestor. Parents are stored
    # before their children, so one pass in stored order resolves every chain.
    above: dict[str, str | None] = {}
    for entry in entries:
        parent = entry.parent_id if entry.parent_id in by_id else None
        if parent is not None and not _is_conversation(by_id[parent]):
            parent = above[parent] if parent in above else _nearest(by_id, parent, _is_conversation)
        above[entry.id] = parent
    conversation = [e for e in entries if _is_conversation(e)]
    children: dict[str | None, list[SessionEntry]] = {}
    for entry in conversation:
        children.setdefault(above[entry.id], []).append(entry)
    leaf = _nearest(by_id, leaf_id, _is_conversation)
    on_path: set[str] = set()
    cursor = leaf
    while cursor is not None and cursor not in on_path:
        on_path.add(cursor)
        cursor = above[cursor]

    def shown(entry: SessionEntry) -> bool:
        return (
            _kind(entry) in ("user", "compaction", "branch_summary")
            or entry.id == leaf
            or entry.id in labels
            or len(children.get(entry.id, [])) != 1
            or _subagent(entry) is not None  # a place to open the sub-agent from
        )

    nodes: dict[str, TreeNode] = {}
    # Depth-first, iteratively (a line of thousands of turns would overflow recursion).
    stack: list[tuple[SessionEntry, str | None, int]] = [
        (root, None, 0) for root in reversed(children.get(None, []))
    ]
    while stack:
        entry, node_above, depth = stack.pop()
        kids = children.get(entry.id, [])
        node_id = node_above
        if shown(entry):
            nodes[entry.id] = TreeNode(
                id=entry.id,
                parent_id=node_above,
                depth=depth,
                kind=_kind(entry),
                preview=_preview(entry),
                label=labels.get(entry.id),
                timestamp=entry.timestamp,
                on_path=entry.id in on_path,
                is_leaf=entry.id == leaf,
                branches=len(kids),
                folded=0,
                child_session_id=_subagent(entry),
            )
            node_id = entry.id
        elif node_above is not None:
            nodes[node_above].folded += 1
        deeper = depth + 1 if len(kids) > 1 else depth
        for child in reversed(kids):
            stack.append((child, node_id, deeper))
    listed = list(nodes.values())
    return TreeView(leaf_id=leaf, nodes=listed[-MAX_NODES:], truncated=len(listed) > MAX_NODES)


def _displayed(entry: SessionEntry) -> bool:
    """Whether the entry is in the display history (see `store.append.displayed`)."""
    return isinstance(entry, MessageEntry) or (
        isinstance(entry, CustomMessageEntry) and entry.display
    )


class GuidanceCall(BaseModel):
    """A tool call of the turn guidance came in, and what became of it."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str
    tool_name: str
    outcome: Literal["interrupted", "skipped", "finished"]


class GuidanceMark(BaseModel):
    """Where guidance reached the model, placed after a displayed message: the guidance is
    no chat message (docs/SPEC.md), but a reader sees what was said and what it changed."""

    model_config = ConfigDict(extra="forbid")

    entry_id: str
    """The guidance entry's id, which is its input-queue item's."""
    after_message_id: str | None
    point: str
    """The injection point (docs/SPEC.md) that took it."""
    intent: str | None
    text: str
    """What the person wrote."""
    calls: list[GuidanceCall]
    """The tool calls of the turn it came in (none between turns)."""
    timestamp: int


def _outcome(result: ToolResultMessage) -> Literal["interrupted", "skipped", "finished"]:
    details = result.details or {}
    text = text_of(result.content)
    if details.get("runtime_guidance_replan") or text.startswith((SKIPPED_TEXT, REPLANNED_TEXT)):
        return "skipped"
    if details.get("cancelled") or text.startswith(STOPPED_TEXT):
        return "interrupted"
    return "finished"


_AFTER_CALLS = ("during_tool_interrupted", "after_tool", "before_tools")
"""The injection points that take guidance after a turn's calls, in that turn's commit."""


def _is_guidance(entry: SessionEntry | None) -> bool:
    return isinstance(entry, CustomMessageEntry) and entry.custom_type == GUIDANCE_TYPE


def _same_injection(one: CustomMessageEntry, other: SessionEntry) -> bool:
    """Guidance items taken together: stored one after another with one point and time."""
    return (
        isinstance(other, CustomMessageEntry)
        and other.timestamp == one.timestamp
        and (other.details or {}).get("point") == (one.details or {}).get("point")
    )


def _turn_calls(by_id: dict[str, SessionEntry], guidance: CustomMessageEntry) -> list[GuidanceCall]:
    """The tool calls of the turn `guidance` came in: the results above it, up to the
    turn's assistant message. Guidance taken after a turn's calls is saved in that turn's
    commit, after more than its results (`Run.commit`, `domain.injection`): pending writes
    (the policy an "Always" changed, a new name), queued steering and follow-ups, and the
    other guidance of the same injection. The walk passes over those (it stopped at the
    first, and the guidance lost its link to the call it interrupted). At the points
    taken with no calls of their own (before a model call, before the finish) only the
    results right above count: what lies further up is an earlier turn's."""
    turn_point = (guidance.details or {}).get("point") in _AFTER_CALLS
    calls: list[GuidanceCall] = []
    above = by_id.get(guidance.parent_id or "")
    while above is not None:
        if isinstance(above, MessageEntry) and isinstance(above.message, ToolResultMessage):
            result = above.message
            calls.insert(
                0,
                GuidanceCall(
                    tool_call_id=result.tool_call_id,
                    tool_name=result.tool_name,
                    outcome=_outcome(result),
                ),
            )
        elif _is_guidance(above):
            if not _same_injection(guidance, above):
                break
        elif (
            not turn_point
            or isinstance(above, (CompactionEntry, BranchSummaryEntry))
            or (isinstance(above, MessageEntry) and isinstance(above.message, AssistantMessage))
        ):
            break
        above = by_id.get(above.parent_id or "")
    return calls


def guidance_marks(entries: Sequence[SessionEntry]) -> list[GuidanceMark]:
    """Every guidance the model received, with the displayed message it came after and
    the tool calls of its turn (`_turn_calls`)."""
    by_id = {e.id: e for e in entries}
    marks: list[GuidanceMark] = []
    for entry in entries:
        if not (isinstance(entry, CustomMessageEntry) and entry.custom_type == GUIDANCE_TYPE):
            continue
        calls = _turn_calls(by_id, entry)
        details = entry.details or {}
        marks.append(
            GuidanceMark(
                entry_id=entry.id,
                after_message_id=_nearest(by_id, entry.parent_id, _displayed),
                point=str(details.get("point", "")),
                intent=details.get("intent"),
                text=sent_text(text_of(entry.content)),
                calls=calls,
                timestamp=entry.timestamp,
            )
        )
    return marks


def compaction_marks(entries: Sequence[SessionEntry]) -> list[CompactionMark]:
    """Every compaction, with the displayed message it came after on its path."""
    by_id = {e.id: e for e in entries}
    marks: list[CompactionMark] = []
    for entry in entries:
        if not isinstance(entry, CompactionEntry):
            continue
        after = _nearest(by_id, entry.parent_id, _displayed)
        marks.append(
            CompactionMark(
                entry_id=entry.id,
                after_message_id=after,
                tokens_before=entry.tokens_before,
                timestamp=entry.timestamp,
            )
        )
    return marks
