"""The Redis Store: ``store.RedisStore`` and the modules it is built from (``keys`` names every key)."""
