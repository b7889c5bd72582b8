"""Running the README's examples as printed (embedded, as a newcomer would run them)."""

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
