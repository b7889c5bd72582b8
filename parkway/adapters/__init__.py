"""Stores: the Store contract's implementations (memory, Redis)."""
