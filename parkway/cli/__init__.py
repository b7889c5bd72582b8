"""The ``parkway`` command: ``program.py`` builds its parser from the table of commands and runs
them; each group of commands is a module (``runs``, ``interrupts``, ``operations``, ``demo``) whose
commands keep their arguments beside their function; ``common.py`` and ``parsing.py`` hold what they
share. Importing it stays light: what a command needs, it imports when it runs."""

from .program import main, parser

__all__ = ["main", "parser"]
