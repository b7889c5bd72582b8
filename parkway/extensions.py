"""The features that observe runs in the executor (``parkway.runtime.observers``), in the order
their hooks run: what every worker and every embedded deployment gives ``executor.Options``."""

from __future__ import annotations

from .runtime.observers import Extension
from .sessions.branch import BranchRuns

EXTENSIONS: tuple[Extension, ...] = (BranchRuns(),)
