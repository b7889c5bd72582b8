"""Resume tokens: ``<run_id>.<request_id>.<signature>``, stored only as a SHA-256 hash.

The signature is an HMAC-SHA256 (truncated to 192 bits) of the run and
request ids under the deployment's secret key (``PARKWAY_SECRET``, at least
32 random bytes). So Redis holds no token, nor anything a token can be
rebuilt from without the key, while a client that has the key can hand the
token out again (``stream`` events, ``list_interrupts(include_tokens=True)``).

The run id in front routes a resume to the run's keys without any lookup.
The request id beside it lets a client check the signature before it asks
Redis anything: a token parkway's key did not sign is ``unknown`` at once,
so a forged token tells nobody which runs exist or existed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from .errors import MalformedResume
from .protocol import ID_PATTERN, MAX_ID_LENGTH

_SIGNATURE_BYTES = 24
_SIGNATURE_CHARS = 32  # base64url of 24 bytes, no padding needed
MAX_TOKEN_LENGTH = MAX_ID_LENGTH + 1 + MAX_ID_LENGTH + 1 + _SIGNATURE_CHARS


@dataclass(frozen=True)
class Token:
    """A token's parts, parsed but not yet verified."""

    run_id: str
    request_id: str
    signature: bytes


def _sign(key: bytes, run_id: str, request_id: str) -> bytes:
    return hmac.new(key, f"{run_id}:{request_id}".encode(), hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def mint(key: bytes, run_id: str, request_id: str) -> str:
    signature = base64.urlsafe_b64encode(_sign(key, run_id, request_id)).decode()
    return f"{run_id}.{request_id}.{signature}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


MALFORMED = (
    f"resume token is malformed: expected RUN_ID.REQUEST_ID.SIGNATURE ({_SIGNATURE_CHARS} characters of "
    "URL-safe base64 after the second dot), as list_interrupts and `parkway interrupts --tokens` give it"
)


def parse(token: object) -> Token:
    """A token's parts; raises MalformedResume for anything that is not shaped like a token."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise MalformedResume(f"resume token must be a string of at most {MAX_TOKEN_LENGTH} characters")
    parts = token.split(".")
    if len(parts) != 3:
        raise MalformedResume(MALFORMED)
    run_id, request_id, signature = parts
    if not ID_PATTERN.fullmatch(run_id) or not ID_PATTERN.fullmatch(request_id):
        raise MalformedResume(MALFORMED)
    if len(signature) != _SIGNATURE_CHARS:
        raise MalformedResume(MALFORMED)
    try:
        raw = base64.b64decode(signature.encode(), altchars=b"-_", validate=True)
    except (ValueError, binascii.Error) as exc:
        raise MalformedResume(MALFORMED) from exc
    if len(raw) != _SIGNATURE_BYTES:
        raise MalformedResume(MALFORMED)
    return Token(run_id, request_id, raw)


def verify(key: bytes, token: Token) -> bool:
    """Whether ``key`` signed the token (constant time)."""
    return hmac.compare_digest(token.signature, _sign(key, token.run_id, token.request_id))


def run_id_of(token: object) -> str:
    """The run id a token names (not verified); raises MalformedResume for anything that is not a token."""
    return parse(token).run_id
