"""Argument schemas as the model sees them, and validation errors as it reads them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


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
