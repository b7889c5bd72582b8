"""Stores: the Store contract's implementation on Redis (a server, or embedded mode's in-process one)."""
