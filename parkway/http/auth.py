"""Who calls: API keys, and the dependencies that turn a request's key into its caller.

Keys are configured hashed (``PARKWAY_API_KEYS``, :func:`parse_keys`) and kept on the app
(``app.state.keys``). :func:`caller` is the dependency every ``/v1`` route declares (``Who``): 401
without a known key, 403 for a metrics key; :func:`scraper` is ``/metrics``' own. Either records on
the request what the per-key and per-tenant bounds count by (``request.state.key`` and ``share``,
read by :mod:`parkway.http.limits`); :func:`caller` also the caller, which a feature's router
(``parkway.sessions.http``, included behind it) reads.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import Depends, Header, HTTPException, Request
from fastapi.security import HTTPBearer

from ..runtime.authority import Caller
from ..runtime.errors import ConfigError, ValidationError
from ..runtime.protocol import check_name

ROLES = ("system", "machine", "user")
METRICS: Literal["metrics"] = "metrics"
"""the role of a key that reads ``/metrics`` and nothing else"""

Key = Caller | Literal["metrics"]
"""what a configured key stands for: a caller of the API, or a metrics scraper"""


def hash_key(key: str) -> str:
    """How an API key is configured: its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def _hex_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def parse_keys(text: str) -> dict[str, Key]:
    """``PARKWAY_API_KEYS``: ``<sha256 hex>=<role>[:<owner>[:<tenant>]]``, comma-separated; a user
    needs both, a machine or system key bound to a tenant leaves the owner empty (``machine::acme``).
    ``<sha256 hex>=metrics`` is a key that reads ``/metrics`` only."""
    out: dict[str, Key] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        digest, sep, who = item.partition("=")
        parts = who.split(":")
        if who == METRICS and _hex_digest(digest):
            out[digest] = METRICS
            continue
        if not sep or not _hex_digest(digest) or parts[0] not in ROLES:
            raise ConfigError(
                "PARKWAY_API_KEYS entries look like <sha256 hex of the key>=<system|machine|user>[:owner[:tenant]] "
                "or <sha256 hex of the key>=metrics"
            )
        for extra in parts[1:]:
            if extra:  # empty: none (a machine bound to a tenant is machine::<tenant>)
                check_name(extra, "API key owner or tenant")
        role: Any = parts[0]
        try:
            out[digest] = Caller(role, *(part or None for part in parts[1:3]))
        except ValidationError as exc:
            raise ConfigError(f"PARKWAY_API_KEYS: {exc.message} (<hash>=user:<owner>:<tenant>)") from None
    return out


def _key(request: Request, authorization: str | None) -> Key:
    """What an ``Authorization: Bearer <key>`` names (401 without a known key)."""
    keys: Mapping[str, Key] | None = request.app.state.keys
    if keys is None:
        request.state.key, request.state.share = "-", None
        return Caller("system")
    scheme, _, key = (authorization or "").partition(" ")
    digest = hash_key(key) if scheme.lower() == "bearer" and key else ""
    found = keys.get(digest) if digest else None
    if found is None:
        why = "this API key is not known here" if digest else "an API key is needed: Authorization: Bearer <key>"
        raise HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})
    request.state.key = digest  # what per-key bounds count by
    # and per-tenant ones, one share per kind of key: a tenant's users cannot starve its machine keys
    request.state.share = f"{found.role} keys of {found.tenant}" if isinstance(found, Caller) and found.tenant else None
    return found


BEARER = HTTPBearer(auto_error=False, description="an API key: `Authorization: Bearer <key>`")
"""declares the scheme in the OpenAPI document (so a viewer can send a key); ``_key`` checks the key"""


def caller(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    _: Annotated[Any, Depends(BEARER)] = None,
) -> Caller:
    """The caller an ``Authorization: Bearer <key>`` names (401 without a known key, 403 for a
    metrics key)."""
    found = _key(request, authorization)
    if not isinstance(found, Caller):
        raise HTTPException(403, "a metrics key reads /metrics only")
    request.state.caller = found  # for the routes of a feature's router, included behind this dependency
    return found


def scraper(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    _: Annotated[Any, Depends(BEARER)] = None,
) -> None:
    """``/metrics`` is for a metrics key or a system key bound to no tenant (it counts every tenant's
    workflows): 403 for any other key."""
    found = _key(request, authorization)
    if isinstance(found, Caller) and (found.role != "system" or found.tenant is not None):
        raise HTTPException(403, "/metrics needs a metrics key or a system key bound to no tenant")


Who = Annotated[Caller, Depends(caller)]
"""the caller of a ``/v1`` route"""


def own_tenant(who: Caller, asked: str | None) -> str | None:
    """The tenant a call acts in: a key bound to a tenant acts in its own (403 for another);
    an unbound key in the one it names, if any."""
    if who.tenant is not None and asked not in (None, who.tenant):
        raise HTTPException(403, f"this key is bound to tenant {who.tenant!r}")
    return who.tenant or asked


_PATH = re.compile(r"(?<![\w.~:/-])(?:/[^/\s\"'<>:]+)+/([^/\s\"'<>:]+)")
"""an absolute POSIX path (not a URL's); its last part (the file's name) is kept"""


def shown_error(error: Any, who: Key) -> Any:
    """A run's error (or an event's) as ``who`` may see it: a system key (an admin) whole, any other
    with each file path in its message and traceback cut to the file's name (frames, lines and code
    stay): where the server keeps its code and Python is not a user's or a machine's to read."""
    if error is None or (isinstance(who, Caller) and who.role == "system"):
        return error
    if isinstance(error, str):
        return _PATH.sub(r"\1", error)
    if isinstance(error, dict):
        return {k: shown_error(v, who) if k in ("message", "traceback") else v for k, v in error.items()}
    return error
