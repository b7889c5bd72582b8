"""A module imported when one of its names is first used.

For what a process may never need, and pays for at its start: the Lua calls' argument classes
(``adapters/redis/scripts/calls.py``, ``sessions/calls.py``: forty frozen dataclasses, each checked against
its script's header as its module loads) cost a command that only reads, such as
``parkway interrupts``, about 30 ms. The modules that build those calls name them through a
:class:`LazyModule` (``calls.Park(...)``), and import the real module for type checkers only.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``: the first attribute read imports it (its checks run then),
    and every read returns the module's own attribute."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr in LazyModule.__slots__:  # unset (a copy made without __init__): no module to ask
            raise AttributeError(attr)
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at first use>"
