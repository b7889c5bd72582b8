"""The README's fork and use_first examples run as printed (embedded, as a newcomer would run them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_readme_example(heading: str, tmp_path: Path) -> list[str]:
    """Run the first python block under ``heading`` in a fresh process; its output lines."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(heading):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    (tmp_path / "example.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


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
