"""How parkway reaches Redis: ``connection`` (clients, pipelines, loading the function library),
``sentinel``, ``replicas`` and ``switchover`` (a failover's servers and the acks asked of replicas),
``shards`` and ``shard_table`` (a store spread over several servers), ``errors`` (Redis's errors
made parkway's), ``token_key`` (the key that signs tokens) and ``embedded`` (the in-process server)."""
