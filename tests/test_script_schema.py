"""Each Lua script's header is its schema: bodies read names, Python calls through a checked object."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import fakeredis
import pytest

from parkway.adapters.redis import keys, layout
from parkway.adapters.redis.scripts import calls, scripts
from parkway.adapters.redis.scripts.scripts import Args, SchemaMismatch, schema
from parkway.sessions import calls as session_calls

FOLDER = resources.files("parkway.adapters.redis.scripts")
SESSIONS = resources.files("parkway.sessions").joinpath("lua")
FOLDERS = (FOLDER, SESSIONS)
RAW = re.compile(r"\b(ARGV|KEYS)\[")


def _script_names() -> list[str]:
    return sorted(p.name.removesuffix(".lua") for folder in FOLDERS for p in folder.iterdir()
                  if p.name.endswith(".lua") and not p.name.startswith("_"))


def _read(name: str) -> str:
    """The text of the .lua file ``name`` (without .lua), in whichever folder holds it."""
    return next(f.joinpath(f"{name}.lua") for f in FOLDERS if f.joinpath(f"{name}.lua").is_file()).read_text()


CONVERTED = _script_names()


def _code(text: str) -> str:
    """A Lua file without its comments (a header may say ``KEYS``)."""
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("name", CONVERTED)
def test_a_script_body_reads_its_keys_and_arguments_by_name(name: str) -> None:
    """No script body indexes KEYS or ARGV: the generated prologue binds them to the header's names."""
    assert not RAW.search(_code(_read(name)))


@pytest.mark.parametrize("name", ["_common", "_resume", "_park", "_session"])
def test_the_shared_functions_take_what_they_read_by_name(name: str) -> None:
    """The shared files index no KEYS or ARGV either: their functions take bound tables."""
    assert not RAW.search(_code(_read(name)))


def test_the_session_scripts_come_from_their_package_through_the_loaders_seam() -> None:
    """The sessions package adds its lua/ folder to the loader (no adapter module imports it): its
    scripts and blocks have headers and classes like the store's, and their text holds _session.lua."""
    assert session_calls.SessionSwitch.SCHEMA is scripts.schemas()["session_switch"]
    assert "session_send" in _script_names() and not FOLDER.joinpath("session_send.lua").is_file()
    text = scripts.source("session_send", "")
    assert scripts.bind_reads(_read("_session")) in text
    assert text.rstrip().endswith(scripts.bind_reads(_read("session_send")).rstrip())
    for path in Path(str(resources.files("parkway.adapters").joinpath("redis"))).rglob("*.py"):
        assert "parkway.sessions" not in path.read_text() and "..sessions" not in path.read_text(), path.name


@pytest.mark.parametrize("name", CONVERTED)
def test_every_script_has_a_header_and_a_class_that_matches_it(name: str) -> None:
    """Every script declares its KEYS and ARGV, and one registered class (checked at import) calls it."""
    assert name in scripts.schemas()
    assert scripts.classes()[name].SCHEMA is scripts.schemas()[name]


def test_the_prologue_binds_names_after_the_shared_files() -> None:
    """The text sent to Redis is constants, shared files, then the prologue generated from the header, then the body."""
    text = scripts.source("redispatch", "")
    assert text.index("local FOLD_MAX") < text.index("local function stale(") < text.index("local K, A\n")
    assert "K = {run = KEYS[1], outbox = KEYS[2]}" in text
    assert text.rstrip().endswith(scripts.bind_reads(FOLDER.joinpath("redispatch.lua").read_text()).rstrip())


@pytest.mark.parametrize("name", CONVERTED)
def test_nothing_reads_a_schema_when_a_script_runs(name: str) -> None:
    """A script's own K and A are straight-line constructors: no schema tables, no generic binder."""
    text = scripts.source(name, "")
    assert "bind_call(" not in scripts.prologue(name) and "SPEC." not in scripts.prologue(name)
    assert ("\nSPEC." in text) == bool(scripts.schemas()[name].uses)


def test_a_class_whose_fields_differ_from_the_header_is_refused_when_defined() -> None:
    """Fields out of the header's order (or missing, or extra) raise as the class is defined."""
    with pytest.raises(SchemaMismatch, match="redispatch"):

        @schema("redispatch")
        @dataclass(frozen=True)
        class Swapped(Args):
            outbox: str
            run: str
            run_id: str
            step: int
            fence: int
            now: int
            member: str


