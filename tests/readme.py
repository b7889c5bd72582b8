"""Running the documentation's examples as printed (embedded, as a newcomer would run them): the
README's and every page's under docs/, found by heading wherever the text lives now."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
NOT_PAGES = ("_readme_map.md",)
"""Markdown under docs/ that is no page of the site (the checklist of where the README's text went)"""


def doc_pages() -> list[Path]:
    """README.md, then every Markdown page of the documentation site, in a stable order."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name not in NOT_PAGES)
    return [ROOT / "README.md", *pages]


@dataclass(frozen=True)
class Block:
    """One Python code block of a page: where it is, and its code."""

    page: Path
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def python_blocks() -> list[Block]:
    """Every Python block of README.md and docs/, in page order."""
    return [Block(page, text[: m.start()].count("\n") + 1, m.group(1)) for page in doc_pages()
            for text in [page.read_text()] for m in BLOCK.finditer(text)]


def _find(text: str, heading: str) -> int:
    """Where ``heading`` starts in ``text``, -1 if nowhere. A Markdown heading (``## Sessions``) matches
    at any level, as moving text between pages changes levels; anything else is matched as written."""
    if heading.startswith("#"):
        found = re.search(r"^#+ " + re.escape(heading.lstrip("#").strip()), text, re.M)
        return found.start() if found else -1
    return text.find(heading)


def section(heading: str) -> tuple[Path, str]:
    """The page holding ``heading`` (README.md first, then docs/), and its text from the heading on."""
    for page in doc_pages():
        text = page.read_text()
        at = _find(text, heading)
        if at >= 0:
            return page, text[at:]
    raise AssertionError(f"no page of README.md or docs/ has {heading!r}")


def block_under(heading: str) -> Block:
    """The first Python block under ``heading``."""
    page, rest = section(heading)
    text = page.read_text()
    start = text.index(rest) + rest.index("```python\n")
    return next(b for b in python_blocks() if b.page == page and b.line == text[:start].count("\n") + 1)


def run_readme_example(heading: str, tmp_path: Path) -> list[str]:
    """Run the first python block under ``heading`` (in README.md or docs/) in a fresh process; its
    output lines."""
    (tmp_path / "example.py").write_text(block_under(heading).code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
