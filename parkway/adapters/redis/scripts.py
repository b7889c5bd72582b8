"""Each Lua script's schema: its header names its KEYS and ARGV, Python calls it by name.

A script (``advance.lua``) opens with prose, then its schema, a comment any reader can follow::

    -- KEYS
    --   run            the run's hash
    --   filters...     the interrupt's filter indexes (as many as ARGV #filters says)
    --   parent?: parent  the parent's keys (see notify_parent)
    -- ARGV
    --   fence          the fence of the job
    --   #filters       how many filter indexes KEYS holds (written by the caller's object)
    --   events...      (event type, event blob) pairs, to the end

One entry a line, ``--`` then exactly three spaces, the entry, two spaces or more, what it is
(a line indented further continues the description). An entry is:

- ``name``: one value.
- ``name...``: a tail (a Lua list). ``#name`` in the same schema's ARGV counts its values; without
  one it runs to the end of its list (and is the last entry there).
- ``#name``: the number of values of the tail ``name`` (or of blocks, below). Never a field of
  the Python object: rendered from the length of what it counts, so it cannot disagree with it.
- ``name: block``: the entries of another schema (a ``-- BLOCK`` section of a shared ``_*.lua``
  file, or a script's), bound as a table. A block with KEYS and ARGV is named in both lists.
- ``name...: block`` (counted by ``#name``: blocks, not values) and ``name?: block`` (``#name`` is
  0 or 1): lists of blocks, and a block that may be absent (Lua nil, Python None).

A shared file declares blocks as ``-- BLOCK name: what it is`` followed by its KEYS and ARGV
sections. ``-- USES: name ...`` in a script's header adds schemas it binds itself (``bind_call``)
and their shared file (``_resume.lua`` for ``resume``).

**Lua.** The loader (:func:`source`) sends: the constants Python owns (:data:`CONSTANTS`, and
``outbox_member`` generated from ``keys.OUTBOX_MEMBER``), the schemas the script needs as Lua data
(``SPEC.<name>``), ``_common.lua`` (which holds ``bind``), the job hand-off's Lua (the store's
``NextJob.lua``, assigning ``hand_off``), the shared files it uses, then a
prologue binding ``K`` and ``A``, then the body. So a body reads ``K.run``, ``A.fence``,
``A.events`` (a list), ``K.parent.run`` (a block), never ``ARGV[17]``; a shared function takes the
bound tables it needs (``notify_parent(K.parent, A.parent)``). ``bind_call(SPEC.resume, keys, args)``
binds a call embedded in a script's tails.

**Python.** One frozen dataclass per schema, its fields the header's names in order (KEYS then
ARGV; a block named in both lists is one field holding the block's object; counts are no fields;
tails are lists, blocks their class, optional blocks ``X | None``)::

    @schema("refuse")
    @dataclass(frozen=True)
    class Refuse(Args):
        run: str
        summary: str
        token_field: str
        ...

``@schema`` checks the class against the parsed header when the module defining it is imported
and raises :class:`SchemaMismatch` naming the difference. ``call.keys()`` and ``call.args()``
render KEYS and ARGV in header order; ``call.script`` is the script's name.

Adding a field: add it to the header where it belongs and to the class at the same place; the
body reads it by name. Nothing else moves.

**A feature's scripts** live in its own package, in a folder it hands the loader with
:func:`add_folder` before defining their classes (``parkway/sessions/calls.py`` adds
``parkway/sessions/lua/``): their headers, ``-- BLOCK`` sections and shared files (``_session.lua``)
join this folder's, so they may name this folder's blocks (``new_run``, ``resume``) and are loaded
and checked alike; the store registers them by name (``RedisStore.add_scripts``). Nothing here
imports the feature.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, ClassVar, Literal, TypeVar

from . import keys, layout

Kind = Literal["one", "count", "tail", "block", "blocks", "opt"]

CONSTANTS: dict[str, int] = {
    "FOLD_MAX": layout.FOLD_MAX,
    "FOLD_WAKE_MS": layout.FOLD_WAKE_MS,
    "PART_BYTES": layout.PART_BYTES,
}
"""the numbers Python and Lua share, written into every script from these definitions"""

class SchemaMismatch(TypeError):
    """A script's header and the Python class that calls it disagree (raised at import)."""


@dataclass(frozen=True)
class Entry:
    """One line of a header: a name, what kind of value it binds, and (blocks) whose schema."""

    name: str
    kind: Kind
    doc: str
    block: str | None = None

    @property
    def field(self) -> bool:
        """Whether the Python object has a field for it (counts are rendered, not given)."""
        return self.kind != "count"


