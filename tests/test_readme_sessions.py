"""The README's session example runs as printed (embedded, as a newcomer would run it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_session_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Sessions"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[: code.index("```")]
    (tmp_path / "session_example.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "session_example.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "⏸ parked by" in lines[2] and "confirm" in lines[2]  # the first tree: the branch parked
    assert "resumed" in lines
    assert any(line.lstrip().startswith("* ") and "done: sent" in line for line in lines)  # the head, after
    assert any("Actually, email Carol" in line for line in lines)  # the sibling branch, still parked
