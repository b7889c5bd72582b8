"""The ``text`` kind: free text, at most the request's ``maxLength`` characters."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidAnswer
from .base import Asked, Kind, register


@register
class Text(Kind):
    name = "text"
    cli_flag = "--text"

    def check_request(self, request: Asked) -> dict[str, Any] | None:
        super().check_request(request)
        if request.options:
            raise ValueError("a text request has no options")
        return None

    def validate(self, request: Asked, selected: Any, value: Any, contract: Any) -> Any:
        if selected is not None and value is None:
            # other clients send text in `selected`: a string, or a list of one string
            if isinstance(selected, list) and len(selected) == 1:
                selected = selected[0]
            if not isinstance(selected, str):
                raise InvalidAnswer("a text request takes value=<text> (or selected=<text>)")
            value = selected
        if not isinstance(value, str):
            raise InvalidAnswer(f"a text request needs a string value, got {type(value).__name__}")
        if not value.strip():
            raise InvalidAnswer("the text answer is empty")
        if len(value) > request.max_length:
            raise InvalidAnswer(f"the text answer is longer than {request.max_length} characters")
        return value

    def widget(self, request: Asked) -> dict[str, Any]:
        return {"control": "field", "input": "textarea", "label": "Your answer", "maxLength": request.max_length,
                "answer": "value", "tag": self.name}

    def notes(self, request: Asked, contract: Any = None) -> list[str]:
        return [f"(text, at most {request.max_length} characters)"]