@dataclass(frozen=True)
class Schema:
    """A script's (or a block's) KEYS and ARGV, as its header declares them."""

    name: str
    keys: tuple[Entry, ...]
    argv: tuple[Entry, ...]
    uses: tuple[str, ...] = ()

    def fields(self) -> list[Entry]:
        """The Python object's fields, in order: KEYS then ARGV (a block in both lists once)."""
        seen = {e.name for e in self.keys}
        return [e for e in self.keys if e.field] + [e for e in self.argv if e.field and e.name not in seen]

    def refs(self) -> list[str]:
        """The schemas this one binds through blocks or USES."""
        return [*(e.block for e in (*self.keys, *self.argv) if e.block), *self.uses]


_ENTRY = re.compile(r"^--   (?P<spec>\S+(?:: [a-z_][a-z0-9_]*)?)(?:\s{2,}(?P<doc>.*))?$")
_SPEC = re.compile(r"^(?P<count>#)?(?P<name>[a-z_][a-z0-9_]*)(?P<mark>\.\.\.|\?)?(?:: (?P<block>[a-z_][a-z0-9_]*))?$")
_SECTION = re.compile(r"^-- (?P<part>KEYS|ARGV)\s*$")
_BLOCK = re.compile(r"^-- BLOCK (?P<name>[a-z_][a-z0-9_]*):")
_USES = re.compile(r"^-- USES: (?P<names>[a-z_0-9 ]+)$")
_MORE = re.compile(r"^--\s{4,}\S")


def _entry(line: str, where: str) -> Entry:
    found = _ENTRY.match(line)
    spec = _SPEC.match(found.group("spec")) if found else None
    if not found or not spec:
        raise SchemaMismatch(f"{where}: not a header entry: {line!r}")
    name, mark, block = spec.group("name"), spec.group("mark"), spec.group("block")
    if spec.group("count"):
        kind: Kind = "count"
    elif block:
        kind = "blocks" if mark == "..." else "opt" if mark == "?" else "block"
    else:
        kind = "tail" if mark == "..." else "one"
    if mark == "?" and not block:
        raise SchemaMismatch(f"{where}: {name}? must name a block")
    return Entry(name, kind, found.group("doc") or "", block)


def parse(text: str, where: str) -> dict[str, Schema]:
    """The schemas a file declares: a script's header (its leading comment, named ``where``), or a
    shared file's ``-- BLOCK`` sections (each a comment block of its own, anywhere in the file)."""
    shared = where.startswith("_")
    out: dict[str, Schema] = {}
    name: str | None = None if shared else where
    parts: dict[str, list[Entry]] = {"KEYS": [], "ARGV": []}
    uses: list[str] = []
    part: list[Entry] | None = None

    def close() -> None:
        if name is not None and (parts["KEYS"] or parts["ARGV"] or uses):
            out[name] = Schema(name, tuple(parts["KEYS"]), tuple(parts["ARGV"]), tuple(uses))

    for line in text.splitlines():
        if not line.startswith("--"):
            if not shared:
                break  # a script's header ends where its code begins
            close()
            name, parts, uses, part = None, {"KEYS": [], "ARGV": []}, [], None
        elif shared and (block := _BLOCK.match(line)):
            close()
            name, parts, uses, part = block.group("name"), {"KEYS": [], "ARGV": []}, [], None
        elif name is not None and (section := _SECTION.match(line)):
            part = parts[section.group("part")]
        elif name is not None and (used := _USES.match(line)):
            uses += used.group("names").split()
        elif part is not None and _MORE.match(line):
            continue  # the entry above, described further
        elif part is not None and line.startswith("--   "):
            part.append(_entry(line, f"{where}.lua"))
        else:
            part = None
    close()
    for schema in out.values():
        _check_schema(schema)
    return out


def _check_schema(s: Schema) -> None:
    """What the binder needs of a header: counts of tails that exist, untold tails last, a block
    named in both lists only as itself."""
    where = f"schema {s.name!r}"
    for part, entries in (("KEYS", s.keys), ("ARGV", s.argv)):
        names = [e.name for e in entries if e.field]
        if len(set(names)) != len(names):
            raise SchemaMismatch(f"{where}: a name twice in {part}")
        counted = {e.name for e in s.argv if e.kind == "count"}
        for i, e in enumerate(entries):
            if e.kind in ("tail",) and e.name not in counted and i != len(entries) - 1:
                raise SchemaMismatch(f"{where}: {e.name}... in {part} has no #{e.name} and is not last")
            if e.kind in ("blocks", "opt") and e.name not in counted:
                raise SchemaMismatch(f"{where}: {e.name} in {part} needs #{e.name} in ARGV")
    key_names = {e.name: e for e in s.keys}
    for e in (e for e in s.argv if e.field):
        twin = key_names.get(e.name)
        if twin is not None and (e.block is None or (twin.kind, twin.block) != (e.kind, e.block)):
            raise SchemaMismatch(f"{where}: {e.name} is in KEYS and ARGV, and not as one block")
    for e in s.argv:
        if e.kind == "count" and not any(t.name == e.name and t.field for t in (*s.keys, *s.argv)):
            raise SchemaMismatch(f"{where}: #{e.name} counts nothing")