def test_a_class_that_is_not_frozen_or_names_no_header_is_refused() -> None:
    """Only a frozen dataclass, for a script that has a header, is registered."""
    with pytest.raises(SchemaMismatch, match="frozen"):

        @schema("lookup")
        @dataclass
        class Loose(Args):
            run: str
            summary: str
            token_field: str
            now: int
            status_prefix: str

    with pytest.raises(SchemaMismatch, match="no header"):

        @schema("no_such_script")
        @dataclass(frozen=True)
        class Nowhere(Args):
            run: str


def test_a_header_entry_is_parsed_with_its_kind() -> None:
    """Names, tails, counts, blocks, lists of blocks and optional blocks each parse as themselves."""
    text = "\n".join([
        "-- What it does.",
        "-- KEYS",
        "--   run            the run",
        "--   filters...     counted by #filters",
        "--   parent?: blk   a block that may be absent",
        "-- ARGV",
        "--   #filters       how many",
        "--   #parent        0 or 1",
        "--   #kids          how many kids",
        "--   kids...: blk   blocks",
        "--   parent?: blk   its arguments",
        "--                  described at length",
        "--   rest...        to the end",
        "return 1",
    ])
    found = scripts.parse(text, "x")["x"]
    assert [(e.name, e.kind, e.block) for e in found.keys] == [
        ("run", "one", None), ("filters", "tail", None), ("parent", "opt", "blk")]
    assert [(e.name, e.kind) for e in found.argv] == [
        ("filters", "count"), ("parent", "count"), ("kids", "count"), ("kids", "blocks"), ("parent", "opt"),
        ("rest", "tail")]
    assert [e.name for e in found.fields()] == ["run", "filters", "parent", "kids", "rest"]


def test_a_header_that_the_binder_could_not_follow_is_refused() -> None:
    """A tail neither counted nor last, or a name in KEYS and ARGV that is not one block, raises."""
    with pytest.raises(SchemaMismatch, match="not last"):
        scripts.parse("-- KEYS\n--   a...  tail\n--   b  one\nreturn 1", "x")
    with pytest.raises(SchemaMismatch, match="KEYS and ARGV"):
        scripts.parse("-- KEYS\n--   a  one\n-- ARGV\n--   a  one\nreturn 1", "x")


def test_the_shared_constants_are_written_into_the_lua_from_python() -> None:
    """FOLD_MAX, FOLD_WAKE_MS and PART_BYTES reach every script from keys.py, defined nowhere in Lua."""
    lines = scripts.constants().splitlines()
    assert f"local FOLD_MAX = {layout.FOLD_MAX}" in lines
    assert f"local FOLD_WAKE_MS = {layout.FOLD_WAKE_MS}" in lines
    assert f"local PART_BYTES = {layout.PART_BYTES}" in lines
    for path in (p for folder in FOLDERS for p in folder.iterdir()):
        if path.name.endswith(".lua"):
            assert not re.search(r"local (FOLD_MAX|FOLD_WAKE_MS|PART_BYTES|function outbox_member)\b",
                                 path.read_text()), path.name
    for name in _script_names():
        assert scripts.constants() in scripts.source(name, "")


def test_the_outbox_member_is_built_in_lua_as_python_builds_it() -> None:
    """outbox_member in the scripts is generated from keys.OUTBOX_MEMBER and agrees with keys.outbox_member."""
    assert scripts.lua_template("f", "{a}:{b}") == "local function f(a, b) return a .. ':' .. b end"
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    run = client.register_script(scripts.common() + "\nreturn outbox_member(ARGV[1], ARGV[2], ARGV[3])")
    assert run(args=["run_a--b:c", 3, 7]).decode() == keys.outbox_member("run_a--b:c", 3, 7)
    assert keys.outbox_job(keys.outbox_member("run_a--b:c", 3, 7)) == ("run_a--b:c", 3, 7)


def test_lua_binds_what_python_renders_by_the_same_names() -> None:
    """An object's KEYS and ARGV, bound in Lua by its schema, give back each field by its name."""
    call = calls.Refuse("k:run", "k:sum", "t:x", 5, "s:y", "req", "f:y", "fl:y", b"blob")
    got = _bound("refuse", call, "{K.run, K.summary, A.token_field, A.refusal}")
    assert got == [b"k:run", b"k:sum", b"t:x", b"blob"]


