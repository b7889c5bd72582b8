"""The README's session example runs as printed (embedded, as a newcomer would run it)."""

from __future__ import annotations

from pathlib import Path

from tests.procs import run_readme_example


def test_the_readme_session_example_runs(tmp_path: Path) -> None:
    done = run_readme_example("## Sessions", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "⏸ parked by" in lines[2] and "confirm" in lines[2]  # the first tree: the branch parked
    assert "resumed" in lines
    assert any(line.lstrip().startswith("* ") and "done: sent" in line for line in lines)  # the head, after
    assert any("Actually, email Carol" in line for line in lines)  # the sibling branch, still parked
