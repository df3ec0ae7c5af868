"""prompt, skill and promptFromTemplate share one flow; resources come from the snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import Stack

from duragent.client.errors import ResourceNotFound

SKILL = """---
name: review
description: Review a file for bugs
---
Read the file, list bugs with line numbers, suggest fixes.
"""
TEMPLATE = """---
description: Explain a topic to an audience
---
Explain $1 to $2. Keep it under $3 words. All arguments: $@
"""


@pytest.mark.script(
    {"conversations": {"*": [{"reply": [{"text": "ok"}]}, {"reply": [{"text": "ok"}]}]}}
)
async def test_skill_and_template_runs(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    resources = Path(session.workspace) / ".duragent"
    (resources / "skills").mkdir(parents=True)
    (resources / "prompts").mkdir()
    (resources / "skills" / "review.md").write_text(SKILL)
    (resources / "prompts" / "explain.md").write_text(TEMPLATE)
    async with stack.worker():
        ran = await (await stack.client.runs.skill(session.id, "review", ["app.py"])).result()
        assert ran.status == "completed"
        ran = await (
            await stack.client.runs.prompt_from_template(
                session.id, "explain", ["tides", "kids", "50"]
            )
        ).result()
        assert ran.status == "completed"
        runs_before = len(await stack.client.runs.list(session.id))
        # A mistyped name is refused before a run starts, listing what exists.
        with pytest.raises(ResourceNotFound) as skill_missing:
            await stack.client.runs.skill(session.id, "nope")
        with pytest.raises(ResourceNotFound) as template_missing:
            await stack.client.runs.prompt_from_template(session.id, "explian", ["tides"])
        assert len(await stack.client.runs.list(session.id)) == runs_before  # no failed 0-turn run
    skill_request, template_request = (r.body for r in stack.model.requests_for(session.id))
    skill_text = skill_request["messages"][-1]["content"][0]["text"]
    assert skill_text.startswith('<skill name="review"')
    assert "list bugs with line numbers" in skill_text and skill_text.endswith("app.py")
    # The snapshot lists the skills in the system prompt.
    assert "review: Review a file for bugs" in skill_request["system"][0]["text"]
    template_text = template_request["messages"][-1]["content"][-1]["text"]
    assert template_text.strip() == (
        "Explain tides to kids. Keep it under 50 words. All arguments: tides kids 50"
    )
    assert str(skill_missing.value).startswith("no skill named 'nope' in session")
    assert "(available: review;" in str(skill_missing.value)
    assert "no template named 'explian'" in str(template_missing.value)
    assert "(available: explain;" in str(template_missing.value)