_FOLDERS: list[Traversable] = [resources.files(__package__)]
"""where the loader reads scripts: this package's folder, then those features added (``add_folder``)"""


def add_folder(folder: Traversable) -> None:
    """Let the loader read the ``.lua`` files of ``folder`` too (a feature's scripts and shared
    files, such as the sessions package's ``lua/``): their headers join :func:`schemas`, their
    scripts are loaded by :func:`source` like this package's. Call it before defining the classes
    (``@schema``) of its scripts."""
    if str(folder) in {str(f) for f in _FOLDERS}:
        return
    known = schemas()
    _add(known, _parse_folder(folder))
    _FOLDERS.append(folder)


def _file(name: str) -> Traversable:
    """The ``.lua`` file ``name`` in the first folder that has it."""
    for folder in _FOLDERS:
        if folder.joinpath(name).is_file():
            return folder.joinpath(name)
    raise SchemaMismatch(f"no folder of scripts holds {name}")


def _parse_folder(folder: Traversable) -> dict[str, Schema]:
    out: dict[str, Schema] = {}
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name.endswith(".lua"):
            _add(out, parse(path.read_text(), path.name.removesuffix(".lua")), check=False)
    return out


def _add(out: dict[str, Schema], found: dict[str, Schema], check: bool = True) -> None:
    clash = set(found) & set(out)
    if clash:
        raise SchemaMismatch(f"schema {sorted(clash)} declared twice")
    out.update(found)
    for s in out.values() if check else ():
        for ref in s.refs():
            if ref not in out:
                raise SchemaMismatch(f"schema {s.name!r} names {ref!r}, which no header declares")


@functools.cache
def schemas() -> dict[str, Schema]:
    """Every schema the ``.lua`` files of the folders declare, by name (scripts by their file's)."""
    out: dict[str, Schema] = {}
    for folder in _FOLDERS:
        _add(out, _parse_folder(folder))
    return out


# --- Python: the argument objects ------------------------------------------------------------


class Args:
    """A script's (or a block's) arguments by name; ``keys()`` and ``args()`` in header order."""

    SCHEMA: ClassVar[Schema]

    @property
    def script(self) -> str:
        return self.SCHEMA.name

    def keys(self) -> list[Any]:
        return _render(self, "keys")

    def args(self) -> list[Any]:
        return _render(self, "argv")


def _render(obj: Args, side: Literal["keys", "argv"]) -> list[Any]:
    out: list[Any] = []
    for e in getattr(obj.SCHEMA, side):
        value = getattr(obj, e.name)
        if e.kind == "count":
            out.append(0 if value is None else 1 if isinstance(value, Args) else len(value))
        elif e.kind == "one":
            out.append(value)
        elif e.kind == "tail":
            out.extend(value)
        else:
            blocks = [] if value is None else [value] if isinstance(value, Args) else value
            for block in blocks:
                out.extend(_render(block, side))
    return out


A = TypeVar("A", bound=type[Args])
_CLASSES: dict[str, type[Args]] = {}


def schema(name: str) -> Callable[[A], A]:
    """Register a frozen dataclass as the arguments of the schema ``name``, checked now against
    its header: the same names in the same order, lists for tails, the blocks' classes for blocks."""

    def register(cls: A) -> A:
        found = schemas().get(name)
        if found is None:
            raise SchemaMismatch(f"{cls.__name__}: no header declares a schema {name!r}")
        _check_class(cls, found)
        cls.SCHEMA = found
        _CLASSES[name] = cls
        return cls

    return register


