"""Models written without the fields still at their defaults.

What the workflow and its activities pass each other is in the workflow history, once per
turn: an empty list or a None said each time would be a good part of it. Reading fills
the defaults back in, so readers see no difference.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


def _defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    """The defaults of a model's optional fields, worked out once per class: pydantic's
    `get_default` inspects a default factory's signature on every call, which cost more
    than the rest of serializing a turn."""
    defaults = _DEFAULTS.get(model)
    if defaults is None:
        defaults = {
            name: field.get_default(call_default_factory=True)
            for name, field in model.model_fields.items()
            if not field.is_required()
        }
        _DEFAULTS[model] = defaults
    return defaults


class CompactModel(BaseModel):
    """A model whose serialized form leaves out each optional field at its default."""

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, default in _defaults_of(type(self)).items():
            if name in data and getattr(self, name) == default:
                del data[name]
        return data
