"""Asking a person at the terminal: an interrupt's question, its options or its contract's fields,
until the answer fits (``parkway run`` and ``parkway resume`` at a terminal, the demo)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..runtime.errors import InvalidAnswer, ParkwayError
from .common import as_json

if TYPE_CHECKING:
    from ..client import Parkway
    from ..runtime.contracts import Contract
    from ..runtime.protocol import InterruptRequest


def ask(
    request: InterruptRequest,
    stdin: TextIO = sys.stdin,
    out: TextIO = sys.stderr,
    contract: Contract[Any, Any] | None = None,
) -> dict[str, Any]:
    """Ask a person at the terminal until the answer fits the request; return resume() keyword arguments.

    A contract request needs its ``contract`` (see :func:`contract_of`): the answer is a JSON value,
    checked against its response model here before it is sent."""
    if request.kind == "contract" and contract is None:
        raise ParkwayError(f"no contract to check an answer to {request.schema_id} against")
    out.write(f"\n{request.question}\n")
    if request.kind == "contract":
        assert contract is not None
        _describe_contract(request, contract, out)
    if request.kind == "text":
        out.write(f"(text, at most {request.max_length} characters)\n")
    for i, option in enumerate(request.options, 1):
        out.write(f"  {i}. {option.label} [{option.id}]" + (f" - {option.description}" if option.description else ""))
        out.write("\n")
    from ..runtime.answers import validate_answer

    while True:
        try:
            answer = _prompt(request, stdin, out)
            validate_answer(request, contract=contract, **answer)
        except InvalidAnswer as exc:
            out.write(f"{_terminal_words(exc.message)}; try again\n")
            continue
        return answer


def contract_of(pw: Parkway, request: InterruptRequest) -> Contract[Any, Any] | None:
    """The contract a contract request was made under (imported as the resuming client finds it), or None."""
    return pw.settings.modules.load_contract(request.contract_ref) if request.contract_ref else None


def _describe_contract(request: InterruptRequest, contract: Contract[Any, Any], out: TextIO) -> None:
    """The schema, the request's data and the response model's fields, one a line."""
    out.write(f"(contract {request.schema_id} v{request.schema_version})\n")
    if request.payload:
        out.write(f"request: {as_json(request.payload)}\n")
    schema = contract.response.model_json_schema()
    fields: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    out.write("answer fields:\n")
    width = max((len(name) for name in fields), default=0)
    for name, spec in fields.items():
        line = f"  {name:<{width}}  {_schema_type(spec)}, {'required' if name in required else 'optional'}"
        if spec.get("description"):
            line += f" - {spec['description']}"
        limits = _schema_limits(spec)
        out.write(line + (f" ({'; '.join(limits)})" if limits else "") + "\n")


def _schema_type(spec: dict[str, Any]) -> str:
    """A JSON schema's type in words: string, integer or null, list of string, one of "a", "b"..."""
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1] + " (an object)"
    for key in ("anyOf", "oneOf"):
        if key in spec:
            return " or ".join(_schema_type(s) for s in spec[key])
    if "enum" in spec:
        return "one of " + ", ".join(as_json(v) for v in spec["enum"])
    if "const" in spec:
        return as_json(spec["const"])
    kind = spec.get("type")
    if kind == "array":
        return "list of " + _schema_type(spec["items"]) if isinstance(spec.get("items"), dict) else "list"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind) if kind else "any value"


_LIMITS = (
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("pattern", "matching {}"),
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
)


def _schema_limits(spec: dict[str, Any]) -> list[str]:
    """A field's constraints (its own, and those of the types it may take) and its default, in words."""
    limits = []
    for part in [spec, *spec.get("anyOf", ()), *spec.get("oneOf", ())]:
        limits += [words.format(part[key]) for key, words in _LIMITS if key in part]
    if "default" in spec:
        limits.append(f"default {as_json(spec['default'])}")
    return limits


def _prompt(request: InterruptRequest, stdin: TextIO, out: TextIO) -> dict[str, Any]:
    if request.kind == "contract":
        out.write("answer (a JSON object, on one line): ")
        out.flush()
        line = _line(stdin)
        try:
            return {"value": json.loads(line)}
        except json.JSONDecodeError as exc:
            raise InvalidAnswer(f"that is not JSON ({exc.msg}, column {exc.colno})") from None
        except RecursionError:
            raise InvalidAnswer("that JSON nests too deeply") from None
    if request.kind == "text":
        out.write("> ")
        out.flush()
        return {"value": _line(stdin)}
    hint = "numbers or ids, comma-separated" if request.multiple else "a number or an id"
    out.write(f"answer ({hint}): ")
    out.flush()
    picks = [p.strip() for p in _line(stdin).split(",") if p.strip()]
    ids = []
    for p in picks:
        ids.append(request.options[int(p) - 1].id if p.isdigit() and 0 < int(p) <= len(request.options) else p)
    return {"selected": ids if request.multiple else (ids[0] if ids else "")}


def _terminal_words(message: str) -> str:
    return message.replace("selected is empty", "nothing picked").replace("selected names", "the answer names")


_CLI_WORDS = (
    ("value=<text>", "--text TEXT"),
    ("value=<an object>", "--value JSON"),
    ("selected=<option id(s)>", "--select ID"),
    (" (or selected=<text>)", ""),
    (", not selected", ", not --select"),
    (", not value", ", not --text or --value"),
    ("needs a string value", "needs text (--text TEXT)"),
    ("selected is empty", "--select is empty"),
    ("selected names", "--select names"),
    ("requestId ", "--request-id "),
)


def cli_words(message: str) -> str:
    """An answer's refusal in the command's own flags, not the Python API's keyword arguments."""
    for api, flag in _CLI_WORDS:
        message = message.replace(api, flag)
    return message


def _line(stdin: TextIO) -> str:
    line = stdin.readline()
    if not line:
        raise ParkwayError("no answer: the input ended")
    return line.rstrip("\n")