def _check_class(cls: type, s: Schema) -> None:
    where = f"{cls.__name__} (for {s.name}.lua's header)"
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise SchemaMismatch(f"{where}: not a frozen dataclass")
    have = [(f.name, str(f.type)) for f in dataclasses.fields(cls)]
    want = s.fields()
    if [n for n, _ in have] != [e.name for e in want]:
        raise SchemaMismatch(
            f"{where}: fields {[n for n, _ in have]} do not match the header's {[e.name for e in want]} (in order)"
        )
    for (name, annotation), e in zip(have, want, strict=True):
        listed = annotation.startswith(("list[", "Sequence[", "tuple["))
        if (e.kind in ("tail", "blocks")) != listed:
            raise SchemaMismatch(f"{where}: {name} is {e.kind} in the header, {annotation} here")
        if e.kind == "opt" and "None" not in annotation:
            raise SchemaMismatch(f"{where}: {name} may be absent in the header ({name}?): annotate it X | None")
        if e.block:
            block = _CLASSES.get(e.block)
            if block is None or block.__name__ not in annotation:
                raise SchemaMismatch(f"{where}: {name} is a block {e.block!r}: annotate it with its class")


def classes() -> dict[str, type[Args]]:
    """The registered argument classes, by schema name."""
    return dict(_CLASSES)


# --- Lua: the prelude, the schemas as data, the prologue ------------------------------------


def _lua_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lua_template(name: str, template: str) -> str:
    """A Lua function that builds ``template`` (a ``str.format`` string of named fields) the way
    Python's ``template.format(**fields)`` does: one definition for both languages."""
    parts, params = [], []
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append(_lua_str(literal))
        if field:
            params.append(field)
            parts.append(field)
    return f"local function {name}({', '.join(params)}) return {' .. '.join(parts)} end"


def constants() -> str:
    """The Lua lines that define what Python owns (its values, its outbox member format)."""
    lines = ["-- generated by parkway/adapters/redis/scripts.py from layout.py and keys.py: do not edit here"]
    lines += [f"local {name} = {value}" for name, value in CONSTANTS.items()]
    lines.append(f"local RUN_FIELDS = {{{', '.join(_lua_str(name) for name in layout.RUN_FIELDS)}}}")
    lines.append(lua_template("outbox_member", keys.OUTBOX_MEMBER))
    return "\n".join(lines)


def _lua_part(part: Sequence[Entry], side: str) -> str:
    items = []
    for e in part:
        if e.block:
            items.append(f"{{{_lua_str(e.name)}, {_lua_str(e.kind)}, SPEC.{e.block}.{side}}}")
        else:
            items.append(f"{{{_lua_str(e.name)}, {_lua_str(e.kind)}}}")
    return "{" + ", ".join(items) + "}"


def _closure(names: Sequence[str]) -> list[str]:
    """``names`` and every schema they bind, each after those it binds."""
    out: list[str] = []

    def visit(name: str) -> None:
        if name in out:
            return
        for ref in schemas()[name].refs():
            visit(ref)
        out.append(name)

    for name in names:
        visit(name)
    return out


def spec_lua(names: Sequence[str]) -> str:
    """``SPEC.<name> = {keys = ..., argv = ...}`` for ``names`` and what they bind (see ``bind``)."""
    lines = ["local SPEC = {}"]
    for name in _closure(names):
        s = schemas()[name]
        lines.append(f"SPEC.{name} = {{keys = {_lua_part(s.keys, 'keys')}, argv = {_lua_part(s.argv, 'argv')}}}")
    return "\n".join(lines)


PROLOGUE = "local K, A = bind_call(SPEC.{name}, KEYS, ARGV)"
"""what binds a script's own KEYS and ARGV, after the shared files (``bind_call`` in _common.lua)"""


def _shared(names: Sequence[str]) -> Iterator[str]:
    """The shared files a script needs: ``_<name>.lua`` of each schema it binds, when there is one."""
    for name in _closure(names):
        if any(folder.joinpath(f"_{name}.lua").is_file() for folder in _FOLDERS):
            yield f"_{name}.lua"


def common() -> str:
    """The constants and ``_common.lua``, for a script written on the spot (tests)."""
    return "\n".join([constants(), spec_lua([]), resources.files(__package__).joinpath("_common.lua").read_text()])


@functools.cache
def source(name: str, hand_off: str) -> str:
    """The whole text sent to Redis for script ``name``: constants, schemas, _common.lua,
    ``hand_off`` (the Lua assigning the function _common.lua declares: the store's ``NextJob.lua``),
    the shared files its schema needs, prologue, body."""
    if name not in schemas():
        raise SchemaMismatch(f"{name}.lua has no header (-- KEYS / -- ARGV)")
    parts = [constants(), spec_lua([name]), _file("_common.lua").read_text(), hand_off]
    parts += [_file(f).read_text() for f in _shared([name])]
    parts += [PROLOGUE.format(name=name), _file(f"{name}.lua").read_text()]
    return "\n".join(parts)
