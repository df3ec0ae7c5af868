"""Tools written as plain functions: `@duragent.tool`.

The function's name is the tool's, its docstring the description, its parameters the
input schema (through pydantic, so `Annotated[int, Field(ge=1, description=...)]` and
pydantic models as arguments work as they do anywhere else). A docstring's parameter
section (Google's `Args:`, numpy's `Parameters`, reST's `:param x:`) describes the
parameters in the schema and leaves the description. An optional first parameter typed
`ToolContext` (or `ToolContext[Deps]`) receives the call's context. What it returns
becomes the result: a `str` as text, a pydantic model as JSON, a `ToolResult` as it is;
what it raises becomes an error result the model reads.

A method is a tool too: `tool(obj.method)`, or `@tool` on the method in its class body,
which makes each instance's `obj.method` a tool bound to that instance (`self` is no
argument of the schema); `tools_of(obj)` collects an object's.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable
from typing import (
    Annotated,
    Any,
    ClassVar,
    Concatenate,
    Generic,
    Protocol,
    Self,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from typing_extensions import ParamSpec, TypeVar

from duragent.activities.tools.contract import Tool, ToolContext, ToolInputError
from duragent.domain.tools import TOOL_NAME, ToolResult, ToolTraits

logger = logging.getLogger(__name__)

ToolFunction = Callable[..., Any]

P = ParamSpec("P", default=...)
"""The function's parameters: calling the tool type-checks as calling the function."""
R = TypeVar("R", covariant=True, default=Any)
"""What the function returns."""
_P = ParamSpec("_P")
_R = TypeVar("_R")
_Owner = TypeVar("_Owner")


class FunctionTool(Tool[BaseModel], Generic[P, R]):
    """A tool made from a function by `tool()`. Each function gets a subclass of its own
    (its name, schema and traits are class attributes, as for any `Tool`).

    `FunctionTool[P, R]` is typed as the function (parameters `P`, result `R`), so a call
    of the decorated function type-checks as a call of the function does. Made of a method
    in a class body, it is a descriptor: `obj.method` is the tool bound to `obj`.
    """

    function: ClassVar[ToolFunction]
    takes_context: ClassVar[bool]
    deps_adapter: ClassVar[TypeAdapter[Any] | None] = None
    """Validates the run's deps (as they travel, in JSON form) into the type the
    function's `ToolContext[Deps]` names; None: they are passed as they come."""
    is_method: ClassVar[bool] = False
    """Made of a method in a class body: its first parameter is `self`, and only an
    instance's (`obj.method`) can run."""
    _instance: object | None = None
    """The object a method's tool is bound to (`obj` of `obj.method`)."""

    @property
    def unbound(self) -> bool:
        """A method's tool taken from its class, not from an instance: it cannot run."""
        return type(self).is_method and self._instance is None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function itself, so a decorated function stays usable as one."""
        if self._instance is not None:
            return cast(R, type(self).function(self._instance, *args, **kwargs))
        return cast(R, type(self).function(*args, **kwargs))

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(
        self: FunctionTool[Concatenate[_Owner, _P], _R],
        instance: _Owner,
        owner: type[Any] | None = None,
    ) -> FunctionTool[_P, _R]: ...

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        """`obj.method` of a method's tool: the tool bound to `obj`, as a function's
        `obj.method` is a bound method (a new one each time, sharing the class)."""
        if instance is None or not type(self).is_method or self._instance is not None:
            return self
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound._instance = instance
        return bound

    async def execute(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        cls = type(self)
        # Attributes, not model_dump(): a pydantic model argument arrives as that model.
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if cls.deps_adapter is not None and ctx.deps is not None:
            try:
                ctx.deps = cls.deps_adapter.validate_python(ctx.deps)
            except ValidationError as exc:  # the application's, not the model's, mistake
                logger.warning("tool %s: the run's deps are refused: %s", cls.name, exc)
                return ToolResult.error(f"Tool '{cls.name}' was not run: its deps are refused")
        positional: tuple[Any, ...] = (ctx,) if cls.takes_context else ()
        if cls.is_method:
            if self.unbound:
                raise TypeError(unbound_method(self))
            positional = (self._instance, *positional)
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


def unbound_method(made: FunctionTool[..., Any]) -> str:
    """What is wrong with running a method's tool taken from its class, not an instance."""
    owner = type(made).function.__qualname__.rpartition(".")[0] or "its class"
    return (
        f"tool {made.name!r} is a method of {owner}: give an instance's "
        f"(obj.{type(made).function.__name__}), not the class's"
    )


def tools_of(obj: object) -> list[FunctionTool[..., Any]]:
    """The tools `obj`'s class (and its bases) made of methods with `@tool`, bound to `obj`,
    in the order the class defines them: `Plugin(tools=tools_of(inventory))`."""
    found: dict[str, FunctionTool[..., Any]] = {}
    for klass in reversed(type(obj).__mro__):
        for attr, value in vars(klass).items():
            if isinstance(value, FunctionTool) and type(value).is_method:
                found[attr] = getattr(obj, attr)
            elif attr in found:  # overridden by a plain attribute
                del found[attr]
    return list(found.values())


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


