"""Resume tokens: ``<run_id>.<secret part>``, stored only as a SHA-256 hash.

The secret part is an HMAC-SHA256 (truncated to 192 bits) of the run and
request ids under the deployment's secret key (``PARKWAY_SECRET``, at least
32 random bytes). So Redis holds no token, nor anything a token can be
rebuilt from without the key, while a client that has the key can hand the
token out again (``stream`` events, ``list_interrupts(include_tokens=True)``).
The run id in front routes a resume to the run's keys without any lookup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from .errors import MalformedResume
from .protocol import ID_PATTERN

_SECRET_CHARS = 32  # base64url of 24 bytes
MAX_TOKEN_LENGTH = 64 + 1 + _SECRET_CHARS


def mint(key: bytes, run_id: str, request_id: str) -> str:
    mac = hmac.new(key, f"{run_id}:{request_id}".encode(), hashlib.sha256).digest()[:24]
    return f"{run_id}.{base64.urlsafe_b64encode(mac).decode()}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def run_id_of(token: object) -> str:
    """The run id a token names; raises MalformedResume for anything that is not a token."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise MalformedResume("resume token must be a string of at most 97 characters")
    run_id, sep, secret = token.partition(".")
    if not sep or not ID_PATTERN.match(run_id) or len(secret) != _SECRET_CHARS:
        raise MalformedResume("resume token is malformed")
    try:
        base64.urlsafe_b64decode(secret.encode())
    except ValueError as exc:
        raise MalformedResume("resume token is malformed") from exc
    return run_id
