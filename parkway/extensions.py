"""The features this deployment runs (``parkway.runtime.features``), in the order their observers
run: assembled here, at the top, and handed to the extension point by the package's root
(``parkway/__init__.py``); workers, the embedded worker and the client read them there, and import
no feature."""

from __future__ import annotations

from .channels.feature import CHANNELS
from .runtime.features import Feature
from .sessions.feature import SESSIONS
from .tracing.feature import TRACING

FEATURES: tuple[Feature, ...] = (TRACING, SESSIONS, CHANNELS)  # tracing first: its attempt span holds the others' work
