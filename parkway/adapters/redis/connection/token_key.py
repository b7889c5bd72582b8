"""The token key every client and worker of one Redis shares, and the check that they do."""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

import redis

from ....runtime.errors import ConfigError
from ....runtime.logger import get_logger
from .. import keys
from .errors import translated

log = get_logger()


def token_key(secret: str | None, client: redis.Redis | None) -> bytes:
    """The token key: ``secret`` (PARKWAY_SECRET); else per process (embedded, no ``client``) or
    shared through Redis, with a warning.

    On Redis, every client and worker checks the key against a fingerprint kept beside the runs
    (the first to start writes it): a process with another key would mint tokens that resume
    nothing, so it is refused at start instead."""
    if secret is not None:
        key = secret.encode()
    elif client is None:
        return os.urandom(32)
    else:
        log.warning(
            "secret_from_redis",
            hint="PARKWAY_SECRET is unset: the token key is kept in Redis, so anyone who can read Redis "
            "can rebuild resume tokens; set PARKWAY_SECRET (32+ random characters) in production",
        )
        with translated():
            client.set(keys.secret(), os.urandom(32).hex(), nx=True)
            value: Any = client.get(keys.secret())
        key = value.encode() if isinstance(value, str) else bytes(value)
    if client is not None:
        check_fingerprint(client, key, from_env=secret is not None)
    return key


def fingerprint(key: bytes) -> str:
    """Names a token key without revealing it (an HMAC of a fixed text under the key)."""
    return hmac.new(key, b"parkway token key fingerprint v1", hashlib.sha256).hexdigest()[:32]


def check_fingerprint(client: redis.Redis, key: bytes, *, from_env: bool) -> None:
    mine = fingerprint(key)
    with translated():
        client.set(keys.key_fingerprint(), mine, nx=True)
        stored: Any = client.get(keys.key_fingerprint())
    theirs = stored.decode() if isinstance(stored, bytes) else str(stored)
    if not hmac.compare_digest(theirs, mine):
        source = "PARKWAY_SECRET" if from_env else "the key generated in Redis (PARKWAY_SECRET is unset here)"
        raise ConfigError(
            f"the token key of this process ({source}) is not the one this Redis's runs were started "
            "with: its tokens would resume nothing. Give every client and worker the same PARKWAY_SECRET. "
            f"(To start over with a new key, delete the key {keys.key_fingerprint()!r}: tokens already "
            "handed out stop working.)"
        )
