"""What a listing of interrupts asks for: :class:`ListingQuery`, one frozen, checked object.

``Parkway.list_interrupts`` builds it from its keywords, ``AsyncParkway`` passes it on, and the HTTP
API builds it from ``GET /v1/interrupts``' query parameters (``runId``, ``waitMs``, ``tokens``,
``q``, ...: this class's fields, declared by ``parkway.http.queries``): each argument is checked
once, here, on construction, with a ValidationError that names it. The client turns it into the
store's query (``parkway.runtime.store.InterruptQuery``), unsealing the cursor with the deployment's key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from annotated_types import Interval, Len

from .errors import ValidationError
from .protocol import RunStatus, check_audience, check_id, check_name
from .store import InterruptRecord
from .telemetry import CLOSED_STATUSES

MAX_PAGE = 1000
"""largest ``limit`` of a page"""
MAX_WAIT_MS = 30_000
"""longest ``wait_ms``"""
MAX_SEARCH = 200
"""longest ``workflow_prefix`` or ``search``"""
STATUSES = ("pending", *CLOSED_STATUSES)
"""what a listing lists: open interrupts, or those that ended so"""

Order = Literal["newest", "expiring"]
Status = Literal["pending", "resolved", "cancelled", "expired"]
PageSize = Annotated[int, Interval(ge=1, le=MAX_PAGE)]
WaitMs = Annotated[int, Interval(ge=0, le=MAX_WAIT_MS)]
SearchText = Annotated[str, Len(1, MAX_SEARCH)]
"""(the bounds ride on the types, so the HTTP API's query parameters declare the same ones)"""


@dataclass(frozen=True, kw_only=True)
class ListingQuery:
    """One listing's arguments, checked when built (see ``Parkway.list_interrupts`` for each).

    >>> pw.list_interrupts(ListingQuery(workflow="approval", limit=10))
    >>> pw.list_interrupts(workflow="approval", limit=10)   # the same query
    """

    workflow: str | None = None
    run_id: str | None = None
    order: Order = "newest"
    limit: PageSize = 50
    cursor: str | None = None
    """a page's ``next_cursor``, as it was given (sealed)"""
    include_tokens: bool = False
    wait_ms: WaitMs = 0
    audience: str | None = None
    tenant: str | None = None
    session: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    status: Status = "pending"
    workflow_prefix: SearchText | None = None
    search: SearchText | None = None

    def __post_init__(self) -> None:
        if self.workflow is not None:
            check_id(self.workflow, "workflow name")
        if self.run_id is not None:
            check_id(self.run_id, "run id")
        if self.order not in ("newest", "expiring"):
            raise ValidationError("order must be 'newest' or 'expiring'")
        if not _integer(self.limit, 1, MAX_PAGE):
            raise ValidationError(f"limit must be an integer from 1 to {MAX_PAGE}")
        if self.cursor is not None and not isinstance(self.cursor, str):
            raise ValidationError("cursor must be a page's next_cursor, as it was given")
        if not isinstance(self.include_tokens, bool):
            raise ValidationError("include_tokens must be true or false")
        if not _integer(self.wait_ms, 0, MAX_WAIT_MS):
            raise ValidationError(f"wait_ms must be an integer from 0 to {MAX_WAIT_MS}")
        if self.status not in STATUSES:
            named = ", ".join(repr(s) for s in STATUSES)
            raise ValidationError(f"status must be one of {named}, not {self.status!r}")
        self._check_filters()
        for name, value in (("workflow_prefix", self.workflow_prefix), ("search", self.search)):
            if value is not None and (not isinstance(value, str) or not 1 <= len(value) <= MAX_SEARCH
                                      or not value.isprintable()):
                raise ValidationError(f"{name} must be printable text of 1 to {MAX_SEARCH} characters")

    def _check_filters(self) -> None:
        """The index filters and the time bounds, and what they combine with."""
        if self.audience is not None:
            check_audience(self.audience)
        if self.tenant is not None:
            check_name(self.tenant, "tenant")
        if self.session is not None:
            check_id(self.session, "session id")
        for name, value in (("created_after", self.created_after), ("created_before", self.created_before)):
            if value is not None and not _integer(value, 0, (1 << 48) - 1):
                raise ValidationError(f"{name} must be a time in epoch milliseconds (a non-negative integer)")
        filtered = self.audience is not None or self.tenant is not None or self.session is not None
        bounded = self.created_after is not None or self.created_before is not None
        if self.order != "newest" and (filtered or bounded):
            raise ValidationError("audience, tenant, session and created_after/created_before list in order 'newest'")
        if self.status != "pending" and (self.order != "newest" or self.wait_ms or self.include_tokens):
            raise ValidationError("a listing of ended interrupts is newest first, without wait_ms or tokens")
        if self.status != "pending" and (filtered or bounded):
            raise ValidationError("a listing of ended interrupts filters by workflow or run id only")

    @classmethod
    def of(cls, query: ListingQuery | None, keywords: dict[str, Any]) -> ListingQuery:
        """The query ``list_interrupts`` was given: ``query``, or one built from its keywords (not both)."""
        if query is None:
            return cls(**keywords)
        if not isinstance(query, ListingQuery):
            raise ValidationError(f"list_interrupts takes a ListingQuery, not {type(query).__name__}")
        if keywords:
            raise ValidationError(f"pass a ListingQuery or keywords, not both ({', '.join(sorted(keywords))})")
        return query

    def matcher(self) -> Callable[[InterruptRecord], bool] | None:
        """What ``workflow_prefix`` and ``search`` keep of the interrupts the indexes give (None:
        everything): read from each record, so filtered before paging."""
        prefix, search = self.workflow_prefix, self.search
        if prefix is None and search is None:
            return None
        needle = None if search is None else search.casefold()

        def match(record: InterruptRecord) -> bool:
            if prefix is not None and not record.workflow.startswith(prefix):
                return False
            question = record.request.question if record.request is not None else None
            return needle is None or needle in str(question or "").casefold()

        return match


RUN_STATUSES = tuple(s.value for s in RunStatus)
"""what a run listing filters by (``RunsQuery.status``)"""


@dataclass(frozen=True, kw_only=True)
class RunsQuery:
    """A listing of runs, newest first, checked when built (see ``Parkway.list_runs`` for each).

    >>> pw.list_runs(RunsQuery(status="failed", limit=20))
    >>> pw.list_runs(status="failed", limit=20)   # the same query
    """

    status: str | None = None
    workflow: str | None = None
    workflow_prefix: SearchText | None = None
    tenant: str | None = None
    created_after: int | None = None
    created_before: int | None = None
    limit: PageSize = 50
    cursor: str | None = None
    """a page's ``next_cursor``, as it was given (sealed)"""

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in RUN_STATUSES:
            named = ", ".join(repr(s) for s in RUN_STATUSES)
            raise ValidationError(f"status must be one of {named}, not {self.status!r}")
        if self.workflow is not None:
            check_id(self.workflow, "workflow name")
        if self.workflow_prefix is not None and (
            not isinstance(self.workflow_prefix, str) or not 1 <= len(self.workflow_prefix) <= MAX_SEARCH
            or not self.workflow_prefix.isprintable()
        ):
            raise ValidationError(f"workflow_prefix must be printable text of 1 to {MAX_SEARCH} characters")
        if self.tenant is not None:
            check_name(self.tenant, "tenant")
        for name, value in (("created_after", self.created_after), ("created_before", self.created_before)):
            if value is not None and not _integer(value, 0, (1 << 48) - 1):
                raise ValidationError(f"{name} must be a time in epoch milliseconds (a non-negative integer)")
        if not _integer(self.limit, 1, MAX_PAGE):
            raise ValidationError(f"limit must be an integer from 1 to {MAX_PAGE}")
        if self.cursor is not None and not isinstance(self.cursor, str):
            raise ValidationError("cursor must be a page's next_cursor, as it was given")

    @classmethod
    def of(cls, query: RunsQuery | None, keywords: dict[str, Any]) -> RunsQuery:
        """The query ``list_runs`` was given: ``query``, or one built from its keywords (not both)."""
        if query is None:
            return cls(**keywords)
        if not isinstance(query, RunsQuery):
            raise ValidationError(f"list_runs takes a RunsQuery, not {type(query).__name__}")
        if keywords:
            raise ValidationError(f"pass a RunsQuery or keywords, not both ({', '.join(sorted(keywords))})")
        return query


def _integer(value: Any, low: int, high: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high
