"""Every Python block of the README and of the documentation site (docs/) runs as printed, embedded, beside
the workflow module of "A run" saved as myapp/flows.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.readme import ROOT, Block, block_under, doc_pages, python_blocks

RUN_ELSEWHERE = re.compile(r'run_readme_example\("([^"]+)"')
MODULE = "# A run: nodes, edges and data"
"""the page heading whose first block is the module the other examples start as myapp.flows:approval"""


def _blocks() -> tuple[Block, list[Block]]:
    """The module block, and every other block but those under a heading another test runs
    (tests/readme.py's ``run_readme_example``)."""
    module = block_under(MODULE)
    covered = {module}
    for test in (ROOT / "tests").glob("test_*.py"):
        covered |= {block_under(heading) for heading in RUN_ELSEWHERE.findall(test.read_text())}
    return module, [b for b in python_blocks() if b not in covered]


def _run(code: str, where: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120)


def test_every_python_block_of_the_readme_and_the_docs_runs_as_printed(tmp_path: Path) -> None:
    """Each block (the module of "A run" is the workflow module the others start as myapp.flows:approval)
    exits 0 on its own; the blocks other tests run by heading are run there."""
    module, blocks = _blocks()
    assert "approval = Workflow" in module.code
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "flows.py").write_text(module.code)
    pages = {b.page for b in python_blocks()}
    print(f"running {len(blocks)} Python blocks of {len(pages)} pages ({len(python_blocks())} blocks in all, "
          f"{len(python_blocks()) - len(blocks)} run by the module or by tests/test_readme_*.py and others)")
    assert len(python_blocks()) >= 16 and len(blocks) >= 8 and len(pages) >= 12 and ROOT / "README.md" in pages
    assert len(doc_pages()) >= 30
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda block: _run(block.code, tmp_path), blocks))
    failed = [f"{b.where}: {d.stderr.strip().splitlines()[-1]}" for b, d in zip(blocks, done, strict=True)
              if d.returncode != 0]
    assert not failed, failed


def test_every_code_fence_of_the_readme_and_the_docs_is_closed() -> None:
    """Each page opens and closes its code blocks in pairs (a block left open swallows the page's
    next prose into code, and its Python is run by no test)."""
    odd = [str(page.relative_to(ROOT)) for page in doc_pages()
           if sum(1 for line in page.read_text().splitlines() if line.startswith("```")) % 2]
    assert not odd, odd
