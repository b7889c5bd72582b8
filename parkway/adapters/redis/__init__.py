"""The Redis Store."""

from .store import RedisStore

__all__ = ["RedisStore"]
