"""The client: :class:`Parkway` (``sync.py``) and its asyncio twin :class:`AsyncParkway` (``aio.py``),
the same methods with the same signatures."""

from .aio import AsyncParkway
from .sync import Parkway

__all__ = ["AsyncParkway", "Parkway"]
