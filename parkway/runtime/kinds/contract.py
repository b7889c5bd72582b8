"""The ``contract`` kind: a typed request and response (``use_interrupt(contract=...)``, see
:mod:`parkway.runtime.contracts`); its answer is an object that must fit the response model, and its
form is generated from that model's JSON Schema."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidAnswer
from .base import Asked, Kind, register

CONTRACT_SHAPE = (
    "a contract request has a schemaId, a schemaVersion and its contract, and no options: "
    "build it with use_interrupt(contract=..., request=...)"
)


@register
class ContractKind(Kind):
    name = "contract"
    needs_contract = True

    def check_request(self, request: Asked) -> dict[str, Any] | None:
        if request.options or request.schema_id is None or request.schema_version is None:
            raise ValueError(CONTRACT_SHAPE)
        if request.spec is not None:
            raise ValueError("a contract request has no spec")
        return None

    def validate(self, request: Asked, selected: Any, value: Any, contract: Any) -> Any:
        if selected is not None or value is None:
            raise InvalidAnswer(f"a contract request ({request.schema_id}) takes value=<an object>, not selected")
        if contract is None:
            raise InvalidAnswer(f"no contract to check the answer against ({request.schema_id})")
        if (contract.schema_id, contract.version) != (request.schema_id, request.schema_version):
            raise InvalidAnswer(
                f"the request was made under {request.schema_id} v{request.schema_version}, but the contract "
                f"now defined there is {contract.schema_id} v{contract.version}"
            )
        return contract.check_answer(value)

    def presentation(self, public: Any) -> str:
        return "contract"

    def widget(self, request: Asked) -> dict[str, Any]:
        return {"control": "form", "answer": "value", "tag": self.name}

    def notes(self, request: Asked, contract: Any = None) -> list[str]:
        """The schema, the request's data and the response model's fields, one a line (none in a
        listing, which has no contract at hand)."""
        if contract is None:
            return []
        lines = [f"(contract {request.schema_id} v{request.schema_version})"]
        if request.payload:
            lines.append(f"request: {json.dumps(request.payload, default=str)}")
        schema = contract.response.model_json_schema()
        fields: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        lines.append("answer fields:")
        width = max((len(name) for name in fields), default=0)
        for name, spec in fields.items():
            line = f"  {name:<{width}}  {_schema_type(spec)}, {'required' if name in required else 'optional'}"
            if spec.get("description"):
                line += f" - {spec['description']}"
            limits = _schema_limits(spec)
            lines.append(line + (f" ({'; '.join(limits)})" if limits else ""))
        return lines

    def hint(self, request: Asked) -> str:
        return "answer (a JSON object, on one line): "

    def read(self, request: Asked, line: str) -> dict[str, Any]:
        try:
            return {"value": json.loads(line)}
        except json.JSONDecodeError as exc:
            raise InvalidAnswer(f"that is not JSON ({exc.msg}, column {exc.colno})") from None
        except RecursionError:
            raise InvalidAnswer("that JSON nests too deeply") from None


def _as_json(value: Any) -> str:
    return json.dumps(value, default=str)


def _schema_type(spec: dict[str, Any]) -> str:
    """A JSON schema's type in words: string, integer or null, list of string, one of "a", "b"..."""
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1] + " (an object)"
    for key in ("anyOf", "oneOf"):
        if key in spec:
            return " or ".join(_schema_type(s) for s in spec[key])
    if "enum" in spec:
        return "one of " + ", ".join(_as_json(v) for v in spec["enum"])
    if "const" in spec:
        return _as_json(spec["const"])
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
        limits.append(f"default {_as_json(spec['default'])}")
    return limits
