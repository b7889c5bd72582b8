"""The ``datetime`` kind: a date and time, between optional bounds, in a time zone.

A request: ``{"kind": "datetime", "question": ..., "timezone": "Europe/Paris", "earliest": ...,
"latest": ...}`` (these three travel in the request's ``spec``; the zone defaults to UTC, a bound is
an ISO 8601 string or a ``datetime``, read in the zone when it has no offset). An answer is an ISO 8601
string that says where it is: with its offset (``2026-12-08T10:30:00+01:00``, ``...Z``) or as a wall
time followed by its zone in brackets (``2026-12-08T10:30[Europe/Paris]``, as RFC 9557 writes it).
A naive answer, one that does not parse, or one outside the bounds is refused; what is recorded (and
what ``use_interrupt`` returns) is the moment as an ISO string in the request's zone.

The inbox page asks with a ``datetime-local`` input in the request's zone; the terminal reads a wall
time in that zone (the prompt names it); it has no options, so it takes no answer links.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidAnswer
from .base import Asked, Kind, no_selected, register

MAX_ANSWER = 100
_ZONED = re.compile(r"(?P<wall>[^\[\]]+)\[(?P<zone>[A-Za-z0-9_+\-/]{1,64})\]")
_WALL = "%Y-%m-%dT%H:%M"
SHAPE = ("an ISO 8601 date and time with its offset (2026-12-08T10:30:00+01:00) or its zone "
         "(2026-12-08T10:30[Europe/Paris])")


def _zone(name: object) -> tzinfo:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_+\-/]{1,64}", name):
        raise ValueError(f"timezone must be an IANA zone name such as 'Europe/Paris', not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown timezone {name!r}: use an IANA zone name such as 'Europe/Paris'") from None


def _parse(text: str, zone: tzinfo | None) -> datetime:
    """``text`` as an aware datetime; ValueError if it does not parse, or is naive and ``zone`` is None."""
    zoned = _ZONED.fullmatch(text)
    if zoned:
        wall = datetime.fromisoformat(zoned["wall"])
        if wall.tzinfo is not None:
            raise ValueError("give an offset or a [zone], not both")
        return wall.replace(tzinfo=_zone(zoned["zone"]))
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        if zone is None:
            raise ValueError("it has no offset or zone")
        moment = moment.replace(tzinfo=zone)
    return moment


def _bound(raw: object, zone: tzinfo, what: str) -> str | None:
    if raw is None:
        return None
    try:
        if isinstance(raw, datetime):
            moment = raw if raw.tzinfo is not None else raw.replace(tzinfo=zone)
        elif isinstance(raw, str) and len(raw) <= MAX_ANSWER:
            moment = _parse(raw, zone)
        else:
            raise ValueError("not a string")
        return moment.astimezone(zone).isoformat()
    except (ValueError, OverflowError) as exc:  # (a moment that moved to the zone leaves years 1-9999)
        raise ValueError(f"{what} must be an ISO 8601 date and time ({exc})") from None


@register
class DateTime(Kind):
    name = "datetime"
    cli_flag = "--text"
    spec_keys = frozenset({"timezone", "earliest", "latest"})

    def check_request(self, request: Asked) -> dict[str, Any] | None:
        if request.options or request.contract_ref is not None or request.payload is not None:
            raise ValueError("a datetime request has no options, contract or payload")
        spec = dict(request.spec or {})
        unknown = set(spec) - self.spec_keys
        if unknown:
            raise ValueError(f"a datetime request's spec takes {sorted(self.spec_keys)}, not {sorted(unknown)}")
        name = spec.get("timezone", "UTC")
        zone = _zone(name)
        earliest = _bound(spec.get("earliest"), zone, "earliest")
        latest = _bound(spec.get("latest"), zone, "latest")
        if earliest and latest and datetime.fromisoformat(earliest) > datetime.fromisoformat(latest):
            raise ValueError(f"earliest ({earliest}) is after latest ({latest})")
        out: dict[str, Any] = {"timezone": name}
        return out | ({"earliest": earliest} if earliest else {}) | ({"latest": latest} if latest else {})

    def validate(self, request: Asked, selected: Any, value: Any, contract: Any) -> Any:
        no_selected(self.name, selected, "value=<an ISO 8601 date and time>")
        if not isinstance(value, str):
            raise InvalidAnswer(f"a datetime request takes {SHAPE}, not {type(value).__name__}")
        if len(value) > MAX_ANSWER:
            raise InvalidAnswer(f"a datetime answer is at most {MAX_ANSWER} characters")
        try:
            moment = _parse(value.strip(), None)
        except (ValueError, OverflowError) as exc:
            raise InvalidAnswer(f"{value!r} is not {SHAPE}: {exc}") from None
        spec = request.spec or {}
        earliest, latest = spec.get("earliest"), spec.get("latest")
        if earliest and moment < datetime.fromisoformat(earliest):
            raise InvalidAnswer(f"{value!r} is before the earliest allowed, {earliest}")
        if latest and moment > datetime.fromisoformat(latest):
            raise InvalidAnswer(f"{value!r} is after the latest allowed, {latest}")
        try:
            return moment.astimezone(_zone(spec.get("timezone", "UTC"))).isoformat()
        except OverflowError:  # in the zone it falls before year 1 or after 9999
            raise InvalidAnswer(f"{value!r} is out of the range of dates (years 1 to 9999)") from None

    def widget(self, request: Asked) -> dict[str, Any]:
        spec = request.spec or {}
        name = spec.get("timezone", "UTC")
        out: dict[str, Any] = {"control": "field", "input": "datetime-local", "label": f"Date and time ({name})",
                               "suffix": f"[{name}]", "answer": "value", "tag": self.name}
        for bound, key in (("earliest", "min"), ("latest", "max")):
            if spec.get(bound):
                out[key] = datetime.fromisoformat(spec[bound]).strftime(_WALL)
        hint = self._span(spec)
        return out | ({"hint": hint} if hint else {})

    def notes(self, request: Asked, contract: Any = None) -> list[str]:
        spec = request.spec or {}
        span = self._span(spec)
        return [f"(a date and time in {spec.get('timezone', 'UTC')}, such as 2026-12-08T10:30"
                + (f"; {span}" if span else "") + ")"]

    def read(self, request: Asked, line: str) -> dict[str, Any]:
        """A wall time typed at the terminal is read in the request's zone (the prompt names it)."""
        text = line.strip()
        try:
            naive = _ZONED.fullmatch(text) is None and datetime.fromisoformat(text).tzinfo is None
        except ValueError:
            naive = False  # refused, with its reason, by validate
        zone = (request.spec or {}).get("timezone", "UTC")
        return {"value": f"{text}[{zone}]" if naive else text}

    @staticmethod
    def _span(spec: dict[str, Any]) -> str:
        earliest, latest = spec.get("earliest"), spec.get("latest")
        words = ([f"from {earliest}"] if earliest else []) + ([f"until {latest}"] if latest else [])
        return " ".join(words)
