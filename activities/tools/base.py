"""The tool contract: argument models, the execution context, the registry, and helpers.

Tools here are plain async Python. They know nothing about workflows or activities; the
caller decides where they run and turns a `ToolResult` into a message.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ValidationError

from duragent.domain.tools import ToolResult, ToolSpec, ToolTraits

logger = logging.getLogger(__name__)

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024

SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv"})
"""Directories that recursive tools (grep, find) never descend into."""

ArgsT = TypeVar("ArgsT", bound=BaseModel)


class ToolInputError(Exception):
    """Bad arguments or a path outside the workspace; the message is shown to the model."""


def _ignore_update(text: str) -> None:
    del text


def _ignore_process(pgid: int) -> None:
    del pgid


@dataclass
class ToolContext:
    """What a tool call knows of where it runs, and where its partial output goes.

    A function tool (`@duragent.tool`) gets it as its first parameter when that parameter
    is typed `ToolContext`.
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


class ToolProvider(ABC):
    """Tools a worker learns of at run time (an MCP server's): listed anew by `refresh`
    once per turn, cached in between, called by name. `name` is what a session's
    `providers` choice names; the provider owns the tool names it says it `owns`."""

    name: str
    kind: ClassVar[str] = "tool provider"
    """What the provider is, for messages ("MCP server")."""

    @abstractmethod
    def owns(self, name: str) -> bool:
        """Whether `name` is (or would be) one of this provider's tools."""

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
        """Release what the provider holds open (connections, processes)."""


