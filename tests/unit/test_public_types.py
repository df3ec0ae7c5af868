"""Every type a public call of the client takes or returns is importable from `duragent`:
a user annotating `result: duragent.RunResult` or checking `isinstance(entry,
duragent.MessageEntry)` needs no module path that may change.

The walk reads what the code says (annotations), not a list kept by hand: the public
methods of `DuragentClient` and of the parts it exposes (`client.sessions`, `client.runs`,
...), then the fields of every pydantic model and dataclass found, down to the leaves.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

import duragent
from duragent.client.api import DuragentClient
from duragent.client.sync_client import SyncClient

NAMED = (
    "RunResult",
    "SessionRecord",
    "RunRecord",
    "StoredEvent",
    "QueueItem",
    "SessionEntry",
    "MessageEntry",
    "AgentMessage",
    "SessionConfig",
    "ThinkingLevel",
    "Usage",
)
"""Names users reach for first (the issue that asked for this listed them)."""


def parts() -> dict[str, type]:
    """The parts a client exposes (`client.sessions`: `Sessions`, ...), but the two that
    serve the others (`client.workflows`, `client.writes`: see client/api.py); and those
    of its blocking view (`client.sync.sessions`: `SyncSessions`, ...)."""
    found: dict[str, type] = {}
    for owner, prefix in ((DuragentClient, ""), (SyncClient, "sync.")):
        source = inspect.getsource(owner.__init__)
        module = sys.modules[owner.__module__]
        for attr, cls in re.findall(r"self\.(\w+) = (\w+)\((?:self|client)\b", source):
            if attr not in ("workflows", "writes"):
                found[prefix + attr] = getattr(module, cls)
    return found


def public_functions(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function) or inspect.ismethod(function):
            yield name, function


def public_names() -> dict[str, Any]:
    """`duragent`'s public names: a name an annotation imports for type checkers only
    resolves through them (and must: a user's type checker resolves it so)."""
    return {name: getattr(duragent, name) for name in duragent.__all__}


UNRESOLVED: list[str] = []


def hints(owner: Any) -> dict[str, Any]:
    # localns: a class's bases keep their own modules' names (globalns would replace them).
    try:
        return typing.get_type_hints(owner, localns=public_names(), include_extras=True)
    except NameError as exc:  # imported for type checkers only, and not exported
        UNRESOLVED.append(f"{exc.name} (in {owner.__qualname__})")
        return {}


def classes_in(annotation: Any) -> Iterator[type]:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return
    if origin is not None:
        if isinstance(origin, type):
            yield origin
        for arg in typing.get_args(annotation):  # Annotated's metadata yields nothing
            yield from classes_in(arg)
        return
    if isinstance(annotation, type):
        yield annotation


def ours(cls: type) -> bool:
    # The workflow class is a type argument of `RunHandle.workflow` (Temporal's own
    # handle, for Temporal-level use): not a value users build or read.
    return cls.__module__.startswith("duragent.") and not cls.__module__.startswith(
        "duragent.workflows"
    )


def aliases_in(owner: Any, raw: dict[str, Any]) -> Iterator[str]:
    """The module-level type aliases (`ThinkingLevel`, `SessionEntry`) a raw annotation
    names: get_type_hints expands them, so they are read from the text. Those of calls
    only: a value's fields' `Literal`s take plain strings, and need no name of their own."""
    names = {**vars(sys.modules[owner.__module__]), **public_names()}
    for text in raw.values():
        for word in re.findall(r"[A-Za-z_]\w*", str(text)):
            value = names.get(word)
            is_alias = typing.get_origin(value) in (typing.Literal, typing.Annotated)
            if is_alias and not hasattr(builtins, word) and not hasattr(typing, word):
                yield word


def public_types() -> tuple[dict[type, str], dict[str, str]]:
    """Each class a public call mentions, and each class in those classes' fields, down to
    the leaves; each alias a call's signature names; with the first place that does."""
    classes: dict[type, str] = {}
    aliases: dict[str, str] = {}
    skip = set(parts().values()) | {DuragentClient}

    def visit(cls: type, where: str) -> None:
        if cls in classes or cls in skip or not ours(cls):
            return
        classes[cls] = where
        if issubclass(cls, BaseModel) or dataclasses.is_dataclass(cls):
            for name, annotation in hints(cls).items():
                for found in classes_in(annotation):
                    visit(found, f"{cls.__name__}.{name}")
        elif cls.__module__.startswith("duragent.client."):
            walk(cls, cls.__name__)  # a handle the client gives (`RunHandle`): its calls too

    def walk(cls: type, where: str) -> None:
        for name, function in public_functions(cls):
            raw = getattr(function, "__annotations__", {})
            for alias in aliases_in(function, raw):
                aliases.setdefault(alias, f"{where}.{name}")
            for annotation in hints(function).values():
                for found in classes_in(annotation):
                    visit(found, f"{where}.{name}")

    walk(DuragentClient, "client")
    for attr, part in parts().items():
        walk(part, f"client.{attr}")
    return classes, aliases


def test_every_type_a_public_call_takes_or_returns_is_exported() -> None:
    classes, aliases = public_types()
    assert len(classes) > 40  # the walk reached the values, not just the parts
    missing = [
        f"{cls.__module__}.{cls.__name__} (in {where})"
        for cls, where in classes.items()
        if getattr(duragent, cls.__name__, None) is not cls
    ]
    missing += [
        f"alias {name} (in {where})"
        for name, where in aliases.items()
        if not hasattr(duragent, name)
    ]
    missing += UNRESOLVED
    assert not missing, "not exported from duragent:\n" + "\n".join(sorted(missing))
    exported = set(duragent.__all__)
    assert {cls.__name__ for cls in classes} <= exported
    assert set(aliases) <= exported
    assert set(NAMED) <= exported


def test_the_exports_are_lazy_and_typed() -> None:
    """`import duragent` imports no part of the package (the CLI starts fast; Temporal's
    sandbox re-imports it), and the type checker's block names what `_WHERE` does."""
    import subprocess

    listing = "sorted(m for m in sys.modules if m.startswith('duragent.'))"
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, duragent; print({listing})"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"
    where: dict[str, str] = duragent._WHERE
    assert set(where) | {"__version__"} == set(duragent.__all__)
    block = inspect.getsource(duragent).split("if TYPE_CHECKING:", 1)[1].split("\n_WHERE", 1)[0]
    for name, module in where.items():
        assert re.search(rf"from {re.escape(module)} import \([^)]*\b{name}\b", block) or re.search(
            rf"from {re.escape(module)} import [^(\n]*\b{name}\b", block
        ), f"{name} is missing from the TYPE_CHECKING imports of {module}"
    for name in NAMED:
        assert getattr(duragent, name) is not None
