"""`ask_user`: ask the user a question and wait for the answer.

Only the spec lives here (what the model reads, the arguments it may give). The call
never runs as a tool activity: the turn's activity reads the question off the call
(`domain.questions.UserQuestion`) and the workflow waits for the answer
(`workflows/questions.py`). Offered only to sessions whose active tools name it: a run
that nobody watches should not stop to ask.
"""

from __future__ import annotations

from typing import ClassVar

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.domain.questions import ASK_USER_TOOL, UserQuestion
from duragent.domain.tools import ToolResult


class AskUserTool(Tool[UserQuestion]):
    name = ASK_USER_TOOL
    description = (
        "Ask the user a question and wait for their answer, which is this call's result. "
        "Use it when you cannot go on well without a decision or a fact only the user has; "
        "do not ask what you can find out yourself. The answer may take hours: ask one "
        "clear question, complete in itself, and give choices when there are a few likely "
        "answers. If the result says no answer came, go on with a stated assumption or stop."
    )
    args_model = UserQuestion
    opt_in: ClassVar[bool] = True

    async def execute(self, args: UserQuestion, ctx: ToolContext) -> ToolResult:
        # The workflow answers these calls itself; reaching here means a call was sent to
        # the tool activity by mistake, which must be seen, not papered over.
        raise RuntimeError(
            "ask_user waits in the workflow, never in a tool activity: the workflow "
            "should have asked the user for this call"
        )
