"""Skills and prompt templates: markdown files with optional YAML-ish front matter.

A skill is instructions the model follows when invoked (`duragent skill NAME args`); a
template is a prompt with positional arguments (`$1`, `$2`, `$@`). Both are resolved
from the turn snapshot that runs them, so a run uses exactly the resources it listed.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

ResourceKind = Literal["skill", "template"]
_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Resource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ResourceKind
    name: str
    description: str = ""
    path: str
    body: str


def parse_resource(kind: ResourceKind, default_name: str, path: str, text: str) -> Resource:
    """A resource from a file's text; front matter may set `name` and `description`."""
    fields: dict[str, str] = {}
    body = text
    match = _FRONT_MATTER.match(text)
    if match:
        body = text[match.end() :]
        for line in match.group(1).splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip().strip("\"'")
    name = fields.get("name") or default_name
    if not _NAME.match(name):
        raise ValueError(f"{path}: invalid {kind} name {name!r}")
    return Resource(
        kind=kind, name=name, description=fields.get("description", ""), path=path, body=body
    )


def expand_template(body: str, args: list[str]) -> str:
    """`$1`..`$9` become positional arguments (empty when missing), `$@` and
    `$ARGUMENTS` all of them joined by spaces."""
    joined = " ".join(args)
    text = body.replace("$ARGUMENTS", joined).replace("$@", joined)
    return re.sub(
        r"\$(\d)", lambda m: args[int(m.group(1)) - 1] if int(m.group(1)) <= len(args) else "", text
    )


def skill_invocation(skill: Resource, args: list[str]) -> str:
    text = f'<skill name="{skill.name}" location="{skill.path}">\n{skill.body.strip()}\n</skill>'
    return f"{text}\n\n{' '.join(args)}" if args else text


def skills_section(skills: list[Resource]) -> str:
    """The part of the system prompt that tells the model which skills exist."""
    if not skills:
        return ""
    lines = [f"- {s.name}: {s.description or '(no description)'} ({s.path})" for s in skills]
    return "\n\nSkills you can read and follow when a task matches:\n" + "\n".join(lines)
