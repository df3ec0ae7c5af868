"""The tools of a worker, by name (`ToolRegistry`): which a session is offered, which a
call may run, and running one so that model mistakes and tool failures become error
results the model reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from duragent.activities.tools.contract import Tool, ToolContext, ToolInputError, ToolSource
from duragent.domain.tools import ToolResult, ToolSpec, ToolTraits

logger = logging.getLogger(__name__)


class ToolRegistry:
    """The tools available to a session, by name, in registration order: the tools
    registered here, then each source's.

    Where a method takes `sources`, it names the sources a session uses (None: all);
    a source's tools are neither offered nor run for a session that does not use it.
    Tools named in `opt_in` are offered only to sessions whose active tools name them.
    """

    def __init__(
        self,
        tools: Iterable[Tool[Any]] = (),
        sources: Iterable[ToolSource] = (),
        *,
        opt_in: Iterable[str] = (),
        opt_in_sources: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._sources: dict[str, ToolSource] = {}
        self._opt_in = set(opt_in)
        self._opt_in_sources = set(opt_in_sources)
        """Sources used only by sessions that name them (an agent's MCP servers)."""
        for tool in tools:
            self.register(tool)
        for source in sources:
            self.add_source(source)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools or self._source_of(tool.name) is not None:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        if tool.opt_in:
            self._opt_in.add(tool.name)

    def add_source(self, source: ToolSource) -> None:
        if source.name in self._sources:
            raise ValueError(f"tool source {source.name!r} is already registered")
        taken = [name for name in self._tools if source.owns(name)]
        if taken:
            raise ValueError(f"tool source {source.name!r} would own tools {taken}")
        self._sources[source.name] = source

    @property
    def sources(self) -> list[ToolSource]:
        return list(self._sources.values())

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self, sources: Sequence[str] | None = None) -> list[str]:
        return [
            *self._tools,
            *(name for source in self._chosen(sources) for name in source.names()),
        ]

    def traits_of(self, name: str) -> ToolTraits:
        """The tool's traits, or `ToolTraits(known=False)` for a name that is not registered."""
        tool = self._tools.get(name)
        if tool is not None:
            return tool.traits
        source = self._source_of(name)
        return source.traits(name) if source is not None else ToolTraits(known=False)

    async def refresh(self, sources: Sequence[str] | None = None) -> None:
        """List the chosen sources' tools anew, all at once (a turn does this once)."""
        await asyncio.gather(*(source.refresh() for source in self._chosen(sources)))

    def refusal(
        self, name: str, active: Sequence[str] | None, sources: Sequence[str] | None = None
    ) -> str | None:
        """Why a call to `name` must not run in a turn whose active tools are `active`
        (None: every tool), or None if it may. Hiding a tool from the model is not enough:
        a model may still call it (from an earlier turn, a prompt, a guess)."""
        source = self._source_of(name)
        if source is not None and not self._uses(source, sources):
            used = ", ".join(p.name for p in self._chosen(sources)) or "none"
            return (
                f"Tool '{name}' is from {source.kind} '{source.name}', which this session "
                f"does not use, so the call was not run. It uses: {used}."
            )
        allowed = (name not in self._opt_in) if active is None else _named(name, active)
        if allowed:
            return None
        offered = ", ".join(self._offered(active, sources)) or "none"
        return (
            f"Tool '{name}' is not active in this session, so the call was not run. "
            f"Active tools: {offered}."
        )

    def api_specs(
        self, active: Sequence[str] | None = None, sources: Sequence[str] | None = None
    ) -> list[ToolSpec]:
        """`{"name", "description", "input_schema"}` for each active tool, in registry order.

        `None` means every tool. Active names that are not registered are ignored, so a
        session configured with a tool this worker lacks still gets the others.
        """
        wanted = set(self._offered(active, sources)) if active is None else active
        specs: list[ToolSpec] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema()}
            for t in self._tools.values()
            if _named(t.name, wanted)
        ]
        for source in self._chosen(sources):
            specs.extend(source.api_specs())
        return [spec for spec in specs if _named(spec["name"], wanted)]

    async def run(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Parse the arguments and execute the tool, turning model mistakes into error results.

        Never raises for unknown tools, bad arguments or failures inside the tool;
        `asyncio.CancelledError` (a `BaseException`) propagates once the tool has cleaned up.
        """
        tool = self._tools.get(name)
        source = self._source_of(name) if tool is None else None
        if source is not None:
            try:
                return await source.run(name, raw_args, ctx)
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
        """Close every source (the worker is stopping)."""
        await asyncio.gather(*(source.aclose() for source in self._sources.values()))

    def offered(self, active: Sequence[str] | None) -> list[str]:
        """The registered tools a turn whose active tools are `active` offers (None: all
        but the opt-in ones), every source's included."""
        return self._offered(active, None)

    def _offered(self, active: Sequence[str] | None, sources: Sequence[str] | None) -> list[str]:
        """The tools a turn offers: those `active` names, or (None) all but the opt-in ones."""
        names = self.names(sources)
        if active is None:
            return [name for name in names if name not in self._opt_in]
        return [name for name in names if _named(name, active)]

    def _chosen(self, sources: Sequence[str] | None) -> list[ToolSource]:
        return [p for p in self._sources.values() if self._uses(p, sources)]

    def _uses(self, source: ToolSource, sources: Sequence[str] | None) -> bool:
        """Whether a session using `sources` (None: all but the opt-in ones) uses `source`."""
        if sources is None:
            return source.name not in self._opt_in_sources
        return source.name in sources

    def _source_of(self, name: str) -> ToolSource | None:
        return next((p for p in self._sources.values() if p.owns(name)), None)


def _named(name: str, active: Collection[str]) -> bool:
    """Whether active tool names `active` name `name`: as it is, or as one of a tool
    source's tools, `<server>__*` (an agent's MCP servers, listed only at run time)."""
    if name in active:
        return True
    server, sep, _ = name.partition("__")
    return bool(sep) and f"{server}__*" in active


def describe_os_error(exc: OSError) -> str:
    """`strerror` plus the file name, without Python's "[Errno N]" prefix."""
    message = exc.strerror or str(exc)
    return f"{message}: {exc.filename}" if exc.filename else message
