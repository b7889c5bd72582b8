"""Finding a workflow by reference, and which modules may be imported for it.

A run records its workflow as ``"package.module:attribute"``; a worker
imports that module to run the run. Whoever can write to parkway's Redis can
write a run record, so the reference is checked before anything is imported:

- with an allow-list (``PARKWAY_WORKFLOWS=myapp.flows,other``, or
  ``--workflows`` on the command line) only those very modules are imported:
  a package listed is not a licence for its submodules (``myapp`` does not
  admit ``myapp.tests.fixtures``), each one is listed by its full name;
- without one, only the application's own code is: a module whose top-level
  package lives outside the Python installation (not in the standard library,
  not in site-packages), found on the path without importing it, plus
  parkway's own demo. ``this``, ``os`` or an installed package never are.

A module that cannot be imported (missing, or its code raising), is not
allowed, or has no such attribute, raises :class:`WorkflowUnavailable`: a
worker leaves such a run queued for a worker that can load it, instead of
failing it (an answer already recorded waits in the journal, not lost).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .contracts import Contract
from .errors import WorkflowError, WorkflowUnavailable
from .workflow import Workflow

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
ALWAYS_ALLOWED = ("parkway.demo", "parkway.runtime.agents")
"""parkway's own workflows and contracts, importable whatever the allow-list says"""


def split_ref(ref: object) -> tuple[str, str]:
    """``(module, attribute)`` of a ``"package.module:attribute"`` reference, checked by full match."""
    parts = _split_ref(str(ref)) if isinstance(ref, str) else None
    if parts is None:
        raise WorkflowError(f"workflow reference {ref!r} must look like 'package.module:attribute'")
    return parts


@lru_cache(maxsize=1024)
def _split_ref(ref: str) -> tuple[str, str] | None:
    """``split_ref``'s answer (None: not a reference), kept for the last references asked: a worker
    loads the same few workflows for every job, and a client for every answer it checks."""
    module, sep, attr = ref.partition(":")
    if sep and _DOTTED.fullmatch(module) and _DOTTED.fullmatch(attr):
        return module, attr
    return None


def parse_modules(text: str | Iterable[str]) -> tuple[str, ...]:
    """An allow-list from ``"a.flows, b"`` or a list of names; each must be a dotted module name."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(name.strip() for name in items if name.strip())
    for name in names:
        if not _DOTTED.fullmatch(name):
            raise WorkflowError(f"PARKWAY_WORKFLOWS: {name!r} is not a module name")
    return names


@cache
def _installation() -> tuple[Path, ...]:
    """Where the Python installation keeps its own and installed modules."""
    paths = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        value = sysconfig.get_paths().get(name)
        if value:
            paths.add(value)
    paths.update(site.getsitepackages())
    user = site.getusersitepackages()
    if user:
        paths.add(user)
    return tuple(Path(p).resolve() for p in paths)


_found: dict[str, str] = {}
"""where top-level packages were found: a worker checks the same few for every job (a missing one
is looked up again, since a deploy may bring it)"""


def _where(module: str) -> str:
    top = module.split(".", 1)[0]
    where = _found.get(top)
    if where is None:
        where = _locate(top)
        if where != "missing":
            _found[top] = where
    return where


def _locate(top: str) -> str:
    """``"missing"``, ``"installed"`` (part of Python or an installed package) or ``"application"``:
    where ``module``'s top-level package is found. Only the top-level name is looked up, and
    ``find_spec`` of a top-level name imports nothing."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return "missing"
    if spec is None:
        return "missing"
    places = list(spec.submodule_search_locations or [])
    if spec.origin and spec.has_location:
        places.append(spec.origin)
    if not places:
        return "installed"  # built-in or frozen: part of Python itself
    installed = _installation()
    for place in places:
        path = Path(place).resolve()
        if any(path == root or root in path.parents for root in installed):
            return "installed"
    return "application"


@dataclass(frozen=True)
class WorkflowModules:
    """Which modules may be imported to find a workflow: ``allowed`` names, or (None) application code."""

    allowed: tuple[str, ...] | None = None

    def check(self, module: str) -> None:
        if module in ALWAYS_ALLOWED:
            return
        if self.allowed is not None:
            if module not in self.allowed:
                raise WorkflowUnavailable(
                    f"workflow module {module!r} is not in PARKWAY_WORKFLOWS ({', '.join(self.allowed) or 'empty'}); "
                    "add it there (or to --workflows) by its full name to let parkway import it (a package "
                    "listed does not admit its submodules)",
                    module=module,
                )
            return
        where = _where(module)
        if where == "missing":
            raise WorkflowUnavailable(f"cannot find workflow module {module!r}{_path_hint()}", module=module)
        if where == "installed":
            raise WorkflowUnavailable(
                f"workflow module {module!r} is part of Python or an installed package, and parkway imports only "
                f"the application's own modules unless PARKWAY_WORKFLOWS (or --workflows) names them: set "
                f"PARKWAY_WORKFLOWS={module.split('.', 1)[0]} to allow it",
                module=module,
            )

    def load(self, ref: str) -> Workflow:
        """Check, import ``module:attribute`` and return the Workflow found there."""
        target = self.find(ref)
        if target is None:  # a deploy that renamed it, or one half done: a worker may find it later
            raise WorkflowUnavailable(
                f"{ref!r} is not a parkway Workflow: its module has no {split_ref(ref)[1]!r}",
                module=split_ref(ref)[0],
            )
        if not isinstance(target, Workflow):
            raise WorkflowError(f"{ref!r} is not a parkway Workflow")
        target.validate()
        return target

    def load_contract(self, ref: str) -> Contract[Any, Any]:
        """Check, import ``module:attribute`` and return the Contract found there."""
        target = self.find(ref)
        if not isinstance(target, Contract):
            raise WorkflowError(f"{ref!r} is not a parkway Contract")
        return target

    def find(self, ref: str) -> Any:
        """Check, import ``module:attribute`` and return what is there (None if nothing)."""
        module_name, attr = split_ref(ref)
        self.check(module_name)
        try:
            module = _imported(module_name) or importlib.import_module(module_name)
        except ImportError as exc:
            raise WorkflowUnavailable(
                f"cannot import {module_name!r} for workflow {ref!r}: {exc}{_path_hint()}", module=module_name
            ) from exc
        except BaseException as exc:  # noqa: BLE001 - its own code failed (a half-done deploy, a sys.exit)
            raise WorkflowUnavailable(
                f"importing {module_name!r} for workflow {ref!r} raised {type(exc).__name__}: {exc}", module=module_name
            ) from exc
        target: Any = module
        for part in attr.split("."):
            target = getattr(target, part, None)
        return target


def _imported(name: str) -> ModuleType | None:
    """The module ``name`` when it is fully imported already (what ``import_module`` would return
    from ``sys.modules``, without its import machinery: a worker asks it twice a cycle); None when
    it is not there or its import is under way in some thread (``import_module`` then waits for it)."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def _path_hint() -> str:
    return (
        f" (the working directory is {os.getcwd()}: run parkway from the directory that holds the "
        "module, pass --path DIR, or install the application)"
    )
