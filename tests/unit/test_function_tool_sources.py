"""Where a function tool's schema comes from besides the signature: a docstring's
parameter section (Google, numpy, reST); methods (bound, or marked in a class body);
a context typed with the application's deps (`ToolContext[Deps]`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

import duragent
from duragent import Plugin, PluginError, ToolContext, ToolRegistry, tool
from duragent.client.plugins import Plugins


@tool
def google(city: str, days: Annotated[int, Field(ge=1)] = 3, units: str = "metric") -> str:
    """The weather forecast for a city.

    Uses the national weather service.

    Args:
        city: The city's name,
            as on a map.
        days (int): How many days ahead.
        units: Ignored here: the Field's description wins.

    Returns:
        The forecast, one line a day.
    """
    return city


@tool
def numpy_style(city: str, days: int = 3) -> str:
    """The weather forecast for a city.

    Parameters
    ----------
    city : str
        The city's name.
    days : int
        How many days ahead.
    """
    return city


@tool
def rest_style(city: str) -> str:
    """The weather forecast for a city.

    :param city: The city's name.
    """
    return city


@tool
def explicit(
    city: Annotated[str, Field(description="From the Field")],
    days: int = Field(3, description="From the default's Field"),
) -> str:
    """Explicit descriptions win.

    Args:
        city: From the docstring.
        days: From the docstring.
    """
    return city


@tool
def plain(city: str) -> str:
    """Say hello.

    Examples:
        plain("Bern")
    """
    return city


def properties(made: duragent.Tool[Any]) -> dict[str, Any]:
    props: dict[str, Any] = made.input_schema()["properties"]
    return props


def test_a_google_docstring_describes_the_parameters_and_leaves_the_description() -> None:
    assert google.description == (
        "The weather forecast for a city.\n\nUses the national weather service."
    )
    props = properties(google)
    assert props["city"] == {"type": "string", "description": "The city's name,\nas on a map."}
    assert props["days"] == {
        "type": "integer",
        "minimum": 1,
        "default": 3,
        "description": "How many days ahead.",
    }
    assert google.input_schema()["required"] == ["city"]


def test_numpy_and_rest_docstrings_describe_the_parameters_too() -> None:
    assert numpy_style.description == "The weather forecast for a city."
    assert properties(numpy_style)["city"]["description"] == "The city's name."
    assert properties(numpy_style)["days"]["description"] == "How many days ahead."
    assert rest_style.description == "The weather forecast for a city."
    assert properties(rest_style)["city"]["description"] == "The city's name."


def test_an_explicit_field_description_wins_and_a_docstring_without_parameters_stays() -> None:
    assert explicit.description == "Explicit descriptions win."
    assert properties(explicit)["city"]["description"] == "From the Field"
    assert properties(explicit)["days"]["description"] == "From the default's Field"
    assert plain.description == 'Say hello.\n\nExamples:\n    plain("Bern")'
    assert "description" not in properties(plain)["city"]


@dataclass
class Shop:
    """An application's dependencies, as a run gives them to its tools."""

    name: str


class Inventory:
    def __init__(self, stock: dict[str, int]) -> None:
        self.stock = stock

    @tool(retry_safe=True)
    def lookup(self, sku: str) -> int:
        """How many of an item are in stock.

        Args:
            sku: The item's stock-keeping unit.
        """
        return self.stock[sku]

    @tool
    async def restock(self, ctx: ToolContext[Shop], sku: str, count: int) -> str:
        """Add items to the stock."""
        self.stock[sku] = self.stock.get(sku, 0) + count
        return f"{ctx.deps.name}: {sku} {self.stock[sku]}"

    def unmarked(self, sku: str) -> int:
        """Not a tool until made one."""
        return -self.stock[sku]


def context(tmp_path: Path, deps: Shop | None = None) -> ToolContext[Any]:
    return ToolContext(tmp_path, session_id="s1", call_id="toolu_1", deps=deps)


async def test_methods_marked_in_a_class_are_tools_of_each_instance(tmp_path: Path) -> None:
    north, south = Inventory({"A-1": 4}), Inventory({"A-1": 9})
    registry = ToolRegistry([north.lookup, north.restock])
    specs = {spec["name"]: spec for spec in registry.api_specs()}
    assert specs["lookup"]["input_schema"] == {
        "type": "object",
        "properties": {"sku": {"type": "string", "description": "The item's stock-keeping unit."}},
        "required": ["sku"],
        "additionalProperties": False,
    }
    assert set(specs["restock"]["input_schema"]["properties"]) == {"sku", "count"}
    assert north.lookup.traits.retry_safe
    found = await registry.run("lookup", {"sku": "A-1"}, context(tmp_path))
    assert found.content[0].text == "4"  # type: ignore[union-attr]
    done = await registry.run(
        "restock", {"sku": "A-1", "count": 2}, context(tmp_path, Shop("north"))
    )
    assert done.content[0].text == "north: A-1 6"  # type: ignore[union-attr]
    # Each instance's, called as methods are; the class's own takes the instance.
    assert (north.lookup("A-1"), south.lookup("A-1")) == (6, 9)
    assert Inventory.lookup(south, "A-1") == 9
    assert [made.name for made in duragent.tools_of(south)] == ["lookup", "restock"]
    assert duragent.tools_of(south)[0]("A-1") == 9


async def test_a_bound_method_is_a_tool_and_the_class_s_own_is_refused(tmp_path: Path) -> None:
    inventory = Inventory({"B-2": 1})
    unmarked = tool(inventory.unmarked)
    assert list(properties(unmarked)) == ["sku"]
    result = await ToolRegistry([unmarked]).run("unmarked", {"sku": "B-2"}, context(tmp_path))
    assert result.content[0].text == "-1"  # type: ignore[union-attr]
    plugin = Plugin(name="shop", tools=[inventory.lookup, inventory.unmarked])
    assert Plugins((plugin,)).tool_names() == ["lookup", "unmarked"]
    with pytest.raises(PluginError, match=r"'lookup' is a method of Inventory: give an instance"):
        Plugins((Plugin(name="shop", tools=[Inventory.lookup]),)).tools()


def test_a_context_typed_with_deps_is_the_context() -> None:
    def with_deps(ctx: ToolContext[Shop], sku: str) -> str:
        """Use the deps."""
        return ctx.deps.name + sku

    made = tool(with_deps)
    assert made.takes_context
    assert list(properties(made)) == ["sku"]
    assert ToolContext(Path("."), deps=Shop("x")).deps == Shop("x")
    assert ToolContext(Path(".")).deps is None
