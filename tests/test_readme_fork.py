"""The README's fork and use_first examples run as printed (embedded, as a newcomer would run them)."""

from __future__ import annotations

from pathlib import Path

from tests.readme import run_readme_example


def test_the_readme_fork_example_runs(tmp_path: Path) -> None:
    """The fork asks under its own token, completes with the new price; the old run waits and still answers."""
    lines = run_readme_example("### Forking a run from an earlier step", tmp_path)
    assert lines == ["True", "accepted", "{'qty': 3, 'price': 25, 'paid': True}", "waiting", "accepted"], lines


def test_the_readme_use_first_child_example_runs(tmp_path: Path) -> None:
    """The child's answer wins the race; the parent's own token then answers nothing."""
    lines = run_readme_example("**A child run as a contender.**", tmp_path)
    assert lines == [
        "accepted",
        "{'doc': 'Q3 report', 'by': 'child', 'value': {'doc': 'Q3 report', 'ok': True}}",
        "already_resolved",
    ], lines


def test_the_readme_timer_example_runs(tmp_path: Path) -> None:
    """Nobody answers: the timer wins and the token answers nothing."""
    lines = run_readme_example("### The first of an answer, a timer and a child run", tmp_path)
    assert lines == ["{'decided_by': 'timer', 'answer': None}", "already_resolved"], lines
