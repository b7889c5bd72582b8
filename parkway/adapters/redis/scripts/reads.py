"""The arguments of the read-only function the listings call (``page.lua``), apart from
:mod:`.calls`: a process that only lists (``parkway interrupts``) defines this class alone, not every
transition's (see :mod:`.scripts` for what a schema class is)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .scripts import Args, schema


@schema("page")
@dataclass(frozen=True)
class Page(Args):
    indexes: list[str]
    reads: list[Any]
