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
    return {
        str(path.relative_to(ROOT)): imported_modules_of(path)
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imported_modules_of(path: Path) -> set[str]:
    """The modules one file imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


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


LAYERS = [
    ["domain"],
    ["settings", "settings_checks", "store", "temporal_dev"],
    ["activities", "workflows", "offline_model"],
    ["telemetry"],
    ["client"],
    ["worker", "api"],
    ["client.cli"],
]
"""From the bottom up: a part imports only its own layer's parts and those below. The
command line is the top (it starts workers and the API server); it lives in client/. The
offline model sits beside the activities: played in-process, it is a client at their
model seam (`offline_model.in_process`); no activity imports it (the stand-ins' test)."""


def _part(module: str) -> str | None:
    """The part of `duragent` a module belongs to (`client.cli` before `client`)."""
    if not module.startswith("duragent."):
        return None
    name = module.removeprefix("duragent.")
    parts = [part for layer in LAYERS for part in layer]
    found = [p for p in parts if name == p or name.startswith(p + ".")]
    return max(found, key=len) if found else None


def _layer(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def test_each_part_imports_only_its_layer_and_the_ones_below() -> None:
    sources = [
        *((f"{p}.py", p) for p in ("settings", "settings_checks", "worker")),
        *((p, p) for layer in LAYERS for p in layer if (ROOT / p).is_dir()),
        ("temporal-dev", "temporal_dev"),
    ]
    wrong = []
    for source, part in sources:
        files = (
            {source: imported_modules_of(ROOT / source)}
            if source.endswith(".py")
            else imported_modules(source)
        )
        for file, names in files.items():
            here = "client.cli" if file.startswith("client/cli/") else part
            for name in sorted(names):
                there = _part(name)
                if there is not None and _layer(there) > _layer(here):
                    wrong.append(f"{file} ({here}) imports {name} ({there})")
    assert wrong == []


def test_only_the_command_line_starts_local_stand_ins() -> None:
    """The dev server and the offline model are for trying duragent out and for tests:
    the command line starts them (`client.services`), and so does `duragent.local` when a
    program calls it (an agent's `run` without a client); nothing else a user's code
    imports (the client, the worker, the API) does."""
    stand_ins = ("duragent.offline_model", "duragent.client.services")
    dev_server = ("duragent.temporal_dev.DevServer", "duragent.temporal_dev.server")
    wrong = [
        f"{file}: {name}"
        for part in ("client", "api", "activities", "workflows", "telemetry")
        for file, names in imported_modules(part).items()
        if not file.startswith("client/cli/")
        and file not in ("client/services.py", "client/local.py")
        for name in sorted(names)
        if name.startswith(stand_ins) or name.startswith(dev_server)
    ]
    wrong += [
        f"worker.py: {name}"
        for name in sorted(imported_modules_of(ROOT / "worker.py"))
        if name.startswith(stand_ins) or name.startswith(dev_server)
    ]
    assert wrong == []


def test_no_module_imports_itself_back() -> None:
    """No import cycle between the modules of the worker's side, `TYPE_CHECKING` imports
    included: a module can be read knowing only what it imports (the agent loop's gates
    reach the run through `workflows.run_state.RunSteps`, not through the module that
    imports them). The client's parts reach the client that holds them (`client.part`)."""
    graph: dict[str, set[str]] = {}
    for package in ("domain", "store", "activities", "workflows", "telemetry"):
        for file, names in imported_modules(package).items():
            module = "duragent." + file.removesuffix(".py").removesuffix("/__init__").replace(
                "/", "."
            )
            graph[module] = {n for n in names if n.startswith("duragent.")}
    # `from duragent.x import y` names y as a module only when y is one.
    edges = {m: {n for n in names if n in graph and n != m} for m, names in graph.items()}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(edges[module]):
            if target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(edges):
        if module not in done:
            visit(module, [module])
    assert cycles == []
