"""Asking a person at the terminal: an interrupt's question, its options or its contract's fields,
until the answer fits (``parkway run`` and ``parkway resume`` at a terminal, the demo)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..runtime import kinds
from ..runtime.errors import InvalidAnswer, ParkwayError

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

    The request's kind says what to show and how to read a line (:mod:`parkway.runtime.kinds`). A
    contract request needs its ``contract`` (see :func:`contract_of`): the answer is a JSON value,
    checked against its response model here before it is sent."""
    kind = kinds.get(request.kind)
    if kind.needs_contract and contract is None:
        raise ParkwayError(f"no contract to check an answer to {request.schema_id} against")
    out.write(f"\n{request.question}\n")
    for line in kind.notes(request, contract):
        out.write(line + "\n")
    for i, option in enumerate(request.options, 1):
        out.write(f"  {i}. {option.label} [{option.id}]" + (f" - {option.description}" if option.description else ""))
        out.write("\n")
    from ..runtime.answers import validate_answer

    while True:
        try:
            out.write(kind.hint(request))
            out.flush()
            answer = kind.read(request, _line(stdin))
            validate_answer(request, contract=contract, **answer)
        except InvalidAnswer as exc:
            out.write(f"{_terminal_words(exc.message)}; try again\n")
            continue
        return answer


def contract_of(pw: Parkway, request: InterruptRequest) -> Contract[Any, Any] | None:
    """The contract a contract request was made under (imported as the resuming client finds it), or None."""
    return pw.settings.modules.load_contract(request.contract_ref) if request.contract_ref else None


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
