"""One-click answer links: a signed URL per option of a choice interrupt, for e-mails and chat.

A link carries the run id, the request id, the option, an optional responder
and an expiry, encrypted and signed under keys derived from the deployment's
token key: nothing of it is readable from the URL (not the responder's e-mail,
not the run), and nothing of it can be changed. It holds no resume token: the
server that receives it re-mints the token from the run and request ids, so a
link can answer only its own option of its own interrupt, and only until it
expires. A link is single-use because the interrupt is: once answered (by this
link or any other way) every link of it says so. ``GET`` on a link only shows a
confirmation page (mail scanners and link previews fetch GETs); the ``POST``
from that page answers. The server's access log shows ``/a/`` paths masked.

The payload is encrypted with HMAC-SHA256 as a pseudo-random function in counter
mode under a random 16-byte nonce, then the nonce and ciphertext are signed with
HMAC-SHA256 under a second key (encrypt-then-MAC): the standard library's
primitives only, and the signature is checked before anything is decrypted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from ..runtime.errors import MalformedResume
from ..runtime.protocol import ID_PATTERN

_SIGNATURE_BYTES = 24
MAX_LINK_LENGTH = 1200


@dataclass(frozen=True)
class AnswerLink:
    run_id: str
    request_id: str
    option: str
    expires_at: int
    responder: str | None = None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


_NONCE_BYTES = 16
_BLOCK = hashlib.sha256().digest_size


def _subkey(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"parkway answer link v2 " + purpose, hashlib.sha256).digest()


def _sign(key: bytes, payload: str) -> bytes:
    return hmac.new(_subkey(key, b"signature"), payload.encode(), hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    cipher_key = _subkey(key, b"encryption")
    blocks = (hmac.new(cipher_key, nonce + i.to_bytes(4, "big"), hashlib.sha256).digest()
              for i in range(-(-length // _BLOCK)))
    return b"".join(blocks)[:length]


def _xor(data: bytes, stream: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, stream, strict=True))


def mint(key: bytes, link: AnswerLink) -> str:
    """The link's path segment: ``<nonce and ciphertext>.<signature>``, URL-safe, opaque."""
    plain = json.dumps([link.run_id, link.request_id, link.option, link.expires_at, link.responder]).encode()
    nonce = secrets.token_bytes(_NONCE_BYTES)
    payload = _b64(nonce + _xor(plain, _keystream(key, nonce, len(plain))))
    return f"{payload}.{_b64(_sign(key, payload))}"


def verify(key: bytes, text: str) -> AnswerLink:
    """The link ``text`` names, if ``key`` made it; raises MalformedResume otherwise (expiry is
    the caller's to check, so that it can say "expired" rather than "invalid")."""
    if not isinstance(text, str) or len(text) > MAX_LINK_LENGTH or text.count(".") != 1:
        raise MalformedResume("this answer link is not valid")
    payload, signature = text.split(".")
    try:
        if not hmac.compare_digest(_unb64(signature), _sign(key, payload)):
            raise MalformedResume("this answer link is not valid")
        sealed = _unb64(payload)
        nonce, cipher = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        run_id, request_id, option, expires_at, responder = json.loads(
            _xor(cipher, _keystream(key, nonce, len(cipher)))
        )
    except (ValueError, TypeError, binascii.Error) as exc:
        raise MalformedResume("this answer link is not valid") from exc
    if not (
        isinstance(run_id, str)
        and isinstance(request_id, str)
        and ID_PATTERN.fullmatch(run_id)
        and ID_PATTERN.fullmatch(request_id)
        and isinstance(option, str)
        and isinstance(expires_at, int)
        and (responder is None or isinstance(responder, str))
    ):
        raise MalformedResume("this answer link is not valid")
    return AnswerLink(run_id, request_id, option, expires_at, responder)


def mask(path: str) -> str:
    """An answer link's path as a log line may show it: ``/a/`` and no more (the link is a
    capability); any other path unchanged."""
    return "/a/<link>" if path.startswith("/a/") else path
