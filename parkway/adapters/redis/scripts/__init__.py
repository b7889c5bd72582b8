"""The Lua scripts and their calls: every ``.lua`` file of the store (one function library),
``scripts`` (headers parsed, the stored form generated into each script, the library built) and
``calls`` (one frozen argument class per script)."""
