"""The stored form: every field of what parkway keeps in Redis, and how each is read back (the keys
themselves are :mod:`..keys`'). One home, in parts by what they describe: ``records`` (the run hash
and summary, with the table of their fields: a run's record, its journal entries, its interrupts'
records), ``lifecycle`` (the interrupts' lifecycle records in the summary), ``events`` (a run's
events, and the reads of several round trips), ``sessions`` (a session's events) and ``notices``
(the notifications stream). Every name is read from here (``layout.run_record``)."""

from .events import *  # noqa: F403
from .lifecycle import *  # noqa: F403
from .notices import *  # noqa: F403
from .records import *  # noqa: F403
from .sessions import *  # noqa: F403
