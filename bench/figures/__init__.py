"""The figures ``python -m bench`` reports, one module each, in report order.

Each module's ``measure(plan, url)`` runs its measured processes (through ``bench.plan.task``)
and returns the figure's ``bench.report.Section``. What runs inside a measured process lives
at the top of bench/, under the same name where there is one:

====  ==========================  =================================================
fig.  here                        measured process
====  ==========================  =================================================
1     figures/cycles.py           cycles.py, peer_langgraph.py, peer_dbos.py
2     figures/latency.py          latency.py
3     figures/rediscost.py        rediscost.py (worker under counted.py)
4     figures/weight.py           weight.py (fills from populate.py)
5     figures/listing.py          listing.py (fills from populate.py)
6     figures/workers.py          cycles.py, parkway only, 1, 2 and 4 workers
7     figures/profile.py          profile.py
8     figures/startup.py          startup.py
9     figures/sessions.py         sessions.py
====  ==========================  =================================================
"""

from . import cycles, latency, listing, profile, rediscost, sessions, startup, weight, workers

FIGURES = ("cycles", "latency", "rediscost", "weight", "listing", "workers", "profile", "startup", "sessions")

__all__ = [
    "FIGURES", "cycles", "latency", "listing", "profile", "rediscost", "sessions", "startup", "weight", "workers",
]
