"""Listing cursors as callers hold them: opaque and signed.

A store's cursor names a position in an index: a time, a run id, a request id. Handed out as it
is, a page of items a caller may not see (filtered out after the read) would still tell it whose
run sits where. So the client seals every cursor it returns under the deployment's secret: a
keystream of HMAC-SHA256 blocks (under a key derived for cursors alone) hides the text, and an
HMAC over nonce and ciphertext (under another derived key) makes a cursor the deployment did not
make, or one changed in transit, a clear ``ValidationError`` instead of a position.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from .errors import ValidationError

_NONCE_BYTES = 12
_TAG_BYTES = 16
MAX_CURSOR_CHARS = 400


def _key(secret: bytes, purpose: str) -> bytes:
    return hmac.new(secret, f"parkway cursor {purpose}".encode(), hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = (hmac.new(key, nonce + i.to_bytes(4, "big"), hashlib.sha256).digest() for i in range(length // 32 + 1))
    return b"".join(blocks)[:length]


def seal(secret: bytes, cursor: str) -> str:
    """The opaque form of a store's ``cursor``."""
    nonce = os.urandom(_NONCE_BYTES)
    plain = cursor.encode()
    hidden = bytes(a ^ b for a, b in zip(plain, _keystream(_key(secret, "stream"), nonce, len(plain)), strict=True))
    tag = hmac.new(_key(secret, "tag"), nonce + hidden, hashlib.sha256).digest()[:_TAG_BYTES]
    return base64.urlsafe_b64encode(nonce + hidden + tag).decode().rstrip("=")


def unseal(secret: bytes, text: object) -> str:
    """The store's cursor an opaque one holds; ValidationError for anything this deployment did not seal."""
    if not isinstance(text, str) or len(text) > MAX_CURSOR_CHARS:
        raise ValidationError(f"invalid cursor: pass a listing's next_cursor (at most {MAX_CURSOR_CHARS} characters)")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValidationError("invalid cursor: pass a listing's next_cursor as it was given") from None
    nonce, hidden, tag = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:-_TAG_BYTES], raw[-_TAG_BYTES:]
    expected = hmac.new(_key(secret, "tag"), nonce + hidden, hashlib.sha256).digest()[:_TAG_BYTES]
    if len(raw) <= _NONCE_BYTES + _TAG_BYTES or not hmac.compare_digest(tag, expected):
        raise ValidationError("invalid cursor: pass a listing's next_cursor as it was given")
    plain = bytes(a ^ b for a, b in zip(hidden, _keystream(_key(secret, "stream"), nonce, len(hidden)), strict=True))
    try:
        return plain.decode()
    except UnicodeDecodeError:
        raise ValidationError("invalid cursor") from None