class ToolDecorator(Protocol):
    """What `tool(...)` with options returns: the decorator keeping the function's type."""

    def __call__(self, function: Callable[_P, _R], /) -> FunctionTool[_P, _R]: ...


@overload
def tool(function: Callable[_P, _R], /) -> FunctionTool[_P, _R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> ToolDecorator: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> FunctionTool[..., Any] | ToolDecorator:
    """Make a tool of a function or method: `@tool`, or `@tool(retry_safe=True)`.

    - `name`: the tool's name (default: the function's), within `[a-zA-Z0-9_-]{1,64}`.
    - `description`: for the model (default: the docstring, less its parameter section,
      which describes the parameters in the input schema).
    - `retry_safe`: running it again after a crash does no harm (it only reads). A call
      that is not retry-safe and was cut short by a crash is reported to the model as
      interrupted, never run again.
    - `exclusive`: its calls run alone, never beside other calls of the same turn.
    """

    def make(fn: Callable[_P, _R]) -> FunctionTool[_P, _R]:
        return function_tool(
            fn, name=name, description=description, retry_safe=retry_safe, exclusive=exclusive
        )

    return make(function) if function is not None else make


def function_tool(
    fn: Callable[_P, _R],
    *,
    name: str | None = None,
    description: str | None = None,
    retry_safe: bool = False,
    exclusive: bool = False,
) -> FunctionTool[_P, _R]:
    """The `FunctionTool` of `fn` (what `@tool` makes); `TypeError` naming what is wrong."""
    if not callable(fn):
        raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    if not TOOL_NAME.fullmatch(tool_name):
        raise TypeError(
            f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-' (give name=...)"
        )
    docstring = inspect.getdoc(fn) or ""
    summary, parameter_docs = _parse_docstring(docstring)
    text = description if description is not None else summary
    if not text:
        raise TypeError(f"tool {tool_name!r} needs a description: give it a docstring")
    args_model, takes_context, is_method = _arguments(fn, tool_name, parameter_docs)
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
            "deps_adapter": _deps_adapter(fn) if takes_context else None,
            "is_method": is_method,
            "__doc__": text,
            "__module__": getattr(fn, "__module__", __name__),
        },
    )
    made: FunctionTool[_P, _R] = cls()
    return made


def _parse_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """The description and each parameter's, from a docstring with a parameter section
    (Google's `Args:`, numpy's `Parameters`, reST's `:param name:`): the description is
    then its summary and body alone, what the model needs of the rest being in the schema.
    A docstring without one is the description as it is."""
    try:
        parsed = docstring_parser.parse(docstring)
    except docstring_parser.ParseError:
        return docstring, {}
    parameters = {
        param.arg_name: param.description
        for param in parsed.params
        if param.args[0] in ("param", "parameter", "arg", "argument", "key", "keyword")
        and param.description
    }
    if not parameters:
        return docstring, {}
    parts = (parsed.short_description, parsed.long_description)
    return "\n\n".join(part.strip() for part in parts if part and part.strip()), parameters


def _deps_adapter(fn: ToolFunction) -> TypeAdapter[Any] | None:
    """The adapter of the deps type the function's `ToolContext[Deps]` names (None for a
    bare `ToolContext`, or `ToolContext[Any]`)."""
    hints = get_type_hints(fn, include_extras=True)
    parameters = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
    named = get_args(hints.get(parameters[0].name)) if parameters else ()
    if not named or named[0] is Any:
        return None
    return TypeAdapter(named[0])


def _is_context(hint: object) -> bool:
    """`ToolContext`, or `ToolContext[Deps]`."""
    return hint is ToolContext or get_origin(hint) is ToolContext


def _described(hint: Any, description: str) -> Any:
    """`hint` described by the docstring, under what it says itself: a description given
    in `Annotated[..., Field(description=...)]` (or a `Field` default) wins."""
    if get_origin(hint) is Annotated:
        base, *metadata = get_args(hint)
        # Annotated's later metadata wins, so the docstring's goes first.
        return Annotated[(base, Field(description=description), *metadata)]
    return Annotated[hint, Field(description=description)]


def _arguments(
    fn: ToolFunction, tool_name: str, parameter_docs: dict[str, str]
) -> tuple[type[BaseModel], bool, bool]:
    """The arguments' model (extra keys refused, as for the built-in tools), whether the
    first parameter takes the `ToolContext`, and whether `fn` is a method in its class
    body (its first parameter `self`, which is no argument)."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(f"tool {tool_name!r}: cannot resolve a type hint: {exc}") from None
    parameters = list(inspect.signature(fn).parameters.values())
    is_method = bool(parameters) and parameters[0].name == "self"
    if is_method:
        parameters = parameters[1:]
    takes_context = bool(parameters) and _is_context(hints.get(parameters[0].name))
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
        hint = hints[parameter.name]
        if _is_context(hint):
            raise TypeError(f"tool {tool_name!r}: the ToolContext must be the first parameter")
        if parameter.name in parameter_docs:
            hint = _described(hint, parameter_docs[parameter.name])
        default = ... if parameter.default is parameter.empty else parameter.default
        if isinstance(default, FieldInfo):
            fields[parameter.name] = (hint, default)
        else:
            fields[parameter.name] = (hint, Field(default))
    model: type[BaseModel] = create_model(
        f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model, takes_context, is_method
