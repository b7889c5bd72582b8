"""The HTTP surface: the API (``app.py``; ``uvicorn --factory parkway.http.app:app_from_env`` or
``parkway serve``), its pages (``static/``) and the Prometheus metrics it serves (``metrics.py``).
Answer links are minted and read by ``parkway.runtime.links`` (the client mints them too), error
bodies are shaped by ``parkway.problems`` (the sessions' routes use it as well).
"""
