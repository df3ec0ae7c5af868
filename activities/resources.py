"""Skills and prompt templates on disk, read when a turn snapshot is taken.

Looked up in `<workspace>/.duragent/{skills,prompts}/` and then the worker's resource
directory (`$DURAGENT_HOME/resources/{skills,prompts}/`); the first of a name wins.
"""

from __future__ import annotations

import logging
from pathlib import Path

from duragent.domain.resources import Resource, ResourceKind, parse_resource

logger = logging.getLogger(__name__)
FOLDERS: dict[ResourceKind, str] = {"skill": "skills", "template": "prompts"}


def load_resources(workspace: Path, shared: Path | None) -> tuple[Resource, ...]:
    roots = [workspace / ".duragent", *([shared] if shared else [])]
    found: dict[tuple[ResourceKind, str], Resource] = {}
    for root in roots:
        for kind, folder in FOLDERS.items():
            directory = root / folder
            if not directory.is_dir():
                continue
            for path in sorted(directory.glob("*.md")):
                try:
                    resource = parse_resource(kind, path.stem, str(path), path.read_text())
                except (OSError, ValueError) as err:
                    logger.warning("skipping %s: %s", path, err)
                    continue
                found.setdefault((kind, resource.name), resource)
    return tuple(found.values())
