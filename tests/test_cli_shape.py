"""The ``parkway`` command's source is shaped as its layout page says: one module per group of
commands, each command's arguments beside its function, small files and functions."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from parkway.cli import program
from tests.procs import ROOT

SOURCES = [*sorted((ROOT / "parkway" / "cli").glob("*.py")), ROOT / "parkway" / "sessions" / "cli.py"]


def _defs(path: Path) -> list[ast.FunctionDef]:
    return [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]


def test_each_command_s_arguments_sit_right_above_its_function() -> None:
    """In the table of commands, each builder ``add_X`` is followed in its module by its command ``cmd_X``."""
    for add in program.COMMANDS:
        defs = [d.name for d in _defs(Path(inspect.getfile(add)))]
        assert add.__name__.startswith("add_"), add.__name__
        following = defs[defs.index(add.__name__) + 1]
        assert following == "cmd_" + add.__name__.removeprefix("add_"), (add.__module__, add.__name__, following)


def test_every_command_of_the_parser_comes_from_the_table_or_a_feature() -> None:
    """Each subcommand's function lives in the module of the builder that added it (a group or a feature)."""
    homes = {add.__module__ for add in (*program.COMMANDS, *program.FEATURES)}
    action = next(a for a in program.parser()._actions if a.dest == "command")
    assert action.choices is not None
    functions = {name: command.get_default("fn") for name, command in action.choices.items()}
    assert len(functions) >= 18 and all(fn.__module__ in homes for fn in functions.values()), functions


def test_no_file_over_800_lines_and_no_function_over_80() -> None:
    """The CLI's modules and the sessions feature's CLI part stay within 800 lines a file, 80 a function."""
    long_files = {p.name: n for p in SOURCES if (n := len(p.read_text().splitlines())) > 800}
    long_functions = {
        f"{p.name}:{node.name}": node.end_lineno - node.lineno + 1
        for p in SOURCES
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 80
    }
    assert len(SOURCES) >= 8 and not long_files and not long_functions, (long_files, long_functions)
