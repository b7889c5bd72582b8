"""Arrows point down only: each module of parkway imports modules of its own layer or of the layers
below it (``runtime`` <- ``adapters`` <- ``workers`` <- ``client`` <- the features <- ``http``/``cli``),
and the packages import each other without a circle. Imports are read statically, as
``tests/test_imports.py`` reads them: every statement, at module level or inside a function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_imports import ROOT, cycles, import_graph, module_files

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runtime", ("runtime", "_lazy")),
    ("adapters", ("adapters",)),
    ("config", ("config",)),
    ("workers", ("workers",)),
    ("client", ("backend", "client")),
    ("shared by the surfaces", ("problems",)),
    ("features", ("sessions", "channels", "tracing")),
    ("the feature list", ("extensions",)),
    ("surfaces", ("http", "cli", "demo", "logs")),
    ("public names", ("parkway", "_public", "agents", "errors")),
)
"""parkway's layers, lowest first, each with its packages and top-level modules (``parkway`` is the
package's root, ``parkway/__init__.py``); the one table of them (docs/reference/layout.md draws it)"""

RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """The package or top-level module ``module`` belongs to (``parkway.client.sync`` -> ``client``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as ``module -> imported (layer -> layer)``."""
    found = []
    for module, imports in sorted(graph.items()):
        for target in sorted(imports):
            low, high = RANK[unit_of(module)], RANK[unit_of(target)]
            if high > low:
                found.append(f"{module} -> {target} ({LAYERS[low][0]} -> {LAYERS[high][0]})")
    return found


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between packages (and top-level modules) that ``graph``'s modules make."""
    units: dict[str, set[str]] = {}
    for module, imports in graph.items():
        mine = unit_of(module)
        units.setdefault(mine, set()).update(unit_of(t) for t in imports if unit_of(t) != mine)
    for targets in list(units.values()):
        for target in targets:
            units.setdefault(target, set())
    return units


def test_every_module_has_a_layer(root: Path = ROOT) -> None:
    """Each package and top-level module of parkway is in the layer table (a new one is placed)."""
    missing = {unit_of(m) for m in module_files(root)} - set(RANK)
    assert not missing, f"not in LAYERS: {sorted(missing)}"


def test_no_import_points_up() -> None:
    """No module imports a module of a higher layer."""
    found = upward(import_graph(module_files()))
    assert not found, "imports that point up a layer:\n" + "\n".join(found)


def test_no_circle_between_packages() -> None:
    """No package (or top-level module) imports, directly or through others, one that imports it."""
    found = cycles(unit_graph(import_graph(module_files())))
    assert not found, "circles between parkway's packages:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_an_arrow_up_and_a_circle_are_found() -> None:
    """The checks name an import from a lower layer to a higher one, and a circle of packages."""
    graph = {
        "parkway.client.sync": {"parkway.runtime.links", "parkway.sessions.client"},
        "parkway.sessions.client": {"parkway.runtime.store"},
        "parkway.runtime.links": set(),
        "parkway.runtime.store": set(),
    }
    assert upward(graph) == ["parkway.client.sync -> parkway.sessions.client (client -> features)"]
    graph["parkway.runtime.store"] = {"parkway.client.sync"}
    assert cycles(unit_graph(graph)) == [["client", "runtime", "sessions"]]


def test_a_worker_process_runs_the_features_it_never_imports() -> None:
    """A process that imports only the job's module (as RQ's own worker does) gets the feature list
    the top assembles: the tracing and sessions observers are its executor's extensions, with no feature
    imported until the features are first asked for."""
    code = (
        "import sys\n"
        "from parkway.workers import jobs\n"
        "from parkway.runtime import features\n"
        "before = 'parkway.sessions.branch' in sys.modules\n"
        "print(before, [type(e).__name__ for e in features.extensions()], [f.name for f in features.features()])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT.parent, capture_output=True, text=True, check=True)
    expected = "False ['Attempts', 'BranchRuns'] ['tracing', 'sessions', 'channels']"
    assert out.stdout.split("\n")[0] == expected, out.stdout + out.stderr
