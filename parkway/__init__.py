"""parkway: durable, human-in-the-loop workflows on Redis.

Nodes are plain functions run as RQ jobs; ``use_interrupt`` pauses a run for
a person and ends the job; a resume token answers the pause exactly once and
the node replays with its hooks returning what they recorded.
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from .runtime import features as _features

if TYPE_CHECKING:
    from ._public import *  # noqa: F403
    from ._public import __all__ as __all__


def _assembled() -> tuple[_features.Feature, ...]:
    """The features this deployment runs (``parkway/extensions.py``), imported when first asked for."""
    from .extensions import FEATURES

    return FEATURES


_features.assemble(_assembled)  # the top hands its feature list to the extension point


def __getattr__(name: str) -> Any:
    """Load the public surface on first use: a command such as ``parkway --help`` that needs none
    of it starts without importing redis, rq, pydantic or structlog (and ``AsyncParkway``, the
    asyncio client, when it is first asked for)."""
    probing = name.startswith("_") and name != "__all__"  # the import machinery's questions
    if probing or importlib.util.find_spec(f"{__name__}.{name}") is not None:  # `from . import links`
        raise AttributeError(f"module 'parkway' has no attribute {name!r}")
    _public = importlib.import_module("parkway._public")
    if name != "__all__" and name not in _public.__all__:
        raise AttributeError(f"module 'parkway' has no attribute {name!r}")
    if "__all__" not in globals():
        eager = [n for n in _public.__all__ if n not in _public.ON_FIRST_USE]
        globals().update({n: getattr(_public, n) for n in eager}, __all__=_public.__all__)
    if name not in globals():  # AsyncParkway: the asyncio client loads when first asked for
        globals()[name] = getattr(_public, name)
    return globals()[name]


def __dir__() -> list[str]:
    _public = importlib.import_module("parkway._public")
    return sorted(set(globals()) | set(_public.__all__))
