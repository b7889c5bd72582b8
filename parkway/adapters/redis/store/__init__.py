"""The Redis Store by the reader's question: ``store.RedisStore`` is built from ``transitions`` (a
run's moves, each one script), ``records`` (a run's record and journal read back), ``listings``
(interrupts listed), ``run_index`` (runs listed), ``live`` (the feeds a client waits on) and
``housekeeping`` (indexes, leases and keys' lifetimes kept up)."""
