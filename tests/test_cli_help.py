"""Every command's ``--help`` reads as it did before the commands were split into modules."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest

from parkway.cli import parser
from tests.procs import ROOT

SNAPSHOT = ROOT / "tests" / "cli_help_db96a82.json"
"""``format_help()`` of ``parkway`` and of each command (aliases too), at 100 columns, as the parser
of main at db96a82 (one ``commands.py``) printed them"""


def _commands(p: argparse.ArgumentParser, prefix: str = "parkway") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield prefix, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prefix} {name}")


def test_every_command_s_help_is_the_snapshot_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """`parkway --help` and each command's --help (aliases included) are word for word the snapshot's,
    and no command is added or missing."""
    monkeypatch.setenv("COLUMNS", "100")
    expected: dict[str, str] = json.loads(SNAPSHOT.read_text())
    shown = {name: command.format_help() for name, command in _commands(parser())}
    assert list(shown) == list(expected)
    for name, text in expected.items():
        assert shown[name] == text, name