class ToolRegistry:
    """The tools available to a session, by name, in registration order: the tools
    registered here, then each provider's.

    Where a method takes `providers`, it names the providers a session uses (None: all);
    a provider's tools are neither offered nor run for a session that does not use it.
    Tools named in `opt_in` are offered only to sessions whose active tools name them.
    """

    def __init__(
        self,
        tools: Iterable[Tool[Any]] = (),
        providers: Iterable[ToolProvider] = (),
        *,
        opt_in: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._providers: dict[str, ToolProvider] = {}
        self._opt_in = set(opt_in)
        for tool in tools:
            self.register(tool)
        for provider in providers:
            self.add_provider(provider)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools or self._provider_of(tool.name) is not None:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        if tool.opt_in:
            self._opt_in.add(tool.name)

    def add_provider(self, provider: ToolProvider) -> None:
        if provider.name in self._providers:
            raise ValueError(f"tool provider {provider.name!r} is already registered")
        taken = [name for name in self._tools if provider.owns(name)]
        if taken:
            raise ValueError(f"tool provider {provider.name!r} would own tools {taken}")
        self._providers[provider.name] = provider

    @property
    def providers(self) -> list[ToolProvider]:
        return list(self._providers.values())

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self, providers: Sequence[str] | None = None) -> list[str]:
        return [
            *self._tools,
            *(name for provider in self._chosen(providers) for name in provider.names()),
        ]

    def traits_of(self, name: str) -> ToolTraits:
        """The tool's traits, or `ToolTraits(known=False)` for a name that is not registered."""
        tool = self._tools.get(name)
        if tool is not None:
            return tool.traits
        provider = self._provider_of(name)
        return provider.traits(name) if provider is not None else ToolTraits(known=False)

    async def refresh(self, providers: Sequence[str] | None = None) -> None:
        """List the chosen providers' tools anew, all at once (a turn does this once)."""
        await asyncio.gather(*(provider.refresh() for provider in self._chosen(providers)))

    def refusal(
        self, name: str, active: Sequence[str] | None, providers: Sequence[str] | None = None
    ) -> str | None:
        """Why a call to `name` must not run in a turn whose active tools are `active`
        (None: every tool), or None if it may. Hiding a tool from the model is not enough:
        a model may still call it (from an earlier turn, a prompt, a guess)."""
        provider = self._provider_of(name)
        if provider is not None and providers is not None and provider.name not in providers:
            used = ", ".join(providers) or "none"
            return (
                f"Tool '{name}' is from {provider.kind} '{provider.name}', which this session "
                f"does not use, so the call was not run. It uses: {used}."
            )
        allowed = (name not in self._opt_in) if active is None else (name in active)
        if allowed:
            return None
        offered = ", ".join(self._offered(active, providers)) or "none"
        return (
            f"Tool '{name}' is not active in this session, so the call was not run. "
            f"Active tools: {offered}."
        )

    def api_specs(
        self, active: Sequence[str] | None = None, providers: Sequence[str] | None = None
    ) -> list[ToolSpec]:
        """`{"name", "description", "input_schema"}` for each active tool, in registry order.

        `None` means every tool. Active names that are not registered are ignored, so a
        session configured with a tool this worker lacks still gets the others.
        """
        wanted = set(self._offered(active, providers)) if active is None else set(active)
        specs: list[ToolSpec] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema()}
            for t in self._tools.values()
            if t.name in wanted
        ]
        for provider in self._chosen(providers):
            specs.extend(provider.api_specs())
        return [spec for spec in specs if spec["name"] in wanted]

    async def run(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Parse the arguments and execute the tool, turning model mistakes into error results.

        Never raises for unknown tools, bad arguments or failures inside the tool;
        `asyncio.CancelledError` (a `BaseException`) propagates once the tool has cleaned up.
        """
        tool = self._tools.get(name)
        provider = self._provider_of(name) if tool is None else None
        if provider is not None:
            try:
                return await provider.run(name, raw_args, ctx)
            except Exception as exc:
                logger.exception("tool %s raised", name)
                return ToolResult.error(f"Tool '{name}' failed: {type(exc).__name__}: {exc}")
        if tool is None:
            available = ", ".join(self.names()) or "(none)"
            return ToolResult.error(f"Tool '{name}' not found. Available tools: {available}")
        try:
            args = tool.parse_args(raw_args)
            return await tool.execute(args, ctx)
        except ToolInputError as exc:
            return ToolResult.error(f"Invalid arguments for tool '{name}': {exc}")
        except OSError as exc:
            return ToolResult.error(f"Tool '{name}' failed: {describe_os_error(exc)}")
        except Exception as exc:
            # A bug in the tool, not the model's fault; the model still gets a result so the
            # run can continue, and the traceback goes to the logs.
            logger.exception("tool %s raised", name)
            return ToolResult.error(f"Tool '{name}' failed: {type(exc).__name__}: {exc}")

    async def aclose(self) -> None:
        """Close every provider (the worker is stopping)."""
        await asyncio.gather(*(provider.aclose() for provider in self._providers.values()))

    def offered(self, active: Sequence[str] | None) -> list[str]:
        """The registered tools a turn whose active tools are `active` offers (None: all
        but the opt-in ones), every provider's included."""
        return self._offered(active, None)

    def _offered(self, active: Sequence[str] | None, providers: Sequence[str] | None) -> list[str]:
        """The tools a turn offers: those `active` names, or (None) all but the opt-in ones."""
        names = self.names(providers)
        if active is None:
            return [name for name in names if name not in self._opt_in]
        return [name for name in names if name in active]

    def _chosen(self, providers: Sequence[str] | None) -> list[ToolProvider]:
        return [p for p in self._providers.values() if providers is None or p.name in providers]

    def _provider_of(self, name: str) -> ToolProvider | None:
        return next((p for p in self._providers.values() if p.owns(name)), None)


# --- schemas and validation messages -------------------------------------------------


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Strip pydantic's noise from a JSON schema so the model sees only what matters.

    Inlines `$defs`, drops `title`s and `default: null`, and collapses `X | None` (an
    `anyOf` with a null branch) to `X`: optional arguments are simply left out.
    """
    defs = schema.get("$defs", {})

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if in_properties:
            # Keys here are argument names, not schema keywords: keep them all.
            return {key: walk(value) for key, value in node.items()}
        if "$ref" in node:
            target = walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            extra = {k: walk(v) for k, v in node.items() if k != "$ref"}
            return {**target, **extra}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("title", "$defs") or (key == "default" and value is None):
                continue
            out[key] = walk(value, in_properties=key == "properties")
        branches = out.get("anyOf")
        if isinstance(branches, list):
            non_null = [b for b in branches if b != {"type": "null"}]
            if len(non_null) == 1 and len(non_null) < len(branches):
                del out["anyOf"]
                out = {**non_null[0], **out}
        return out

    cleaned: dict[str, Any] = walk(schema)
    cleaned.setdefault("properties", {})
    cleaned.setdefault("required", [])
    return cleaned


def format_validation_error(exc: ValidationError) -> str:
    """One clause per bad field, e.g. "path: Field required; offset: must be >= 1"."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(loc) for loc in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def describe_os_error(exc: OSError) -> str:
    """`strerror` plus the file name, without Python's "[Errno N]" prefix."""
    message = exc.strerror or str(exc)
    return f"{message}: {exc.filename}" if exc.filename else message


# --- paths ---------------------------------------------------------------------------


def moved_workspace(workspace: Path) -> str | None:
    """Why tools may not run in `workspace`, or None: a session's workspace is stored as a
    real path, so one that now resolves elsewhere had a symlink put in its path after it
    was checked (by anyone who can write to a folder above it: a tool of another session
    in the same area). Tools would follow it out of what the session was allowed."""
    try:
        real = workspace.resolve(strict=True)
    except (OSError, RuntimeError) as err:
        return f"the workspace {workspace} cannot be resolved ({err})"
    if real != workspace:
        return (
            f"the workspace {workspace} now leads to {real} (a symlink was put in its "
            "path): tools do not run there"
        )
    return None


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve `path` (relative to the workspace, or absolute) to a real path inside it.

    Symlinks are resolved before the check, so a link pointing outside the workspace is
    rejected just like `..`. The path need not exist.
    """
    root = workspace.resolve()
    try:
        candidate = Path(path)
        resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        # RuntimeError: symlink loop; ValueError: embedded NUL byte.
        raise ToolInputError(f"invalid path '{path}': {exc}") from None
    if not resolved.is_relative_to(root):
        raise ToolInputError(f"path '{path}' is outside the workspace")
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """`path` relative to the workspace in POSIX form ("." for the workspace itself)."""
    root = workspace.resolve()
    try:
        relative = path.relative_to(root)
    except ValueError:
        return path.as_posix()
    return relative.as_posix() or "."


# --- output truncation ---------------------------------------------------------------


@dataclass(frozen=True)
class Truncation:
    """Text cut to a line and byte budget, with what was cut."""

    text: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    output_lines: int
    partial_line: bool = False
    """A single line was larger than the byte budget and only part of it is kept."""


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a trailing newline ends the last line; it does not start a new one
    return lines


def _cut_utf8(line: str, max_bytes: int, *, keep_end: bool) -> str:
    data = line.encode()
    piece = data[-max_bytes:] if keep_end else data[:max_bytes]
    # Dropping a split multi-byte character is better than emitting a replacement char.
    return piece.decode(errors="ignore")


def _truncate(text: str, max_lines: int, max_bytes: int, *, from_end: bool) -> Truncation:
    lines = _split_lines(text)
    total = len(lines)
    ordered = reversed(lines) if from_end else iter(lines)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] | None = None
    partial = False
    for line in ordered:
        if len(kept) >= max_lines:
            by = "lines"
            break
        size = len(line.encode()) + (1 if kept else 0)
        if used + size > max_bytes:
            by = "bytes"
            if not kept:
                kept.append(_cut_utf8(line, max_bytes, keep_end=from_end))
                partial = True
            break
        kept.append(line)
        used += size
    if from_end:
        kept.reverse()
    if by is None:
        return Truncation(text, False, None, total, total)
    return Truncation("\n".join(kept), True, by, total, len(kept), partial)


def truncate_head(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the first whole lines that fit both budgets (for file contents, search results)."""
    return _truncate(text, max_lines, max_bytes, from_end=False)


def truncate_tail(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the last whole lines that fit both budgets (for command output: errors come last)."""
    return _truncate(text, max_lines, max_bytes, from_end=True)


def format_size(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.0f} KB"
    return f"{n_bytes / (1024 * 1024):.1f} MB"