def test_a_call_carried_in_a_scripts_values_binds_by_its_schemas_generated_binder() -> None:
    """bind_call(SPEC.<name>, ...) (a schema a script USES) binds as that script's own prologue does."""
    call = calls.Refuse("k:run", "k:sum", "t:x", 5, "s:y", "req", "f:y", "fl:y", b"blob")
    probe = "\nlocal K, A = bind_call(SPEC.refuse, KEYS, ARGV)\nreturn {K.run, K.summary, A.token_field, A.refusal}"
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    text = "\n".join([scripts.constants(), scripts.spec_lua(["refuse"]),
                      FOLDER.joinpath("_common.lua").read_text(), probe])
    assert client.register_script(text)(keys=call.keys(), args=call.args()) == [b"k:run", b"k:sum", b"t:x", b"blob"]
    probe = "\nreturn bind(SPEC.refuse.argv, ARGV, 2).refusal"
    text = "\n".join([scripts.constants(), scripts.spec_lua(["refuse"]),
                      FOLDER.joinpath("_common.lua").read_text(), probe])
    assert client.register_script(text)(keys=[], args=["x", *call.args()]) == b"blob"


def _bound(name: str, call: Args, returns: str) -> list[object]:
    """What ``returns`` (Lua over the bound K and A) gives for ``call`` bound by script ``name``'s schema."""
    probe = f"\n{scripts.prologue(name)}\nreturn {returns}"
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    text = "\n".join([scripts.constants(), FOLDER.joinpath("_common.lua").read_text(), probe])
    return client.register_script(text)(keys=call.keys(), args=call.args())  # type: ignore[no-any-return]


def _parent() -> calls.Parent:
    names = [f.name for f in __import__("dataclasses").fields(calls.Parent)]
    values: dict[str, object] = {n: f"p.{n}" for n in names}
    return calls.Parent(**{**values, "queues": ["q1", "q2"], "job": ["j1", "j2", "j3"]})  # type: ignore[arg-type]


def _advance(parent: calls.Parent | None, emitted: list[object]) -> calls.Advance:
    return calls.Advance("run", "j", "ws", "ev", "sum", "leases", "metrics", "snap", parent, 1, 2, b"d", "", b"o",
                         3, 4, 5, "r", emitted, [])


def test_tails_and_an_optional_block_bind_by_their_counts() -> None:
    """A counted tail, then a block that may be absent, bind to their own values in KEYS and ARGV."""
    with_parent = _advance(_parent(), ["node.a", b"1", "node.b", b"2"])
    assert with_parent.args()[:2] == [4, 1]  # the counts come first, rendered from the fields
    got = _bound("advance", with_parent,
                 "{#A.emitted, A.emitted[3], K.parent.run, K.parent.queues[2], A.parent.run_id, #A.parent.job,"
                 " A.parent.job[3], K.snapshots, A.run_id}")
    assert got == [4, b"node.b", b"p.run", b"q2", b"p.run_id", 3, b"j3", b"snap", b"r"]
    assert _bound("advance", _advance(None, []), "{#A.emitted, K.parent == nil and 1 or 0, A.run_id}") == [0, 1, b"r"]


def test_a_list_of_blocks_binds_each_block_by_name() -> None:
    """Blocks counted in ARGV (ancestors, children) each bind their own keys and arguments."""
    child = [calls.Child(f"c{i}.run", f"c{i}.sum", f"c{i}.ev", f"c{i}", "wf", "ref", "n", b"in", 9, b"s", "w:x",
                         "", "c:x", b"e", b"pe", "", 2, ["job", str(i)]) for i in range(2)]
    fan = calls.FanOut("run", "j", "ws", "ev", "sum", "leases", "outbox", "runs", "snap", "fo", [], child, 1, 2,
                       3, "r", 5, 6, 7, 8, 9, [""])
    got = _bound("fanout", fan, "{#K.children, K.children[2].summary, A.children[2].run_id, A.children[2].job[2],"
                                " #K.queues, A.job[1], A.left}")
    assert got == [2, b"c1.sum", b"c1", b"1", 0, b"", b"9"]


def test_a_call_the_header_does_not_account_for_is_an_error() -> None:
    """Values past (or short of) what the header names make the script fail, not read the wrong ones."""
    call = calls.Refuse("k:run", "k:sum", "t:x", 5, "s:y", "req", "f:y", "fl:y", b"blob")
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    text = "\n".join([scripts.constants(), FOLDER.joinpath("_common.lua").read_text(), scripts.prologue("refuse"),
                      "return 1"])
    with pytest.raises(Exception, match="ARGV holds 8 values, its header names 7"):
        client.register_script(text)(keys=call.keys(), args=[*call.args(), "extra"])
    with pytest.raises(Exception, match="KEYS holds 1 values, its header names 2"):
        client.register_script(text)(keys=call.keys()[:1], args=call.args())
    advance = _advance(_parent(), ["node.a", b"1"])  # 8 keys, the parent's 12 and its 2 queues
    text = "\n".join([scripts.constants(), FOLDER.joinpath("_common.lua").read_text(), scripts.prologue("advance"),
                      "return 1"])
    with pytest.raises(Exception, match="KEYS holds 21 values, its header names 22"):
        client.register_script(text)(keys=advance.keys()[:-1], args=advance.args())


