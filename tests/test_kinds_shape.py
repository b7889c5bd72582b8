"""An interrupt kind is one registered object in one file: callers ask the kind, never its name
(``parkway/runtime/kinds/``; STYLE guideline 22)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from parkway.runtime import kinds

PACKAGE = Path(kinds.__file__).parents[2]
KINDS = Path(kinds.__file__).parent
NAMES = kinds.names()


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".html", ".lua") and p.is_file())


def test_only_the_kinds_own_file_and_the_registry_name_the_date_time_kind() -> None:
    """No file of parkway/ but kinds/date_time.py, and kinds/__init__.py's import list, names the
    date/time kind ("datetime" quoted, or its module)."""
    named = re.compile(r"""["']datetime["']|date_time""")
    found = [str(p.relative_to(PACKAGE)) for p in _sources() if named.search(p.read_text())]
    assert found == ["runtime/kinds/__init__.py", "runtime/kinds/date_time.py"], found
    assert "date_time" in (KINDS / "__init__.py").read_text().split("import", 2)[-1]


def test_every_kind_module_is_in_the_import_list_and_registers_its_kinds() -> None:
    """Each module of kinds/ but base.py is imported by kinds/__init__.py, and the kinds it defines are
    registered, in the order of that list (the request model's kind enum)."""
    tree = ast.parse((KINDS / "__init__.py").read_text())
    listed = [alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module is None
              for alias in node.names]
    files = sorted(p.stem for p in KINDS.glob("*.py") if p.stem not in ("__init__", "base"))
    assert sorted(listed) == files
    assert NAMES == ("text", "choice", "multi-choice", "contract", "datetime")
    assert [kinds.get(name).name for name in NAMES] == list(NAMES)


def test_no_code_outside_the_kinds_branches_on_a_kind_name() -> None:
    """Outside kinds/, no Python compares a kind with a kind's name, and the inbox page compares no
    kind and names none: each asks the kind (its widget, its answer argument, its prompt, its links)."""
    quoted = "|".join(re.escape(n) for n in NAMES)
    branch = re.compile(rf"""kind\s*(==|!=|in|not in)\s*\(?\s*["']({quoted})["']""")
    found = [f"{p.relative_to(PACKAGE)}: {m.group(0)}" for p in _sources() if KINDS not in p.parents
             for m in branch.finditer(p.read_text())]
    assert found == []
    page = "\n".join(f.read_text() for f in sorted((PACKAGE / "http" / "static").iterdir())
                     if f.suffix in (".html", ".js"))  # the page and the scripts it loads
    assert re.findall(r"\bkind\s*[!=]==?|[!=]==?\s*\w+\.kind\b", page) == []
    # ("text" and "contract" are words of the page's own too: el()'s text attribute, a form's class)
    assert [n for n in NAMES if n not in ("text", "contract") and re.search(rf"""["']{re.escape(n)}["']""", page)] == []


def test_the_check_finds_a_branch_on_a_kind_name() -> None:
    """The pattern of the test above matches the branches it exists to find."""
    quoted = "|".join(re.escape(n) for n in NAMES)
    branch = re.compile(rf"""kind\s*(==|!=|in|not in)\s*\(?\s*["']({quoted})["']""")
    assert branch.search('if request.kind == "text":') and branch.search('kind in ("choice", "multi-choice")')
