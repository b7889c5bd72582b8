"""The documentation's generated parts, made from the code at every build (an MkDocs hook).

A page asks for one with a marker line, ``<!-- generated: NAME -->``, which the hook replaces with
the text the generator NAME makes now: the CLI from its argparse parser, the HTTP reference from
the app's OpenAPI document, the settings from ``Settings`` and ``parkway.config``'s table of
variables, the metrics from the collector ``/metrics`` serves, the errors from ``parkway.errors``,
the Python API's list of names from ``parkway.__all__``, and the benchmark figures from
``bench/RESULTS.md``. Nothing here is hand-copied: change a docstring, a help text or a route and the
page changes with it. ``python docs/hooks.py NAME`` prints one generator's text.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the parkway of this checkout, whatever the working directory
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- generated: ([\w./-]+) -->$", re.M)


def _rst_table(text: str) -> list[tuple[str, str]]:
    """The rows of the first simple reStructuredText table in ``text`` (two columns; a row's
    continuation lines, indented under the second column, joined to it)."""
    lines = text.splitlines()
    borders = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ +=+", line.strip())]
    first, _, last = borders[:3]
    width = len(lines[first].split(" ")[0])
    rows: list[tuple[str, str]] = []
    for line in lines[first + 3:last]:
        if not line.strip():
            continue
        if line[:width].strip() and not line.startswith(" "):
            head, _, rest = line.partition(" ")
            rows.append((head, rest.strip()))
        else:
            name, said = rows[-1]
            rows[-1] = (name, f"{said} {line.strip()}")
    return rows


def _md(text: str) -> str:
    """reStructuredText's inline code (``x``) as Markdown's (`x`), and a table cell's pipes escaped."""
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|")


def _attribute_docs(cls: type) -> dict[str, str]:
    """A class's attribute docstrings (the string under a field), read from its source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def settings() -> str:
    """Every environment variable parkway reads, and every field of ``Settings``."""
    from parkway import config
    from parkway.config import Settings

    out = ["### Environment variables", "",
           "From `parkway.config`'s docstring (the variables `Settings.from_env` reads):", "",
           "| variable | meaning |", "| --- | --- |"]
    listed = set()
    for name, said in _rst_table(config.__doc__ or ""):
        listed.update(re.findall(r"PARKWAY_[A-Z_]+", name + " " + said))
        out.append(f"| {_md(name)} | {_md(said)} |")
    elsewhere: dict[str, set[str]] = {}
    for path in sorted((ROOT / "parkway").rglob("*.py")):
        for name in set(re.findall(r"PARKWAY_[A-Z][A-Z_]*[A-Z]", path.read_text())):
            if name not in listed:
                elsewhere.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    out += ["", "Read elsewhere in the code (the module that reads each):", "",
            "| variable | read in |", "| --- | --- |"]
    out += [f"| `{name}` | {', '.join(f'`{m}`' for m in sorted(where))} |" for name, where in sorted(elsewhere.items())]
    docs = _attribute_docs(Settings)
    out += ["", "### `Settings` fields", "",
            "`Settings(...)` (or `Settings.from_env(**overrides)`) takes these; the defaults are the code's:", "",
            "| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(Settings):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = f"{f.default_factory.__name__}()"
            if f.name == "queue":
                default = f"`{f.default_factory()}` ({f.default_factory.__name__}())"
        else:
            default = "required"
        default = default if default.startswith("`") else f"`{default}`"
        out.append(f"| `{f.name}` | `{_md(str(f.type))}` | {default} | {_md(docs.get(f.name, ''))} |")
    from parkway.adapters.limits import Limits

    limit_docs = _attribute_docs(Limits)
    out += ["", "### `Limits` (the bounds `Settings.limits` holds)", "", "| field | default | meaning |",
            "| --- | --- | --- |"]
    for f in dataclasses.fields(Limits):
        out.append(f"| `{f.name}` | `{f.default!r}` | {_md(limit_docs.get(f.name, ''))} |")
    return "\n".join(out)


def _commands(parser: argparse.ArgumentParser, prefix: str = "parkway",
              ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prefix} {name}")


def cli() -> str:
    """``--help`` of ``parkway`` and of each of its commands, as the parser prints it."""
    from parkway.cli import parser

    os.environ["COLUMNS"] = "100"  # the same wrapping on every machine
    out = []
    for name, command in _commands(parser()):
        out += [f"### `{name}`", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document, as ``GET /openapi.json`` serves it (an embedded client underneath)."""
    from parkway import Parkway
    from parkway.http.app import create_app

    with Parkway() as pw:
        return create_app(pw, {}).openapi()


