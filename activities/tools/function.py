"""Tools written as plain functions: `@duragent.tool`.

The function's name is the tool's, its docstring the description, its parameters the
input schema (through pydantic, so `Annotated[int, Field(ge=1, description=...)]` and
pydantic models as arguments work as they do anywhere else). An optional first parameter
typed `ToolContext` receives the call's context. What it returns becomes the result: a
`str` as text, a pydantic model as JSON, a `ToolResult` as it is; what it raises becomes
an error result the model reads.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from duragent.activities.tools.contract import Tool, ToolContext, ToolInputError
from duragent.domain.tools import TOOL_NAME, ToolResult, ToolTraits

logger = logging.getLogger(__name__)

ToolFunction = Callable[..., Any]


class FunctionTool(Tool[BaseModel]):
    """A tool made from a function by `tool()`. Each function gets a subclass of its own
    (its name, schema and traits are class attributes, as for any `Tool`)."""

    function: ClassVar[ToolFunction]
    takes_context: ClassVar[bool]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function itself, so a decorated function stays usable as one."""
        return type(self).function(*args, **kwargs)

    async def execute(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        cls = type(self)
        # Attributes, not model_dump(): a pydantic model argument arrives as that model.
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        positional = (ctx,) if cls.takes_context else ()
        try:
            if inspect.iscoroutinefunction(cls.function):
                returned = await cls.function(*positional, **kwargs)
            else:
                returned = await _in_thread(cls.function, ctx, *positional, **kwargs)
        except (ToolInputError, asyncio.CancelledError):
            raise
        except Exception as exc:
            # Raising is how a function tool reports a failure: the model reads it, and
            # it is no bug of the harness's, so no traceback in the worker's log.
            logger.info("tool %s raised %s: %s", cls.name, type(exc).__name__, exc)
            return ToolResult.error(f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
        return to_result(returned)


async def _in_thread(function: ToolFunction, ctx: ToolContext, *args: Any, **kwargs: Any) -> Any:
    """Run a sync function off the event loop. Cancelled, it sets `ctx.cancelled` (a thread
    cannot be stopped from outside) and hands the cancellation on at once."""
    try:
        return await asyncio.to_thread(function, *args, **kwargs)
    except asyncio.CancelledError:
        ctx.cancel()
        raise


def to_result(returned: object) -> ToolResult:
    """What a function tool returned, as the result the model reads."""
    if isinstance(returned, ToolResult):
        return returned
    if isinstance(returned, str):
        return ToolResult.text(returned)
    if isinstance(returned, BaseModel):
        return ToolResult.text(returned.model_dump_json())
    if returned is None:
        return ToolResult.text("(no output)")
    try:
        return ToolResult.text(json.dumps(returned, default=str))
    except (TypeError, ValueError):
        return ToolResult.text(str(returned))


@overload
def tool(function: ToolFunction, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Make a tool of a function: `@tool`, or `@tool(retry_safe=True)`.

    - `name`: the tool's name (default: the function's), within `[a-zA-Z0-9_-]{1,64}`.
    - `description`: for the model (default: the docstring).
    - `retry_safe`: running it again after a crash does no harm (it only reads). A call
      that is not retry-safe and was cut short by a crash is reported to the model as
      interrupted, never run again.
    - `exclusive`: its calls run alone, never beside other calls of the same turn.
    """

    def make(fn: ToolFunction) -> FunctionTool:
        return function_tool(
            fn, name=name, description=description, retry_safe=retry_safe, exclusive=exclusive
        )

    return make(function) if function is not None else make


def function_tool(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> FunctionTool:
    """The `FunctionTool` of `fn` (what `@tool` makes); `TypeError` naming what is wrong."""
    if not callable(fn):
        raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    if not TOOL_NAME.fullmatch(tool_name):
        raise TypeError(
            f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-' (give name=...)"
        )
    text = description if description is not None else inspect.getdoc(fn)
    if not text:
        raise TypeError(f"tool {tool_name!r} needs a description: give it a docstring")
    args_model, takes_context = _arguments(fn, tool_name)
    traits = ToolTraits(retry_safe=retry_safe, execution="sequential" if exclusive else "parallel")
    cls = type(
        f"{tool_name}_tool",
        (FunctionTool,),
        {
            "name": tool_name,
            "description": text,
            "args_model": args_model,
            "traits": traits,
            "function": staticmethod(fn),
            "takes_context": takes_context,
            "__doc__": text,
            "__module__": getattr(fn, "__module__", __name__),
        },
    )
    made: FunctionTool = cls()
    return made


def _arguments(fn: ToolFunction, tool_name: str) -> tuple[type[BaseModel], bool]:
    """The arguments' model (extra keys refused, as for the built-in tools), and whether
    the first parameter takes the `ToolContext`."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(f"tool {tool_name!r}: cannot resolve a type hint: {exc}") from None
    parameters = list(inspect.signature(fn).parameters.values())
    takes_context = bool(parameters) and hints.get(parameters[0].name) is ToolContext
    if takes_context:
        parameters = parameters[1:]
    fields: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *{parameter.name} cannot be an argument")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {tool_name!r}: {parameter.name} must not be positional-only")
        if parameter.name not in hints:
            raise TypeError(f"tool {tool_name!r}: argument {parameter.name!r} needs a type hint")
        if hints[parameter.name] is ToolContext:
            raise TypeError(f"tool {tool_name!r}: the ToolContext must be the first parameter")
        default = ... if parameter.default is parameter.empty else parameter.default
        if isinstance(default, FieldInfo):
            fields[parameter.name] = (hints[parameter.name], default)
        else:
            fields[parameter.name] = (hints[parameter.name], Field(default))
    model: type[BaseModel] = create_model(
        f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model, takes_context
