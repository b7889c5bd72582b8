"""The Redis Store by role: ``store/`` (``store.RedisStore`` and the parts it is built from), ``scripts/``
(the Lua scripts and their calls), ``connection/`` (reaching Redis: Sentinel, replicas, shards); ``keys``
names every key and ``layout`` every stored field (the stored form, which all of them read)."""