def _ref(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "anyOf" in schema:
        return " \\| ".join(_ref(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_ref(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


def http() -> str:
    """Every route of the OpenAPI document, its parameters, body and responses, then every schema."""
    document = openapi_document()
    out = [f"Generated from `GET /openapi.json` ({document['info']['title']}, version "
           f"{document['info']['version']}, OpenAPI {document['openapi']}).", ""]
    for path, item in document["paths"].items():
        for method, op in item.items():
            out += [f"### `{method.upper()} {path}`", ""]
            if op.get("summary"):
                out += [f"**{op['summary']}.**", ""]
            if op.get("description"):
                out += [op["description"].strip(), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required |", "| --- | --- | --- | --- |"]
                out += [f"| `{p['name']}` | {p['in']} | {_ref(p.get('schema', {}))} | {p.get('required', False)} |"
                        for p in params]
                out.append("")
            body = op.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                names = re.findall(r"[A-Z]\w+", _ref(content["schema"]))
                out += [f"Body ({media}): " + " or ".join(f"[{n}](#{n.lower()})" for n in names)
                        + (" or none" if "null" in _ref(content["schema"]) else ""), ""]
            out += ["| status | description |", "| --- | --- |"]
            out += [f"| {code} | {_md(r.get('description', ''))} |" for code, r in op.get("responses", {}).items()]
            out.append("")
    out += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [_md(" ".join(schema["description"].split())), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| member | type | required | description |", "| --- | --- | --- | --- |"]
            out += [f"| `{k}` | {_ref(v)} | {k in required} | {_md(' '.join(v.get('description', '').split()))} |"
                    for k, v in props.items()]
            out.append("")
    return "\n".join(out)


def metrics() -> str:
    """Every family ``GET /metrics`` serves, from the collector itself (over no traffic)."""
    from parkway.http.metrics import ParkwayCollector, Refused
    from parkway.runtime.store import Tallies

    collector = ParkwayCollector(lambda: Tallies(counters={}, wait_buckets=(1, 60), pending={}), Refused())
    out = ["| metric | type | what |", "| --- | --- | --- |"]
    for family in collector.collect():
        suffix = "_total" if family.type == "counter" else ""
        out.append(f"| `{family.name}{suffix}` | {family.type} | {_md(family.documentation)} |")
    return "\n".join(out)


def errors() -> str:
    """The error tree of ``parkway.errors`` and the HTTP API's problem kinds by status."""
    import parkway.errors as module
    from parkway import problems

    out = ["### Exceptions", "", "Every error parkway raises on purpose (`parkway.errors`), with its base:", "",
           "| error | base | what |", "| --- | --- | --- |"]
    for name in sorted(module.__all__ if hasattr(module, "__all__") else dir(module)):
        error = getattr(module, name)
        if isinstance(error, type) and issubclass(error, BaseException):
            said = (inspect.getdoc(error) or "").split("\n\n")[0]
            out.append(f"| `{name}` | `{error.__mro__[1].__name__}` | {_md(' '.join(said.split()))} |")
    out += ["", "### Problem details (HTTP)", "", "Every error body has these members "
            "(from `parkway.problems`):", "", "| member | meaning |", "| --- | --- |"]
    out += [f"| {_md(name)} | {_md(said)} |" for name, said in _rst_table(problems.__doc__ or "")]
    out += ["", "An error with no parkway error behind it is named by its status:", "",
            "| status | `error` | `type` |", "| --- | --- | --- |"]
    out += [f"| {status} | `{name}` | `/problems/{problems._kebab(name)}` |"
            for status, name in problems._BY_STATUS.items()]
    out += ["", "An answer or cancel that changed nothing names its outcome:", "", "| outcome | detail |",
            "| --- | --- |"]
    out += [f"| `{key}` | {_md(said)} |" for key, said in problems._OUTCOMES.items()]
    return "\n".join(out)


def python_api() -> str:
    """One mkdocstrings directive per name ``parkway`` exports, grouped by the module defining it."""
    import parkway._public as public

    by_module: dict[str, list[str]] = {}
    for name in public.__all__:
        obj = getattr(public, name) if name not in public.ON_FIRST_USE else public.__getattr__(name)
        by_module.setdefault(getattr(obj, "__module__", public.__name__), []).append(name)
    out = []
    for module, names in sorted(by_module.items()):
        out += [f"## `{module}`", ""]
        for name in names:
            out += [f"::: {module}.{name}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


def bench_results() -> str:
    """``bench/RESULTS.md``, as ``python -m bench`` last wrote it, its headings under the page's."""
    text = (ROOT / "bench" / "RESULTS.md").read_text()
    return re.sub(r"^(#+) ", lambda m: "#" * min(len(m.group(1)) + 1, 6) + " ", text, flags=re.M)


GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings, "cli": cli, "http": http, "metrics": metrics, "errors": errors,
    "python-api": python_api, "bench-results": bench_results,
}


def expand(markdown: str) -> str:
    """``markdown`` with each marker replaced by its generator's text (an unknown name: an error)."""
    def one(match: re.Match[str]) -> str:
        if match.group(1) not in GENERATORS:
            raise KeyError(f"no generator {match.group(1)!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[match.group(1)]()
    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: each page's Markdown, its markers expanded."""
    return expand(markdown)


if __name__ == "__main__":
    for wanted in sys.argv[1:] or list(GENERATORS):
        print(GENERATORS[wanted]())
        print()
