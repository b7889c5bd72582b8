"""The stored form is named once for Lua too: script bodies name hash fields through the generated
``F``/``P``/``V`` tables (from layout.py) and read a reply by name (``hmget``), never ``cur[3]``."""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable

import pytest
import redis

from parkway.adapters.redis import layout
from parkway.adapters.redis.scripts import scripts

FOLDERS = (
    resources.files("parkway.adapters.redis.scripts"),
    resources.files("parkway.sessions").joinpath("lua"),
    resources.files("parkway.workers.rq_internals"),
)
LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'")
POSITIONAL = re.compile(r"\b[A-Za-z_]\w*\s*\[\s*\d+\s*\]")
CONCAT = re.compile(r"\s*\.\.")
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("session_answer.lua", "return {'kept'}"): "a reply word to its caller (sessions/client.py reads 'kept'), "
                                               "not the run hash's field of the same name",
}
"""(file, the offending code, stripped) -> why it must stay: a literal that only looks like a field"""


def _files() -> list[Traversable]:
    return sorted((p for folder in FOLDERS for p in folder.iterdir() if p.name.endswith(".lua")),
                  key=lambda p: p.name)


def _code_lines(text: str) -> list[str]:
    """The code of a Lua file, line by line: comments (and so a script's header) cut off."""
    out = []
    for line in text.splitlines():
        code, _, _ = line.partition("--")
        out.append(code)
    return out


def _spelled(code: str) -> list[str]:
    """The hash-field names a line of code spells: a literal that is a field's name, or a field
    prefix (``'s:' .. req``) a value is joined to."""
    fields = set(layout.HASH_FIELDS)
    prefixes = [p for p in layout.HASH_PREFIXES.values() if len(p) > 1]
    exact = {p for p in layout.HASH_PREFIXES.values() if len(p) == 1}
    found = []
    for m in LITERAL.finditer(code):
        text, joined = m.group(1), bool(CONCAT.match(code, m.end()))
        if text in fields or (joined and (text in exact or text.startswith(tuple(prefixes)))):
            found.append(m.group(0))
    return found


def violations(name: str, text: str) -> tuple[list[str], list[str]]:
    """The spelled field names and the positional reads (``x[3]``) in a Lua file's code, each as
    ``<file>:<line>: <code>``, less the stated exceptions."""
    spelled, positional = [], []
    for n, code in enumerate(_code_lines(text), 1):
        if (name, code.strip()) in EXCEPTIONS:
            continue
        spelled += [f"{name}:{n}: {hit} in {code.strip()}" for hit in _spelled(code)]
        positional += [f"{name}:{n}: {hit} in {code.strip()}" for hit in POSITIONAL.findall(code)]
    return spelled, positional


def test_no_script_spells_a_hash_field_or_reads_a_reply_by_position() -> None:
    """Every .lua file names hash fields through F/P/V and reads replies by name: 0 and 0."""
    spelled: list[str] = []
    positional: list[str] = []
    for path in _files():
        s, p = violations(path.name, path.read_text())
        spelled += s
        positional += p
    assert (len(spelled), len(positional)) == (0, 0), "\n".join(spelled + positional)


def test_the_counter_finds_a_spelled_field_and_a_positional_read() -> None:
    """The counter is not blind: a spelled field, a spelled prefix and ``cur[3]`` are each found."""
    text = ("local cur = redis.call('HMGET', K.run, 'status', F.step)\n"
            "if cur[2] then redis.call('HDEL', K.run, 's:' .. req) end  -- 'fence' in a comment is prose\n")
    spelled, positional = violations("x.lua", text)
    assert spelled == ["x.lua:1: 'status' in local cur = redis.call('HMGET', K.run, 'status', F.step)",
                       "x.lua:2: 's:' in if cur[2] then redis.call('HDEL', K.run, 's:' .. req) end"]
    assert positional == ["x.lua:2: cur[2] in if cur[2] then redis.call('HDEL', K.run, 's:' .. req) end"]


def test_every_exception_is_still_there() -> None:
    """A stated exception names code that still exists (a fixed one is removed from the list)."""
    codes = {(p.name, c.strip()) for p in _files() for c in _code_lines(p.read_text())}
    assert set(EXCEPTIONS) <= codes


@pytest.mark.parametrize("bound", [False, True], ids=["runtime", "generated reader"])
def test_the_generated_names_are_layouts(redis_client: redis.Redis, bound: bool) -> None:
    """F, P and V are layout.py's names, and hmget reads a hash by the scripts' names (``until``
    and ``~0``, not Lua names, by ``until_ms`` and ``folded_first``), the generated reader a
    script's call is bound to (scripts.bind_reads) as the runtime one."""
    r = redis_client
    r.delete("pw-fields-test")
    r.hset("pw-fields-test", mapping={"status": "running", "until": "7", "~0": "x", "s:i1": "pending"})
    body = ("local key = KEYS[1]\n"
            "local got = hmget(key, {F.status, F.until_ms, F.folded_first, P.status .. 'i1', F.fence})\n"
            "return {got.status, got.until_ms, got.folded_first, got[P.status .. 'i1'], tostring(got.fence),"
            " F.until_ms, P.gate, V.waiting}")
    if bound:
        body = scripts.readers(body) + "\n" + scripts.bind_reads(body)
        assert "hmget(" not in body
    got = r.eval(scripts.common() + "\n" + body, 1, "pw-fields-test")
    r.delete("pw-fields-test")
    assert [v.decode() for v in got] == ["running", "7", "x", "pending", "false", "until", layout.GATE_PREFIX,
                                         "waiting"]



def test_every_scripts_reads_are_bound_to_generated_readers() -> None:
    """No script's text calls the runtime hmget (a loop, ~4x a reader's cost): each call has its reader."""
    import parkway.sessions.calls  # noqa: F401 - adds the sessions' scripts to the loader

    names = [p.name.removesuffix(".lua") for p in _files()
             if not p.name.startswith("_") and p.name.removesuffix(".lua") in scripts.schemas()]
    assert "begin" in names and "session_send" in names
    for name in names:
        text = scripts.source(name, "")
        assert len(re.findall(r"\bhmget\(", text)) == 1, name  # its definition alone
