"""The HTTP surface: the API (``app.py`` assembles it; ``uvicorn --factory parkway.http.app:app_from_env``
or ``parkway serve``), FastAPI's "bigger applications" shape:

    app.py       create_app: the app, its routers, its error answers and middleware; app_from_env
    routes/      one router per resource: health (/healthz, /metrics, /v1/me), runs (/v1/runs),
                 interrupts (/v1/interrupts, /v1/resume, /v1/resume-or-start), links (/a/{link}),
                 ui (/ui, the inbox page; the sessions feature brings its own router)
    auth.py      API keys and the caller dependency (``Who``)
    deps.py      the app's state (``Surface`` on ``app.state.surface``), the listing and the waiting
                 slot as dependencies
    queries.py   the listings' query parameters, from ``ListingQuery`` and ``RunsQuery``
    limits.py    the per-key, per-tenant and per-process bounds (429), the body limit (413)
    streams.py   server-sent events: runs', sessions' and the pause feed's frames, bounded responses
    failures.py  parkway's errors as statuses and problem bodies
    bodies.py    the camelCase base of the bodies

and its pages (``static/``) and the Prometheus metrics it serves (``metrics.py``); answer links
(``parkway.runtime.links``) and error bodies as problem details (``parkway.problems``) sit where the
client and the sessions feature reach them too. The asyncio Redis reads of
streams and the pause watch live in ``parkway.adapters.redis.store.live``.

Importing this package imports nothing.
"""