def _resume(tag: str) -> calls.Resume:
    names = [f.name for f in __import__("dataclasses").fields(calls.Resume)]
    values: dict[str, object] = {n: f"{tag}.{n}" for n in names}
    closing = calls.Closing(*(f"{tag}.c{i}" for i in range(6)))
    notice = calls.Notice(f"{tag}.on", f"{tag}.notices")
    return calls.Resume(**{**values, "closing": closing, "notice": notice,  # type: ignore[arg-type]
                           "filters": [f"{tag}.f1"], "queues": ["q1", "q2"], "job": [f"{tag}.j1"]})


def test_blocks_inside_a_list_of_blocks_bind_by_their_own_counts() -> None:
    """A session switch's deliveries (a list of blocks) each carry a resume call or none (an
    optional block with tails of its own): each binds its own, whatever the ones before it hold."""
    deliveries = [
        session_calls.Delivery(None, "req1", "run1", b"d1", b"u1"),
        session_calls.Delivery(_resume("r2"), "req2", "run2", b"d2", b"u2"),
        session_calls.Delivery(_resume("r3"), "req3", "run3", b"d3", b"u3"),
    ]
    session = session_calls.Session(*(f"s.{i}" for i in range(10)))
    switch = session_calls.SessionSwitch(session, deliveries, "head", 5, 6, b"sw")
    got = _bound("session_switch", switch, "{#K.deliveries, A.deliveries[1].resume == nil and 1 or 0,"
                 " K.deliveries[2].resume.filters[1], K.deliveries[3].resume.queues[2], A.deliveries[3].resume.job[1],"
                 " A.deliveries[3].resume.closing.created, A.deliveries[3].request_id, K.session.events, A.switched}")
    assert got == [3, 1, b"r2.f1", b"q2", b"r3.j1", b"r3.c5", b"req3", b"s.7", b"sw"]


def _sample(cls: type[Args], tag: str, present: bool) -> Args:
    """An object of ``cls`` whose every value names its place (``tag.field``, tails of two, blocks
    of their own class, lists of two blocks, optional blocks there when ``present``)."""
    values: dict[str, object] = {}
    for e in cls.SCHEMA.fields():
        name = f"{tag}.{e.name}"
        block = scripts.classes()[e.block] if e.block else None
        if e.kind == "one":
            values[e.name] = name
        elif e.kind == "tail":
            values[e.name] = [f"{name}.1", f"{name}.2"]
        elif e.kind == "block" and block is not None:
            values[e.name] = _sample(block, name, present)
        elif e.kind == "blocks" and block is not None:
            values[e.name] = [_sample(block, f"{name}.{i}", present) for i in (1, 2)]
        elif block is not None:
            values[e.name] = _sample(block, name, present) if present else None
    return cls(**values)


def _walked(obj: Args, side: str) -> list[object]:
    """``side`` of ``obj`` as its header reads, entry by entry (the generated renderers' specification)."""
    out: list[object] = []
    for e in getattr(obj.SCHEMA, side):
        value = getattr(obj, e.name)
        if e.kind == "count":
            out.append(0 if value is None else 1 if isinstance(value, Args) else len(value))
        elif e.kind == "one":
            out.append(value)
        elif e.kind == "tail":
            out.extend(value)
        else:
            for block in [] if value is None else [value] if isinstance(value, Args) else value:
                out.extend(_walked(block, side))
    return out


@pytest.mark.parametrize("name", sorted(scripts.classes()))
@pytest.mark.parametrize("present", [True, False])
def test_every_class_renders_keys_and_argv_in_header_order(name: str, present: bool) -> None:
    """Each registered class's keys() and args() are its header's entries in order: tails spread,
    counts from what they count, blocks (present or absent) rendered in place."""
    obj = _sample(scripts.classes()[name], "x", present)
    assert (obj.keys(), obj.args()) == (_walked(obj, "keys"), _walked(obj, "argv"))


def test_an_unregistered_class_says_so() -> None:
    """An Args class that never registered (@schema) has no header, and says so when rendered."""

    @dataclass(frozen=True)
    class Loose(Args):
        run: str

    with pytest.raises(SchemaMismatch, match="not registered"):
        Loose("r").keys()
