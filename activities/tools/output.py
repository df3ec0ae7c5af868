"""An agent's output tool: how the model gives a run's structured output.

The tool's parameters are the output type's JSON schema (a pydantic model's own fields;
any other type, a dataclass, a TypedDict, a scalar or a union, as one `output` field).
A call the type refuses is answered with the validation error, which the model reads
and corrects (the workflow bounds how often: `workflows.output`); a valid one is stored
as the call's result details (`domain.agents.OUTPUT_KEY`) in the output type's JSON
form, and ends the run. Every provider runs it the same way, with the other tools
still available until the model is ready to answer.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.domain.agents import OUTPUT_KEY
from duragent.domain.tools import ToolResult, ToolTraits

RECORDED = "Final result recorded."
"""What the model reads after a valid output (the run ends there)."""


class OutputTool(Tool[BaseModel]):
    """The output tool of one agent; each agent gets a subclass (`output_tool`)."""

    opt_in: ClassVar[bool] = True  # offered only to the agent's sessions
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=True)
    adapter: ClassVar[TypeAdapter[Any]]
    wrapped: ClassVar[bool]
    """The arguments hold the output as their `output` field (not a model's own fields)."""

    async def execute(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        del ctx
        cls = type(self)
        value = args.__dict__["output"] if cls.wrapped else args
        output = cls.adapter.dump_python(value, mode="json")
        return ToolResult(
            content=ToolResult.text(RECORDED).content,
            details={OUTPUT_KEY: output},
            terminate=True,
        )


def output_tool(name: str, output_type: Any, type_name: str) -> OutputTool:
    """The output tool `name` for `output_type`: its arguments validate as that type."""
    wrapped = not (isinstance(output_type, type) and issubclass(output_type, BaseModel))
    args_model: type[BaseModel] = (
        create_model(
            f"{name}_args", __config__=ConfigDict(extra="forbid"), output=(output_type, ...)
        )
        if wrapped
        else _refusing_extra(output_type)
    )
    cls = type(
        f"{name}_tool",
        (OutputTool,),
        {
            "name": name,
            "description": (
                f"Give your final answer ({type_name}) by calling this tool; the run ends "
                "with it. Call it once, when you are done."
            ),
            "args_model": args_model,
            "adapter": TypeAdapter(output_type),
            "wrapped": wrapped,
        },
    )
    made: OutputTool = cls()
    return made


def _refusing_extra(model: type[BaseModel]) -> type[BaseModel]:
    """`model`, or a subclass of it that refuses keys it does not know (as every tool's
    arguments do) when it takes them."""
    if model.model_config.get("extra") == "forbid":
        return model
    config = ConfigDict(**{**model.model_config, "extra": "forbid"})
    refusing: type[BaseModel] = type(model.__name__, (model,), {"model_config": config})
    return refusing
