"""Agents: nodes that call a model and tools, and the session hooks they use (defined in
:mod:`parkway.runtime.agents`, :mod:`parkway.runtime.reasoning` and :mod:`parkway.sessions.branch`).

>>> from parkway.agents import add_message, use_model, use_tool
"""

from .runtime.agents import use_model, use_tool, use_triggers
from .runtime.errors import ToolError
from .runtime.reasoning import ModelProvider, ScriptedModel, use_reason
from .sessions.branch import add_message

__all__ = [
    "ModelProvider",
    "ScriptedModel",
    "ToolError",
    "add_message",
    "use_model",
    "use_reason",
    "use_tool",
    "use_triggers",
]
