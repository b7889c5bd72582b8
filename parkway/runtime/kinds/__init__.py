"""Interrupt kinds, one module each (see :mod:`.base` for what a kind is); the import list below is
the registry, in the order the kinds are listed (the request model's ``kind`` enum): adding a kind
is adding its module and its name here."""

# ruff: noqa: I001  (the import list is in the order the kinds register)

from __future__ import annotations

from . import text, choice, contract, date_time  # noqa: F401  (each registers its kinds)
from .base import CONTROLS, Asked, Kind, find, get, names, option_ids

__all__ = ["CONTROLS", "Asked", "Kind", "find", "get", "names", "option_ids"]
