"""The HTTP surface: the API (``app.py``; ``uvicorn --factory parkway.http.app:app_from_env`` or
``parkway serve``), its pages (``static/``), answer links (``links.py``), error bodies as problem
details (``problems.py``) and the Prometheus metrics it serves (``metrics.py``).

Importing this package imports nothing: the client mints answer links (``links``) without the
``http`` extra installed.
"""
