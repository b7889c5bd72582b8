"""Agents: nodes that call a model and tools, and the session hooks they use (defined in
:mod:`parkway.runtime.agents` and :mod:`parkway.runtime.reasoning`).

>>> from parkway.agents import add_message, use_model, use_tool
"""

from .runtime.agents import add_message, use_model, use_tool, use_triggers
from .runtime.errors import ToolError
from .runtime.reasoning import ModelProvider, ScriptedModel, use_reason

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
