"""The client: :class:`Parkway` (``sync.py``) and its asyncio twin :class:`AsyncParkway` (``aio.py``),
the same methods with the same signatures. The twin is imported when first asked for, so a program
that uses only the first (the ``parkway`` command) does not load it."""

import importlib
from typing import TYPE_CHECKING, Any

from .sync import Parkway

if TYPE_CHECKING:
    from .aio import AsyncParkway

__all__ = ["AsyncParkway", "Parkway"]


def __getattr__(name: str) -> Any:
    if name != "AsyncParkway":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(".aio", __name__).AsyncParkway
