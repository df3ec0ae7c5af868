"""The patch registry (`workflows/patches.py`) lists every `workflow.patched` id the
workflows use, each named by its constant there, and nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from duragent.workflows import patches

pytestmark = pytest.mark.fast

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


def patch_calls() -> list[tuple[str, ast.expr]]:
    """`file:line` and the argument of every `workflow.patched(...)` and
    `workflow.deprecate_patch(...)` call under workflows/."""
    found = []
    for path in sorted(WORKFLOWS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("patched", "deprecate_patch")
            ):
                found.append((f"{path.name}:{node.lineno}", node.args[0]))
    return found


def test_every_patch_is_named_from_the_registry_and_every_registered_one_is_used() -> None:
    used: set[str] = set()
    for where, argument in patch_calls():
        assert (
            isinstance(argument, ast.Attribute)
            and isinstance(argument.value, ast.Name)
            and argument.value.id == "patches"
        ), f"{where}: name the patch by its constant in workflows/patches.py"
        value = getattr(patches, argument.attr)
        assert value in patches.PATCHES, f"{where}: {argument.attr} is not in PATCHES"
        used.add(value)
    assert used == set(patches.PATCHES)


def test_each_patch_says_what_it_guards_and_since_when() -> None:
    for patch_id, patch in patches.PATCHES.items():
        assert patch.guards.strip() and patch.since, patch_id
