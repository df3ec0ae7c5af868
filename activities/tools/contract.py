"""The tool contract: what a tool is (`Tool`, its argument model and traits), what a
call knows of where it runs (`ToolContext`), tools listed at run time (`ToolSource`),
and the error a tool raises for the model to correct (`ToolInputError`).

Tools are plain async Python. They know nothing about workflows or activities; the
caller decides where they run (`ToolRegistry`, `activities.tools.registry`) and turns a
`ToolResult` into a message.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar as DefaultedTypeVar

from duragent.activities.tools.schema import clean_schema, format_validation_error
from duragent.domain.tools import ToolResult, ToolSpec, ToolTraits

ArgsT = TypeVar("ArgsT", bound=BaseModel)
DepsT = DefaultedTypeVar("DepsT", default=Any)
"""What `ToolContext.deps` holds. Its default is `Any`: a bare `ToolContext` is one of
any deps, as a bare `list` is a list of anything, so every tool and caller written before
deps existed type-checks as it did."""


class ToolInputError(Exception):
    """Bad arguments or a path outside the workspace; the message is shown to the model."""


def _ignore_update(text: str) -> None:
    del text


def _ignore_process(pgid: int) -> None:
    del pgid


@dataclass
class ToolContext(Generic[DepsT]):
    """What a tool call knows of where it runs, and where its partial output goes.

    A function tool (`@duragent.tool`) gets it as its first parameter when that parameter
    is typed `ToolContext` or `ToolContext[Deps]` (then `ctx.deps` is typed `Deps`).
    """

    workspace: Path
    """Absolute directory; every path argument is resolved inside it."""
    on_update: Callable[[str], None] = field(default=_ignore_update)
    """Called with each new chunk of partial output (bash streams its output here)."""
    on_process: Callable[[int], None] = field(default=_ignore_process)
    """Called with the process group id of each process the tool starts, before the
    process may do anything: it records the group where a later attempt finds it to stop
    it if this worker dies. If it raises, the tool stops the process and fails."""
    session_id: str = ""
    """The session the call belongs to."""
    call_id: str = ""
    """The model's id for this call (`toolu_...`): the same on every attempt."""
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    deps: DepsT = field(default=cast(Any, None), kw_only=True)
    """What the application gives its tools (a database handle, an API client, the user):
    `ToolContext[Deps]` types it. None where the run was given nothing."""

    def print(self, *parts: object, sep: str = " ", end: str = "\n") -> None:
        """Show a line of output while the call runs (live, as bash's output shows). What
        the model reads is the tool's result; this is for the people watching."""
        self.on_update(sep.join(str(part) for part in parts) + end)

    @property
    def cancelled(self) -> bool:
        """Whether the call was aborted (or interrupted by guidance). An async tool is
        cancelled by `asyncio.CancelledError`; a sync one runs on in its thread, so a long
        one should check this now and then and return early."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Mark the call cancelled (the caller does this when the call is aborted)."""
        self._cancelled.set()


class Tool(ABC, Generic[ArgsT]):
    """One tool the model can call.

    Subclasses set the class attributes and implement `execute`. `execute` may raise
    `ToolInputError` for mistakes the model should correct, and `OSError` for failures
    the registry reports as error results; anything else is a bug, reported the same way.
    """

    name: ClassVar[str]
    description: str
    """Written for the model: what the tool does, its limits, how paths work. A class
    attribute, unless an instance's setup changes what is true (a sandboxed bash)."""
    args_model: ClassVar[type[BaseModel]]
    """Pydantic model with `extra="forbid"`; its field descriptions reach the model."""
    traits: ClassVar[ToolTraits] = ToolTraits()
    opt_in: ClassVar[bool] = False
    """Offered only to sessions whose active tools name it (not to "all tools")."""
    process_gate: ClassVar[bool] = False
    """Every process the tool starts is held until `ctx.on_process` has returned for it,
    so when no process of a call was recorded, none of it ran."""

    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments, as the Anthropic `tools` parameter expects.

        Built once per tool class and shared, not copied (every model turn asks for every
        active tool's, and generating one costs about a millisecond): do not change it.
        """
        cls = type(self)
        cached: dict[str, Any] | None = cls.__dict__.get("_schema_cache")
        if cached is None:
            cached = clean_schema(self.args_model.model_json_schema())
            cls._schema_cache = cached  # type: ignore[attr-defined]
        return cached

    def parse_args(self, raw: dict[str, Any]) -> ArgsT:
        """Validate raw model arguments, or raise `ToolInputError` naming each bad field."""
        if not isinstance(raw, dict):
            raise ToolInputError(f"arguments must be a JSON object, got {type(raw).__name__}")
        try:
            # ClassVars cannot mention ArgsT, so the link between the two is by convention.
            return cast(ArgsT, self.args_model.model_validate(raw))
        except ValidationError as exc:
            raise ToolInputError(format_validation_error(exc)) from None

    @abstractmethod
    async def execute(self, args: ArgsT, ctx: ToolContext) -> ToolResult:
        """Run the tool. Must let `asyncio.CancelledError` propagate after cleaning up."""


class ToolSource(ABC):
    """Tools a worker learns of at run time (an MCP server's): listed anew by `refresh`
    once per turn, cached in between, called by name. `name` is what a session's
    `sources` choice names; the source owns the tool names it says it `owns`."""

    name: str
    kind: ClassVar[str] = "tool source"
    """What the source is, for messages ("MCP server")."""

    @abstractmethod
    def owns(self, name: str) -> bool:
        """Whether `name` is (or would be) one of this source's tools."""

    @abstractmethod
    def names(self) -> list[str]:
        """The tools of the last listing."""

    @abstractmethod
    def traits(self, name: str) -> ToolTraits: ...

    @abstractmethod
    async def refresh(self) -> None:
        """List the tools anew. Never raises: a failed listing keeps the last one."""

    @abstractmethod
    def api_specs(self) -> list[ToolSpec]: ...

    @abstractmethod
    async def run(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call the tool; failures are error results. Lets cancellation propagate."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the source holds open (connections, processes)."""


ToolProvider = ToolSource
"""The name `ToolSource` had before "provider" came to mean a model's provider; kept so
plugins written against it still load."""
