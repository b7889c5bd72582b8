"""The base of the API's request and response bodies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelBody(BaseModel):
    """A body as the API spells it: camelCase only (``run_id`` is refused, naming ``runId``)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as the API sends it."""
    return model.model_dump(mode="json", by_alias=True)
