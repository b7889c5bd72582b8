"""What an interrupt kind is: one object that knows its requests, its answers and how each surface
asks for them. Each kind lives in one module of this package and registers itself here; callers ask
the kind (:func:`get`), they never branch on its name.

A kind says:

- its request's shape (:meth:`Kind.check_request`; its own settings travel in the request's ``spec``,
  and the top-level keys it names in ``spec_keys`` are moved there);
- how an answer is checked and what is recorded (:meth:`Kind.validate`), and which resume argument
  carries it (``answer_arg``: ``selected`` or ``value``; ``cli_flag`` at the command line);
- how a lifecycle record presents it (:meth:`Kind.presentation`);
- its page widget (:meth:`Kind.widget`): a small declarative description the inbox page draws with
  no per-kind code (see :data:`CONTROLS`);
- its terminal prompt (:meth:`Kind.notes`, :meth:`Kind.hint`, :meth:`Kind.read`);
- its one-click answer links (:meth:`Kind.link_options`, :meth:`Kind.link_answer`): none unless it has
  options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ..errors import InvalidAnswer, MalformedResume, ValidationError

MAX_SELECTED = 1000
MAX_ID_LENGTH = 200

CONTROLS = ("buttons", "checkboxes", "field", "form")
"""The widgets the inbox page draws (a kind's :meth:`Kind.widget` names one):

- ``buttons``: one button per option of ``options``; a click sends ``{answer: option id}``;
- ``checkboxes``: a box per option; sends ``{answer: [checked ids]}``;
- ``field``: one input, ``input`` (``textarea`` or an ``<input>`` type such as ``text`` or
  ``datetime-local``) with ``label``, optional ``hint``, ``maxLength``, ``min``, ``max``; sends
  ``{answer: what was typed + suffix}``, split on commas into a list when ``list`` is true;
- ``form``: fields generated from the JSON Schema of ``GET /v1/interrupts/{id}/form``; sends
  ``{answer: the object}``.

Every widget carries ``answer`` (the body key: ``selected`` or ``value``) and ``tag`` (what the
card's kind label says)."""


class Option(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def description(self) -> str | None: ...


class Asked(Protocol):
    """What a kind reads of a request (``parkway.runtime.protocol.InterruptRequest``)."""

    @property
    def kind(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def options(self) -> Sequence[Option]: ...
    @property
    def schema_id(self) -> str | None: ...
    @property
    def schema_version(self) -> int | None: ...
    @property
    def max_length(self) -> int: ...
    @property
    def payload(self) -> dict[str, Any] | None: ...
    @property
    def contract_ref(self) -> str | None: ...
    @property
    def spec(self) -> dict[str, Any] | None: ...


class Kind:
    """An interrupt kind; the defaults fit a kind that takes one typed ``value`` and has no options."""

    name: ClassVar[str]
    answer_arg: ClassVar[str] = "value"
    """the resume argument its answer travels in: ``selected`` or ``value``"""
    cli_flag: ClassVar[str] = "--value"
    """the ``parkway resume`` flag that carries its answer"""
    needs_contract: ClassVar[bool] = False
    """its answers are checked against a contract the resuming client loads"""
    multiple: ClassVar[bool] = False
    """its answer is a list of option ids"""
    spec_keys: ClassVar[frozenset[str]] = frozenset()
    """top-level keys of a request of this kind that belong in its ``spec``"""

    def check_request(self, request: Asked) -> dict[str, Any] | None:
        """Raise ValueError if ``request`` is not a request of this kind; return its ``spec``, normalised."""
        if request.contract_ref is not None or request.payload is not None:
            raise ValueError("only a contract request carries a contract and a payload")
        if request.spec is not None:
            raise ValueError(f"a {self.name} request has no spec")
        return None

    def validate(self, request: Asked, selected: Any, value: Any, contract: Any) -> Any:
        """The value to record for this answer, or InvalidAnswer."""
        raise NotImplementedError

    def is_picker(self, request: Asked) -> bool:
        """Whether ``request`` is a dynamic picker: options the client resolves, any id accepted."""
        return False

    def presentation(self, public: Mapping[str, Any]) -> str:
        """How a client shows it (``InterruptLifecycle.presentation``), from the request as clients see it."""
        return "freeform"

    def widget(self, request: Asked) -> dict[str, Any]:
        """Its page widget (see :data:`CONTROLS`)."""
        raise NotImplementedError

    def notes(self, request: Asked, contract: Any = None) -> list[str]:
        """Lines the terminal shows under the question (the options are shown by the caller)."""
        return []

    def hint(self, request: Asked) -> str:
        """The terminal prompt."""
        return "> "

    def read(self, request: Asked, line: str) -> dict[str, Any]:
        """The resume keyword arguments for a line typed at the terminal (InvalidAnswer if unreadable)."""
        return {self.answer_arg: line}

    def link_options(self, request: Asked) -> Sequence[Option]:
        """The options one-click answer links may answer with (none: this kind takes no links)."""
        return ()

    def link_answer(self, request: Asked, option: str) -> dict[str, Any]:
        """The resume keyword arguments of a link's option."""
        return {"selected": [option] if self.multiple else option}


_KINDS: dict[str, Kind] = {}


def register(kind: type[Kind]) -> type[Kind]:
    """Class decorator: make ``kind`` known by its name (import its module from ``kinds/__init__.py``)."""
    if kind.name in _KINDS:
        raise ValueError(f"interrupt kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind()
    return kind


def get(name: str) -> Kind:
    """The kind called ``name``; ValidationError for a name no kind has."""
    found = _KINDS.get(name)
    if found is None:
        raise ValidationError(f"unknown interrupt kind {name!r}; parkway knows {names()}")
    return found


def find(name: object) -> Kind | None:
    """The kind called ``name``, or None."""
    return _KINDS.get(name) if isinstance(name, str) else None


def names() -> tuple[str, ...]:
    """Every kind's name, in the order they registered."""
    return tuple(_KINDS)


def option_ids(raw: object, where: str) -> list[str]:
    """Normalise every accepted ``selected`` shape to a list of ids: an id, a list of ids,
    ``{choice: {id}}``, ``{choices: [{id}...]}``, ``{id, label}``."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, Mapping):
        if set(raw) == {"choice"}:
            return option_ids(raw["choice"], where + ".choice")
        if set(raw) == {"choices"}:
            return option_ids(raw["choices"], where + ".choices")
        if set(raw) == {"id"} or ("id" in raw and "label" in raw):
            return option_ids(raw["id"], where + ".id")
        raise MalformedResume(f"{where} must be an id, a list of ids, {{choice: {{id}}}} or {{choices: [{{id}}]}}")
    if isinstance(raw, Sequence) and not isinstance(raw, (bytes, bytearray)):
        if len(raw) > MAX_SELECTED:
            raise MalformedResume(f"{where} holds more than {MAX_SELECTED} ids")
        out: list[str] = []
        for i, item in enumerate(raw):
            if isinstance(item, Mapping):
                out.extend(option_ids(item, f"{where}[{i}]"))
            elif isinstance(item, str):
                out.append(item)
            else:
                raise MalformedResume(f"{where}[{i}] must be a string id, not {type(item).__name__}")
        return out
    raise MalformedResume(f"{where} must be an id, a list of ids, {{choice: {{id}}}} or {{choices: [{{id}}]}}")


def no_selected(kind: str, selected: Any, takes: str) -> None:
    """InvalidAnswer for option ids given to a kind that takes a value."""
    if selected is not None:
        raise InvalidAnswer(f"a {kind} request takes {takes}, not selected")
