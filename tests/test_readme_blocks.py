"""Every Python block of the README runs as printed, embedded, beside the first one saved as myapp/flows.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.procs import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)
RUN_ELSEWHERE = re.compile(r'run_readme_example\("([^"]+)"')


def _blocks() -> list[tuple[int, str]]:
    """(line, code) of each Python block, but the first (the module the others import) and those under a
    heading another test runs (tests/readme.py)."""
    readme = (ROOT / "README.md").read_text()
    covered = set()
    for test in (ROOT / "tests").glob("test_*.py"):
        for heading in RUN_ELSEWHERE.findall(test.read_text()):
            section = readme.index(heading)
            covered.add(readme.index("```python\n", section))
    return [(readme[: m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(readme)
            if m.start() not in covered][1:]


def _run(code: str, where: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120)


def test_every_python_block_of_the_readme_runs_as_printed(tmp_path: Path) -> None:
    """Each block (the first is the workflow module the others start as myapp.flows:approval) exits 0 on its own."""
    blocks = _blocks()
    first = BLOCK.search((ROOT / "README.md").read_text())
    assert first is not None and "approval = Workflow" in first.group(1)
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "flows.py").write_text(first.group(1))
    assert len(blocks) >= 7
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda block: _run(block[1], tmp_path), blocks))
    failed = [f"README line {line}: {d.stderr.strip().splitlines()[-1]}" for (line, _), d in zip(blocks, done,
              strict=True) if d.returncode != 0]
    assert not failed, failed
