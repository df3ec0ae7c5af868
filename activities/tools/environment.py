"""The environment a tool's processes get: an allow-list, never the worker's whole one.

The worker's environment holds secrets (the Anthropic key, API tokens, database URLs);
a model that runs `env` must not see them. A command gets the variables named here,
with the worker's values, plus what the operator adds with `DURAGENT_TOOL_ENV`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

BASE_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
)
"""Passed through when the worker has them: what shells and common tools expect, nothing
that is usually secret. `PREFIX*` passes every variable whose name starts with PREFIX."""


def tool_environment(
    extra: Sequence[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables of `source` (default: this process's environment) that `BASE_NAMES`
    and `extra` allow, then the `NAME=value` entries of `extra` (entries as
    `settings.parse_tool_env` checks them: `NAME`, `PREFIX*`, `NAME=value`)."""
    source = os.environ if source is None else source
    names: set[str] = set()
    prefixes: list[str] = []
    fixed: dict[str, str] = {}
    for entry in (*BASE_NAMES, *extra):
        name, equals, value = entry.partition("=")
        if equals:
            fixed[name] = value
        elif name.endswith("*"):
            prefixes.append(name[:-1])
        else:
            names.add(name)
    env = {k: v for k, v in source.items() if k in names or k.startswith(tuple(prefixes))}
    env.update(fixed)
    return env
