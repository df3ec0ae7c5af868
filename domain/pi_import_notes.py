"""The report of a pi session's import: each kind of thing it dropped, kept as a custom
entry or changed, with how often (`ImportNote`s, in file order).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic.alias_generators import to_camel

from duragent.domain.pi_format import PiModel
from duragent.domain.session_file_checks import ImportNote


class PiImportNotes:
    """What an import did not take as it was, counted by kind and what (in file order)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[Literal["dropped", "custom", "changed"], str], int] = {}

    def add(self, kind: Literal["dropped", "custom", "changed"], what: str) -> None:
        self._counts[(kind, what)] = self._counts.get((kind, what), 0) + 1

    def dropped(self, model: PiModel, where: str, prefix: str = "") -> None:
        """Note each field of `model` (and of the models in it) that we did not read and
        that held something."""
        for key, value in (model.model_extra or {}).items():
            if not _empty(value):
                self.add("dropped", f"`{prefix}{key}` of {where}")
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, PiModel):
                self.dropped(value, where, f"{prefix}{to_camel(name)}.")
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, PiModel):
                        self.dropped(item, f"{getattr(item, 'type', name)} blocks")

    def notes(self) -> list[ImportNote]:
        return [
            ImportNote(kind=kind, what=what, count=count)
            for (kind, what), count in self._counts.items()
        ]


def _empty(value: Any) -> bool:
    """A field that says nothing when dropped: null, false, an empty text or container."""
    return value is None or value is False or (isinstance(value, str | list | dict) and not value)
