"""Which package may import which: dependencies go one way.

Read from the source (every import statement, function-local ones included), so a cycle
hidden inside a function shows as well as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(package: str) -> dict[str, set[str]]:
    """Each module file under `package` with the modules it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def offenders(package: str, forbidden: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """`file: module` for each import of `forbidden` (or a module under it) in `package`."""
    return [
        f"{file}: {name}"
        for file, names in imported_modules(package).items()
        for name in sorted(names)
        if (name == forbidden or name.startswith(forbidden + "."))
        and not any(name == ok or name.startswith(ok + ".") for ok in allowed)
    ]


def test_the_client_never_imports_the_worker_process() -> None:
    """worker.py imports the client (the facade its extensions get); the way back would
    make a cycle. What the client needs to start a worker is in `client.workers`."""
    assert offenders("client", "duragent.worker") == []


def test_the_http_api_reads_the_store_through_the_client() -> None:
    """api/ is HTTP over the client: it shares the store's record types, never its
    queries or transactions."""
    assert offenders("api", "duragent.store", allowed=("duragent.store.records",)) == []
    assert offenders("api", "duragent.client.db") == []
