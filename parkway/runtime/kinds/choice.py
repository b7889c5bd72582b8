"""The option kinds: ``choice`` (one option id) and ``multi-choice`` (one or more). Either is a
*dynamic picker* when it has a ``schemaId`` and no options: the client resolves the options from its
own data and parkway accepts any non-empty id. Also the request shapes other clients send (no kind,
``multiple: true``), read here as one of these kinds or text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidAnswer, MalformedResume
from .base import MAX_ID_LENGTH, Asked, Kind, Option, option_ids, register


def infer_kind(raw: Any) -> Any:
    """The shapes other clients send: no kind (a choice if it has options, multi-choice with
    ``multiple: true``, else text), or ``kind: "choice"`` with ``multiple: true``."""
    if not isinstance(raw, Mapping) or "multiple" not in raw and "kind" in raw:
        return raw
    out = dict(raw)
    multiple = out.pop("multiple", False)
    if not isinstance(multiple, bool):
        raise ValueError("multiple must be true or false")
    if "kind" not in out:
        out["kind"] = MultiChoice.name if multiple else (Choice.name if out.get("options") else "text")
    elif multiple and out["kind"] == Choice.name:
        out["kind"] = MultiChoice.name
    elif out["kind"] == MultiChoice.name and "multiple" in raw and not multiple:
        raise ValueError("a multi-choice request with multiple: false")
    return out


@register
class Choice(Kind):
    name = "choice"
    answer_arg = "selected"
    cli_flag = "--select"

    def check_request(self, request: Asked) -> dict[str, Any] | None:
        super().check_request(request)
        if not request.options and request.schema_id is None:
            raise ValueError(f"a {self.name} request needs options, or a schema_id for a dynamic picker")
        ids = [o.id for o in request.options]
        if len(ids) != len(set(ids)):
            raise ValueError("option ids must be unique")
        return None

    def validate(self, request: Asked, selected: Any, value: Any, contract: Any) -> Any:
        if value is not None:
            raise InvalidAnswer(f"a {self.name} request takes selected=<option id(s)>, not value")
        if selected is None:
            raise InvalidAnswer(f"a {self.name} request needs selected=<option id(s)>")
        try:
            ids = option_ids(selected, "selected")
        except MalformedResume as exc:
            raise InvalidAnswer(exc.message) from exc
        if not ids:
            raise InvalidAnswer("selected is empty: pick at least one option")
        if len(set(ids)) != len(ids):
            raise InvalidAnswer("selected names an option more than once")
        for oid in ids:
            if not oid or len(oid) > MAX_ID_LENGTH:
                raise InvalidAnswer(f"option ids are 1-{MAX_ID_LENGTH} characters")
        if not self.is_picker(request):
            known = {o.id for o in request.options}
            unknown = [oid for oid in ids if oid not in known]
            if unknown:
                raise InvalidAnswer(f"unknown option id(s) {unknown}; the request offers {sorted(known)}")
        if self.multiple:
            return ids
        if len(ids) != 1:
            raise InvalidAnswer(f"a choice request takes exactly one option, got {len(ids)}")
        return ids[0]

    def is_picker(self, request: Asked) -> bool:
        return request.schema_id is not None and not request.options

    def presentation(self, public: Mapping[str, Any]) -> str:
        return "static-options" if public.get("options") else "dynamic-picker"

    def widget(self, request: Asked) -> dict[str, Any]:
        tag = f"{self.name} (picker {request.schema_id})" if self.is_picker(request) else self.name
        if request.options:
            options = [{"id": o.id, "label": o.label, "description": o.description} for o in request.options]
            return {"control": "checkboxes" if self.multiple else "buttons", "options": options,
                    "answer": "selected", "tag": tag}
        label = "Option ids (comma-separated)" if self.multiple else "Option id"
        return {"control": "field", "input": "text", "label": label, "list": self.multiple, "answer": "selected",
                "tag": tag}

    def hint(self, request: Asked) -> str:
        return f"answer ({'numbers or ids, comma-separated' if self.multiple else 'a number or an id'}): "

    def read(self, request: Asked, line: str) -> dict[str, Any]:
        """Numbers pick the options shown (from 1); anything else is an id."""
        picks = [p.strip() for p in line.split(",") if p.strip()]
        count = len(request.options)
        ids = [request.options[int(p) - 1].id if p.isdigit() and 0 < int(p) <= count else p for p in picks]
        return {"selected": ids if self.multiple else (ids[0] if ids else "")}

    def link_options(self, request: Asked) -> Sequence[Option]:
        return request.options


@register
class MultiChoice(Choice):
    name = "multi-choice"
    multiple = True
