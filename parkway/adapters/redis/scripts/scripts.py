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

**Lua.** Each script is a Redis function (:func:`library`: a library of one function, loaded
once, called with FCALL). Its text (:func:`source` whole) is: the constants Python owns
(:data:`CONSTANTS`, and ``outbox_member`` generated from ``keys.OUTBOX_MEMBER``; the stored form's
names, :func:`fields_lua`), the binders of the calls the script carries in its own values (``USES``:
``SPEC.<name>``), the readers of its ``hmget`` calls (:func:`readers`), ``_common.lua``, the job hand-off's Lua
(the store's ``NextJob.lua``, assigning ``hand_off``), the shared files it uses, then the
prologue, then the body. The prologue is Lua generated from the header (:func:`prologue`): a
length check of ARGV and of KEYS, then one table constructor each
(``K = {run = KEYS[1], journal = KEYS[2], queues = {unpack(KEYS, 3, 2 + _n1)}}``), a counted loop
per list of blocks; nothing reads a schema when the script runs (the prologue runs on every call).
So a body reads ``K.run``, ``A.fence``, ``A.events`` (a list), ``K.parent.run`` (a block), never
``ARGV[17]``; it names a hash field ``F.status`` (a prefixed one ``P.status .. req``, a stored value
spelled like a field ``V.waiting``), from layout.py (:func:`fields_lua`), and reads a hash by those
names: ``local cur = hmget(K.run, {F.status, F.step})`` then ``cur.status``, never ``cur[1]``
(tests/test_script_fields.py counts both). Each such call (its list written out) is bound when the
text is assembled to a reader generated for its list (:func:`bind_reads`: one HMGET, one table
constructor); a shared function takes the bound tables it needs (``notify_parent(K.parent,
A.parent)``). ``bind_call(SPEC.resume, keys, args)`` binds a call embedded in a script's values
with resume's generated binder.

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
render KEYS and ARGV in header order, each one generated list display (:func:`renderer`, made when
the class registers); ``call.script`` is the script's name.

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
import hashlib
import re
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, ClassVar, Literal, TypeVar

from .. import keys, layout

Kind = Literal["one", "count", "tail", "block", "blocks", "opt"]
Side = Literal["keys", "argv"]

CONSTANTS: dict[str, int] = {
    "BEGUN_MAX_BYTES": layout.BEGUN_MAX_BYTES,
    "BUCKET_MAX": keys.BUCKET_MAX,
    "CLOCK_TRUST_MS": layout.CLOCK_TRUST_MS,
    "FOLD_MAX": layout.FOLD_MAX,
    "FOLD_WAKE_MS": layout.FOLD_WAKE_MS,
    "NOTICES_MAXLEN": keys.NOTICES_MAXLEN,
    "PART_BYTES": layout.PART_BYTES,
    "RENEW_SLACK": layout.RENEW_SLACK,
}
"""the numbers Python and Lua share, written into every script from these definitions"""
KEY_PARTS: dict[str, str] = {
    "BUCKET_DIRECTORY": keys.BUCKET_DIRECTORY,
    "BUCKET_SEPARATOR": keys.BUCKET_SEPARATOR,
    "BUCKET_COUNT": keys.BUCKET_COUNT,
}
"""what a bucketed index's keys add to the index's name (keys.bucket_directory, bucket, bucket_count):
the one place Lua builds key names, from the index key its caller declared"""

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
    """A script's (or a block's) arguments by name; ``keys()`` and ``args()`` in header order
    (each class's own, generated from its header when it registers: :func:`renderer`)."""

    SCHEMA: ClassVar[Schema]

    @property
    def script(self) -> str:
        return self.SCHEMA.name

    def keys(self) -> list[Any]:
        raise SchemaMismatch(f"{type(self).__name__} is not registered (@schema): it has no header to render")

    def args(self) -> list[Any]:
        raise SchemaMismatch(f"{type(self).__name__} is not registered (@schema): it has no header to render")


_METHOD: dict[Side, str] = {"keys": "keys", "argv": "args"}


def _part(e: Entry, counted: Entry | None, side: Side) -> str:
    """What entry ``e`` of an object ``o`` adds to its list (``counted``: what ``#e`` counts)."""
    v, method = f"o.{e.name}", _METHOD[side]
    if e.kind == "count":
        kind = counted.kind if counted is not None else None
        return "1" if kind == "block" else f"(0 if {v} is None else 1)" if kind == "opt" else f"len({v})"
    if e.kind == "one":
        return v
    if e.kind == "tail":
        return f"*{v}"
    if e.kind == "block":
        return f"*{v}.{method}()"
    if e.kind == "opt":
        return f"*({v}.{method}() if {v} is not None else ())"
    return f"*[x for b in {v} for x in b.{method}()]"


def renderer(s: Schema, side: Side) -> Callable[[Any], list[Any]]:
    """The function rendering ``side`` of an object of schema ``s`` in header order: one list display
    generated from the header (``[o.run, o.journal, *o.filters, len(o.filters), *o.closing.keys()]``),
    tails unpacked, counts from what they count, blocks by their own class's. A call is that one
    expression; nothing reads the header then (as the Lua prologue, :func:`prologue`)."""
    fields = {e.name: e for e in (*s.keys, *s.argv) if e.field}
    parts = [_part(e, fields.get(e.name), side) for e in getattr(s, side)]
    name = f"render_{s.name}_{side}"
    namespace: dict[str, Any] = {}
    exec(f"def {name}(o):\n    return [{', '.join(parts)}]", namespace)  # noqa: S102 - text from a parsed header
    function: Callable[[Any], list[Any]] = namespace[name]
    function.__doc__ = f"{s.name}'s {side.upper()} in header order (generated by scripts.renderer)."
    return function


@dataclass(frozen=True)
class ScriptCall:
    """One call of a transition's script: its name (the .lua file's), the run, KEYS and ARGV as
    sent, and the typed arguments they were rendered from."""

    name: str
    run_id: str | None
    keys: list[Any]
    args: list[Any]
    params: Args

    @classmethod
    def of(cls, run_id: str | None, params: Args) -> ScriptCall:
        return cls(params.script, run_id, params.keys(), params.args(), params)


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
        cls.keys = renderer(found, "keys")  # type: ignore[method-assign,assignment]
        cls.args = renderer(found, "argv")  # type: ignore[method-assign,assignment]
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


# --- Lua: the prelude and the binders generated from the headers ---------------------------


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
    lines = ["-- generated by parkway/adapters/redis/scripts/scripts.py from layout.py and keys.py: do not edit here"]
    lines += [f"local {name} = {value}" for name, value in CONSTANTS.items()]
    lines += [f"local {name} = {_lua_str(value)}" for name, value in KEY_PARTS.items()]
    lines.append(f"local RUN_FIELDS = {{{', '.join(_lua_str(name) for name in layout.RUN_FIELDS)}}}")
    lines.append(f"local FOLDED_TYPES = {{{', '.join(_lua_str(name) for name in layout.FOLDED_TYPES)}}}")
    codes = ", ".join(f"[{_lua_str(name)}] = {i}" for i, name in enumerate(layout.FOLDED_TYPES, 1))
    lines.append(f"local FOLDED_CODES = {{{codes}}}")
    lines.append(f"local FOLDED = {{{', '.join(_lua_str(f'~{i}') for i in range(layout.FOLD_MAX))}}}")
    lines.append(lua_template("outbox_member", keys.OUTBOX_MEMBER))
    lines += fields_lua()
    return "\n".join(lines)


_LUA_NAME = {"until": "until_ms", layout.folded_event_field(0): "folded_first"}
"""a field whose name is not a Lua name (a keyword, ``~0``), by the name the scripts give it"""


def _lua_fields() -> dict[str, str]:
    """layout.HASH_FIELDS by the scripts' names for them (``F.<name>``)."""
    return {_LUA_NAME.get(name, name): name for name in layout.HASH_FIELDS}


def _lua_table(names: dict[str, str]) -> str:
    return "{" + ", ".join(f"{name} = {_lua_str(value)}" for name, value in names.items()) + "}"


def fields_lua() -> list[str]:
    """The stored form's names, for a script body to name instead of spelling them: ``F.<field>``
    (``layout.HASH_FIELDS``), ``P.<prefix>`` (``layout.HASH_PREFIXES``), ``V.<value>``
    (``layout.STORED_VALUES``), and ``hmget(key, {F.status, F.fence, ...})``: one HMGET, its
    reply as a table by the scripts' names (``cur.status``, or ``cur[A.token_field]`` for a
    field the script was given)."""
    stored = _lua_fields()
    names = ", ".join(f"[{_lua_str(value)}] = {_lua_str(name)}" for name, value in stored.items())
    return [
        f"local F = {_lua_table(stored)}",
        f"local P = {_lua_table(layout.HASH_PREFIXES)}",
        f"local V = {_lua_table(layout.STORED_VALUES)}",
        f"local FORMAT_READS = {max(layout.READS_FORMATS)}",
        f"local RELATIVE_MS = {layout.RELATIVE_MS}",
        f"local BUCKETS_FORMAT = {layout.BUCKETS_FORMAT}",
        f"local FIELD_NAME = {{{names}}}",
        "local function hmget(key, fields)",
        "  local got, out = redis.call('HMGET', key, unpack(fields)), {}",
        "  for i = 1, #fields do local f = fields[i]; out[FIELD_NAME[f] or f] = got[i] end",
        "  return out",
        "end",
    ]


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


class _Counts:
    """Where a pass finds the counts the ARGV pass read: Lua locals (``names``) and the bound ARGV
    of lists of blocks (``lists``), or, inside a loop over blocks, that element's bound ARGV table
    ``base``, which then holds its counts as ``['#name']``."""

    def __init__(self, base: str | None = None) -> None:
        self.base = base
        self.names: dict[str, str] = {}
        self.blocks: dict[str, _Counts] = {}
        self.lists: dict[str, str] = {}

    def count(self, name: str, where: str) -> str:
        if self.base is not None:
            return f"{self.base}['#{name}']"
        if name not in self.names:
            raise SchemaMismatch(f"{where}: #{name} is not in the ARGV bound with it")
        return self.names[name]

    def block(self, name: str) -> _Counts:
        return self.blocks.get(name, _Counts()) if self.base is None else _Counts(f"{self.base}.{name}")

    def bound(self, name: str) -> str | None:
        return self.lists.get(name) if self.base is None else f"{self.base}.{name}"


@dataclass(frozen=True)
class _Pos:
    """Where the next value is: ``base + off`` (``base`` a Lua local), or ``off`` while every width
    before it is fixed; ``open``: an uncounted tail ran to the end of the list from there."""

    base: str | None
    off: int
    open: bool = False

    def at(self, plus: int = 0) -> str:
        if self.base is None:
            return str(self.off + plus)
        off = self.off + plus
        return f"{self.base} + {off}" if off > 0 else f"{self.base} - {-off}" if off < 0 else self.base

    def step(self) -> _Pos:
        return _Pos(self.base, self.off + 1)


class _Binder:
    """Writes the straight-line Lua that binds a schema's KEYS and ARGV to named tables: one
    table constructor per table, a counted loop per list of blocks; nothing reads a schema when
    the script runs. ARGV is bound first: its counts size the tails and blocks of both lists."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ids = 0

    def local(self, stem: str) -> str:
        self.ids += 1
        return f"_{stem}{self.ids}"

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def part(self, s: Schema, side: Side, lst: str, pos: _Pos, counts: _Counts, depth: int,
             looped: bool) -> tuple[str, _Pos]:
        """A table constructor for one side of ``s``, read from ``lst`` from ``pos`` on (the lines
        it needs emitted before it), and the position after it."""
        fields: list[str] = []
        where = f"schema {s.name!r}"
        counted = {c.name for c in s.argv if c.kind == "count"}
        for e in s.keys if side == "keys" else s.argv:
            if pos.open:
                raise SchemaMismatch(f"{where}: {e.name} follows a tail that runs to the end")
            if e.kind == "count":
                n = self.local("n")
                self.emit(depth, f"local {n} = tonumber({lst}[{pos.at()}])")
                counts.names[e.name] = n
                if looped:  # the KEYS pass of this block reads it from the bound table
                    fields.append(f"['#{e.name}'] = {n}")
                pos = pos.step()
            elif e.kind == "one":
                fields.append(f"{e.name} = {lst}[{pos.at()}]")
                pos = pos.step()
            elif e.kind == "tail" and e.name not in counted:
                fields.append(f"{e.name} = {{unpack({lst}, {pos.at()})}}")
                pos = _Pos(pos.base, pos.off, open=True)
            elif e.kind == "tail":
                n = counts.count(e.name, where)
                fields.append(f"{e.name} = {{unpack({lst}, {pos.at()}, {pos.at(-1)} + {n})}}")
                end = self.local("p")
                self.emit(depth, f"local {end} = {pos.at()} + {n}")
                pos = _Pos(end, 0)
            elif e.kind == "block":
                inner = counts.block(e.name)
                if side == "argv" and counts.base is None:
                    counts.blocks[e.name] = inner
                built, pos = self.part(schemas()[e.block or ""], side, lst, pos, inner, depth, looped)
                fields.append(f"{e.name} = {built}")
            else:
                twin = any(a.name == e.name for a in s.argv)
                value, pos = self.blocks(e, side, lst, pos, counts, depth, twin, where)
                fields.append(f"{e.name} = {value}")
        return "{" + ", ".join(fields) + "}", pos

    def blocks(self, e: Entry, side: Side, lst: str, pos: _Pos, counts: _Counts, depth: int, twin: bool,
               where: str) -> tuple[str, _Pos]:
        """A list of blocks, or a block that may be absent (a list of 0 or 1): a counted loop."""
        n, out, cursor, i = counts.count(e.name, where), self.local("b"), self.local("p"), self.local("i")
        self.emit(depth, f"local {cursor} = {pos.at()}")
        self.emit(depth, f"local {out} = {{}}" if e.kind == "blocks" else f"local {out}")
        inner = _Counts()
        if side == "argv" and counts.base is None:
            counts.lists[e.name] = out
        elif side == "keys" and twin:
            bound = counts.bound(e.name)
            inner = _Counts(f"{bound}[{i}]" if e.kind == "blocks" else bound)
        self.emit(depth, f"for {i} = 1, {n} do")  # a loop's own index: an inner loop reads the outer's
        built, after = self.part(schemas()[e.block or ""], side, lst, _Pos(cursor, 0), inner, depth + 1, True)
        self.emit(depth + 1, f"{out}[{i}] = {built}" if e.kind == "blocks" else f"{out} = {built}")
        self.emit(depth + 1, f"{cursor} = {after.at()}")
        self.emit(depth, "end")
        return out, _Pos(cursor, 0)

    def check(self, depth: int, lst: str, label: str, end: _Pos) -> None:
        """An error when ``lst`` holds more or fewer values than the header named."""
        if end.open:
            self.emit(depth, f"if #{lst} < {end.at(-1)} then error('{label} holds ' .. #{lst} .. "
                             f"' values, its header names at least ' .. ({end.at(-1)})) end")
        else:
            self.emit(depth, f"if #{lst} ~= {end.at(-1)} then error('{label} holds ' .. #{lst} .. "
                             f"' values, its header names ' .. ({end.at(-1)})) end")

    def call(self, s: Schema, keys: str, args: str, depth: int) -> None:
        """Lines assigning ``K`` and ``A`` (declared by the caller) from the lists ``keys`` and ``args``."""
        counts = _Counts()
        built, end = self.part(s, "argv", args, _Pos(None, 1), counts, depth, False)
        self.check(depth, args, "ARGV", end)
        self.emit(depth, f"A = {built}")
        built, end = self.part(s, "keys", keys, _Pos(None, 1), counts, depth, False)
        self.check(depth, keys, "KEYS", end)
        self.emit(depth, f"K = {built}")


def prologue(name: str) -> str:
    """The lines binding script ``name``'s own KEYS and ARGV to ``K`` and ``A``, generated from its
    header (a length check, then a constructor per table)."""
    b = _Binder()
    b.call(schemas()[name], "KEYS", "ARGV", 1)
    return "\n".join([f"-- generated by scripts.py from {name}.lua's header", "local K, A", "do", *b.lines, "end"])


def spec_lua(names: Sequence[str]) -> str:
    """``SPEC.<name>``, generated binders for calls a script carries in its own values:
    ``SPEC.<name>.call(keys, args)`` gives K, A (``bind_call`` in _common.lua) and
    ``SPEC.<name>.argv(list, at)`` binds ARGV alone from ``at`` on (``bind``)."""
    lines = ["local SPEC = {}"]
    for name in names:
        s = schemas()[name]
        call = _Binder()
        call.call(s, "keys", "args", 1)
        argv = _Binder()
        built, end = argv.part(s, "argv", "list", _Pos("at", 0), _Counts(), 1, False)
        after = "#list + 1" if end.open else end.at()
        lines += [f"SPEC.{name} = {{}}",
                  f"SPEC.{name}.call = function(keys, args)", "  local K, A", *call.lines, "  return K, A", "end",
                  f"SPEC.{name}.argv = function(list, at)", *argv.lines, f"  return {built}, {after}", "end"]
    return "\n".join(lines)


def _shared(names: Sequence[str]) -> Iterator[str]:
    """The shared files a script needs: ``_<name>.lua`` of each schema it binds, when there is one."""
    for name in _closure(names):
        if any(folder.joinpath(f"_{name}.lua").is_file() for folder in _FOLDERS):
            yield f"_{name}.lua"


def common() -> str:
    """The constants and ``_common.lua``, for a script written on the spot (tests)."""
    readers = _Readers()
    text = readers.compile(resources.files(__package__).joinpath("_common.lua").read_text())
    return "\n".join([constants(), spec_lua([]), *readers.lines, text])


def bind_reads(text: str) -> str:
    """``text`` (a .lua file) with its ``hmget`` calls made calls of their generated readers
    (:class:`_Readers`), as it is in a script's text; a reader is named after its list, wherever
    it is bound."""
    return _Readers().compile(text)


def readers(text: str) -> str:
    """The definitions of the readers the ``hmget`` calls of ``text`` are bound to (:func:`bind_reads`)."""
    found = _Readers()
    found.compile(text)
    return "\n".join(found.lines)


_HMGET = re.compile(r"\bhmget\((?P<key>[A-Za-z_][\w.]*), \{(?P<fields>[^{}]*)\}\)")


class _Readers:
    """The ``hmget(key, {F.status, F.step, A.token_field})`` calls of a script's text, each made a
    call of a reader generated for its list: one HMGET of the stored names (layout.py's), its reply
    bound in one table constructor (``{status = v[1], step = v[2], [f1] = v[3]}``), a field the
    script was given (``A.token_field``) passed in and keyed by its value. The same table the
    runtime ``hmget`` builds, at the cost of a constructor (the loop's table grows, rehashing, as
    it fills: about four times the cost). ``unpack(RUN_FIELDS)`` in a list stands for those fields."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.known: dict[tuple[str, ...], str] = {}

    def reader(self, items: list[str]) -> str:
        static = {f"F.{lua}": stored for lua, stored in _lua_fields().items()}
        names: list[str] = []
        for item in items:
            if item == "unpack(RUN_FIELDS)":
                names += [f"F.{_LUA_NAME.get(n, n)}" for n in layout.RUN_FIELDS]
            elif item.startswith("F.") and item not in static:
                raise SchemaMismatch(f"hmget names {item}, which layout.HASH_FIELDS does not")
            else:
                names.append(item)
        shape = tuple(n if n in static else "?" for n in dict.fromkeys(names))
        if shape in self.known:
            return self.known[shape]
        fname = "hmget_" + hashlib.sha1(repr(shape).encode()).hexdigest()[:8]  # the same list, the same name
        self.known[shape] = fname
        params = [f"f{i}" for i, n in enumerate(shape, 1) if n == "?"]
        asked = [(_lua_str(static[n]) if n in static else f"f{i}") for i, n in enumerate(shape, 1)]
        bound = [(f"{n[2:]} = v[{i}]" if n in static else f"[f{i}] = v[{i}]") for i, n in enumerate(shape, 1)]
        self.lines += [f"local function {fname}({', '.join(['key', *params])})",
                       f"  local v = redis.call('HMGET', key, {', '.join(asked)})",
                       f"  return {{{', '.join(bound)}}}", "end"]
        return fname

    def compile(self, text: str) -> str:
        def call(m: re.Match[str]) -> str:
            items = [" ".join(i.split()) for i in m.group("fields").split(",") if i.strip()]
            static = {f"F.{lua}" for lua in _lua_fields()} | {"unpack(RUN_FIELDS)"}
            given = [i for i in dict.fromkeys(items) if i not in static]
            return f"{self.reader(items)}({', '.join([m.group('key'), *given])})"

        return _HMGET.sub(call, text)


def _parts(name: str, hand_off: str) -> tuple[list[str], list[str]]:
    """Script ``name``'s text in two: what it defines (constants, the binders of calls it carries
    (USES), _common.lua, ``hand_off``, the shared files its schema needs) and what a call runs (its
    generated prologue, its body)."""
    if name not in schemas():
        raise SchemaMismatch(f"{name}.lua has no header (-- KEYS / -- ARGV)")
    readers = _Readers()
    shared = [readers.compile(_file(f).read_text()) for f in ["_common.lua", *_shared([name])]]
    body = readers.compile(_file(f"{name}.lua").read_text())
    defines = [constants(), spec_lua(schemas()[name].uses), *readers.lines, shared[0], hand_off, *shared[1:]]
    return defines, [prologue(name), body]


@functools.cache
def source(name: str, hand_off: str) -> str:
    """Script ``name`` whole, as one chunk (``EVAL``; tests run pieces of it so): constants, the
    binders of calls it carries (USES), _common.lua, ``hand_off`` (the Lua assigning the function
    _common.lua declares: the store's ``NextJob.lua``), the shared files its schema needs, its
    generated prologue, its body."""
    defines, runs = _parts(name, hand_off)
    return "\n".join(defines + runs)


@dataclass(frozen=True)
class Function:
    """A script as Redis keeps it: a library of one function (``FUNCTION LOAD``), called by its
    name (``FCALL``). The library's top level (the constants, the shared functions) runs once, when
    Redis loads it; a call runs the prologue and the body alone. As one chunk sent by ``EVALSHA``,
    every call defined all of it again: about 12 us of each call's ~20 us of Lua besides its
    commands. ``name`` carries a digest of the text: a changed script is another function, and
    processes of two versions each call their own."""

    name: str
    text: str


@functools.cache
def library(name: str, hand_off: str, read_only: bool = False) -> Function:
    """Script ``name`` as a library of one function (see :class:`Function`): its definitions at
    the top, the prologue and body inside the function Redis calls with ``KEYS`` and ``ARGV``.
    ``read_only``: flagged ``no-writes`` (Redis refuses a write from it, and runs it when out of
    memory, as it would a read)."""
    defines, runs = _parts(name, hand_off)
    flags = "{'no-writes'}" if read_only else "{}"
    digest = hashlib.sha1("\n".join([*defines, *runs, flags]).encode()).hexdigest()[:16]
    fname = f"pw_{name}_{digest}"
    text = "\n".join([f"#!lua name={fname}", *defines,
                      f"redis.register_function{{function_name = '{fname}', callback = function(KEYS, ARGV)",
                      *runs, f"end, flags = {flags}}}"])
    return Function(fname, text)
