"""Workflow hooks (stop after a turn, prepare the next turn), run in the sandbox.

The worker lists its hooks by import path; the workflow imports them here, inside
Temporal's sandbox, so a hook that reads a clock, draws random numbers or does I/O
raises instead of silently breaking replays. The run then ends with that error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.hooks import NextTurn, TurnSummary, WorkflowHooks


T = TypeVar("T")


class HookError(Exception):
    """A workflow hook failed or is not deterministic."""


class HookRunner:
    def __init__(self, paths: list[str]) -> None:
        self._hooks: list[tuple[str, WorkflowHooks]] = []
        for path in paths:
            module_name, _, class_name = path.partition(":")
            try:
                hook_class = getattr(importlib.import_module(module_name), class_name)
                self._hooks.append((path, hook_class()))
            except Exception as err:
                raise HookError(f"cannot load workflow hooks {path!r}: {err}") from err

    def should_stop_after_turn(self, turn: TurnSummary) -> bool:
        return any(
            _call(path, partial(hook.should_stop_after_turn, turn)) for path, hook in self._hooks
        )

    def prepare_next_turn(self, turn: TurnSummary) -> NextTurn | None:
        """The last hook's override wins."""
        override: NextTurn | None = None
        for path, hook in self._hooks:
            override = _call(path, partial(hook.prepare_next_turn, turn)) or override
        return override


def _call(path: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except Exception as err:
        # Matched by name: inside the sandbox the class object may be a re-imported copy.
        if any(c.__name__ == "NondeterminismError" for c in type(err).__mro__):
            raise HookError(f"workflow hook {path!r} is not deterministic: {err}") from err
        raise HookError(f"workflow hook {path!r} failed: {type(err).__name__}: {err}") from err
