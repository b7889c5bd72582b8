"""Query parameters from the Python listing's own models: one definition of each listing's arguments.

:func:`parameters` turns a query dataclass (``ListingQuery``, ``RunsQuery``) into a FastAPI
dependency whose signature is the dataclass's fields (types, bounds, defaults), spelt as the API
spells them (camelCase, or a name of :class:`Wire`'s), so the OpenAPI document lists each parameter;
it returns the fields' values, for the route's caller rules to build the query from.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Annotated, Any, get_type_hints

from fastapi import Query
from pydantic.alias_generators import to_camel

from ..runtime.listing import ListingQuery, RunsQuery
from ..runtime.protocol import RunStatus


@dataclasses.dataclass(frozen=True)
class Wire:
    """How a field travels in a URL, where it differs from its camelCase name and its own type."""

    name: str | None = None
    type: Any = None
    """what the URL may carry (shown in the document), if not the field's type"""
    read: Callable[[Any], Any] | None = None
    """what the field is given, from what the URL carried"""
    description: str | None = None


def parameters(model: type[Any], wire: Mapping[str, Wire]) -> Callable[..., dict[str, Any]]:
    """A dependency reading ``model``'s fields from the query string (see the module's docstring)."""
    hints = get_type_hints(model, include_extras=True)
    declared = []
    for field in dataclasses.fields(model):
        spec = wire.get(field.name, Wire())
        query = Query(alias=spec.name or to_camel(field.name), description=spec.description)
        annotation = Annotated[spec.type if spec.type is not None else hints[field.name], query]  # type: ignore[valid-type]
        declared.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default,
                                          annotation=annotation))

    def read(**given: Any) -> dict[str, Any]:
        return {name: (wire[name].read or _same)(value) if name in wire else value for name, value in given.items()}

    read.__signature__ = inspect.Signature(declared)  # type: ignore[attr-defined]
    read.__name__ = f"{model.__name__}_parameters"
    return read


def _same(value: Any) -> Any:
    return value


LISTING = parameters(ListingQuery, {
    "include_tokens": Wire(name="tokens"),
    "search": Wire(name="q", description="text the question holds (case ignored)"),
})
"""``GET /v1/interrupts``' parameters: ``ListingQuery``'s fields"""

RUNS = parameters(RunsQuery, {
    "status": Wire(type=RunStatus | None, read=lambda status: status.value if status is not None else None),
})
"""``GET /v1/runs``' parameters: ``RunsQuery``'s fields"""
