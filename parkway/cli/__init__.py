"""The ``parkway`` command (``commands.py``: its parser and commands). Importing it stays light: what a
command needs, it imports when it runs."""

from .commands import main, parser

__all__ = ["main", "parser"]
