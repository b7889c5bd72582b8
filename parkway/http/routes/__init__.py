"""The API's routers, one module per resource: ``health``, ``runs``, ``interrupts``, ``links`` (answer
links) and ``ui`` (the inbox page). The sessions feature brings its own (``parkway.sessions.http``)."""
