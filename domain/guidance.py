# ruff: noqa: RUF001 (Chinese text and full-width punctuation are meant here)
"""Runtime guidance (docs/SPEC.md): input that reaches a run at its nearest safe point.

Guidance goes to the model as a hidden user message, never shown as a chat message, and
never between a tool call and its result. What it does to work in flight depends on its
intent:

- `interrupt`: stop or correct ("stop", "wait", "that's wrong", "不要",
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

from duragent.domain.entries import CustomMessageEntry
from duragent.domain.messages import TextContent

GuidanceIntent = Literal["interrupt", "supplement"]
InjectionPoint = Literal[
    "before_model", "before_tools", "during_tool_interrupted", "after_tool", "before_finish"
]
GUIDANCE_TYPE = "runtime_guidance"

# An interrupting phrase anywhere in the text makes it an interruption. English words match
# whole words ("stopwatch", "know", "nothing" do not); "no" counts only as a refusal: "no"
# followed by a comma or "!", or the whole text ("no tests yet" is not one). "Don't forget"
# adds to the task, so it is no "don't". Words that redirect without stopping ("instead",
# "rather", "change", "switch") do not interrupt on their own: "please use pathlib
# instead" is said about the code to come, not the test run in flight (it killed one).
_INTERRUPT_EN = re.compile(
    r"\b(?:stop|halt|abort|cancel|wait|never ?mind|wrong|incorrect|mistake|"
    r"not that|actually|redo|undo|revert|correction|fix that)\b"
    r"|\b(?:don['’]?t|do not)\b(?!\s+forget)"
    r"|\bno\s*[,!，！]"
    r"|^\W*no\W*$",
    re.IGNORECASE,
)
# Chinese has no word boundaries: the phrases match anywhere, once the common words that
# contain one without meaning it are taken out (特别 "especially", 别的 "other", 别忘了
# "don't forget", 错误处理 "error handling", 不停 "non-stop", 等等 after a list: "etc.").
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
_NOT_INTERRUPT_ZH = re.compile(
    r"特别|区别|分别|别的|别人|级别|类别|识别|个别|性别|告别|别忘|不要忘|"
    r"错误处理|错误信息|错误日志|错误码|错误提示|不停|(?<=[^\s，。！？、；：,.!?;:])等等"
)


class GuidanceItem(BaseModel):
    """Guidance as the workflow holds it: the input-queue item's id, text and intent."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    intent: GuidanceIntent


def classify(text: str) -> GuidanceIntent:
    """`interrupt` when the text asks to stop, change course or correct; else `supplement`."""
    if _INTERRUPT_EN.search(text):
        return "interrupt"
    chinese = _NOT_INTERRUPT_ZH.sub("|", text)
    return "interrupt" if any(phrase in chinese for phrase in _INTERRUPT_ZH) else "supplement"


_OPENING = (
    "<runtime-guidance>\n"
    "The user sent this guidance while you were working. Decide how to take it into "
    "account: continue, adjust the plan, or say why not.\n\n"
)
_CLOSING = "\n</runtime-guidance>"


def guidance_entry(item: GuidanceItem, point: InjectionPoint, timestamp: int) -> CustomMessageEntry:
    """The hidden message the model gets (its id is the queue item's)."""
    text = f"{_OPENING}{item.text}{_CLOSING}"
    return CustomMessageEntry(
        id=item.id,
        parent_id=None,
        timestamp=timestamp,
        custom_type=GUIDANCE_TYPE,
        content=[TextContent(text=text)],
        display=False,
        details={"point": point, "intent": item.intent},
    )


def sent_text(wrapped: str) -> str:
    """What the person wrote, from the text of a `guidance_entry` (the text as it is when
    it is not wrapped as one)."""
    if wrapped.startswith(_OPENING) and wrapped.endswith(_CLOSING):
        return wrapped[len(_OPENING) : -len(_CLOSING)]
    return wrapped
