"""Runtime guidance (seed 001): input that reaches a run at its nearest safe point.

Guidance goes to the model as a hidden user message, never shown as a chat message, and
never between a tool call and its result. What it does to work in flight depends on its
intent:

- `interrupt`: stop, redirect or correct ("stop", "instead", "that's wrong", "不要",
  "改成", ...). A running tool is cancelled (its output so far kept); planned tools that
  have not started are skipped.
- `supplement`: adds to the task ("also", "and then", "另外", "补充", ...). Running tools
  finish; the rest of their batch is skipped; the model sees it next.

The client's explicit flag wins; otherwise `classify` decides, by the rule below.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from domain.entries import CustomMessageEntry
from domain.messages import TextContent

GuidanceIntent = Literal["interrupt", "supplement"]
InjectionPoint = Literal[
    "before_model", "before_tools", "during_tool_interrupted", "after_tool", "before_finish"
]
GUIDANCE_TYPE = "runtime_guidance"

# An interrupting phrase anywhere in the text makes it an interruption; English words
# match whole words, Chinese phrases match anywhere (no word boundaries in Chinese).
_INTERRUPT_EN = re.compile(
    r"\b(stop|halt|abort|cancel|wait|don'?t|do not|never mind|nevermind|instead|rather|"
    r"wrong|incorrect|mistake|not that|no,|actually|change|switch|redo|undo|revert|"
    r"correction|fix that)\b",
    re.IGNORECASE,
)
_INTERRUPT_ZH = (
    "停",
    "别",
    "不要",
    "不用",
    "不对",
    "错了",
    "错误",
    "改成",
    "改为",
    "换成",
    "换个",
    "取消",
    "算了",
    "等等",
    "等一下",
    "而是",
    "重新",
    "纠正",
    "改一下",
    "先别",
)


class GuidanceItem(BaseModel):
    """Guidance as the workflow holds it: the input-queue item's id, text and intent."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    intent: GuidanceIntent


def classify(text: str) -> GuidanceIntent:
    """`interrupt` when the text asks to stop, change course or correct; else `supplement`."""
    if _INTERRUPT_EN.search(text) or any(phrase in text for phrase in _INTERRUPT_ZH):
        return "interrupt"
    return "supplement"


def guidance_entry(item: GuidanceItem, point: InjectionPoint, timestamp: int) -> CustomMessageEntry:
    """The hidden message the model gets (its id is the queue item's)."""
    text = (
        "<runtime-guidance>\n"
        "The user sent this guidance while you were working. Decide how to take it into "
        "account: continue, adjust the plan, or say why not.\n\n"
        f"{item.text}\n"
        "</runtime-guidance>"
    )
    return CustomMessageEntry(
        id=item.id,
        parent_id=None,
        timestamp=timestamp,
        custom_type=GUIDANCE_TYPE,
        content=[TextContent(text=text)],
        display=False,
        details={"point": point, "intent": item.intent},
    )
