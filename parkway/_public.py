"""The names ``parkway`` exports (its ``__all__``), loaded when one of them is first used: the
workflow API, the client and what it returns, the errors' root and the errors an application
commonly catches. Agents are in :mod:`parkway.agents`, sessions in :mod:`parkway.sessions`, every
error in :mod:`parkway.errors`. ``AsyncParkway`` (the asyncio client) is imported when it is first
asked for (:data:`ON_FIRST_USE`): a program that uses only ``Parkway`` does not load it."""

from typing import TYPE_CHECKING, Any

from .client import Parkway
from .config import Settings
from .runtime.answers import parse_resume_metadata
from .runtime.authority import Caller
from .runtime.contracts import Contract
from .runtime.errors import (
    ChildFailed,
    ConfigError,
    InterruptCancelled,
    InterruptNotFound,
    InvalidAnswer,
    NondeterminismError,
    ParkwayError,
    RunNotFound,
    StoreUnavailable,
    ValidationError,
    VersionNotReplayed,
    WaitTimeout,
    WorkflowError,
)
from .runtime.hooks import (
    First,
    ParkwayWarning,
    complete_response,
    emit,
    idempotency_key,
    use_first,
    use_interrupt,
    use_node_state,
    use_now,
    use_stable_id,
    use_step,
    use_workflow,
    use_workflow_state,
    use_workflows,
)
from .runtime.listing import ListingQuery
from .runtime.protocol import (
    CancelOutcome,
    CancelResult,
    Event,
    Interrupt,
    InterruptLifecycle,
    InterruptPage,
    InterruptRequest,
    Option,
    ResumeOrStartResult,
    ResumeOutcome,
    ResumeResult,
    Run,
    RunStatus,
)
from .runtime.workflow import Result, Retry, Workflow

if TYPE_CHECKING:
    from .client import AsyncParkway

ON_FIRST_USE = ("AsyncParkway",)
"""names of ``__all__`` imported when first asked for (``parkway.__getattr__`` leaves them here)"""


def __getattr__(name: str) -> Any:
    if name not in ON_FIRST_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .client import AsyncParkway

    return AsyncParkway


__all__ = [
    "AsyncParkway",
    "Caller",
    "CancelOutcome",
    "CancelResult",
    "ChildFailed",
    "ConfigError",
    "Contract",
    "Event",
    "First",
    "Interrupt",
    "InterruptCancelled",
    "InterruptLifecycle",
    "InterruptNotFound",
    "InterruptPage",
    "InterruptRequest",
    "InvalidAnswer",
    "ListingQuery",
    "NondeterminismError",
    "Option",
    "Parkway",
    "ParkwayError",
    "ParkwayWarning",
    "Result",
    "ResumeOrStartResult",
    "ResumeOutcome",
    "ResumeResult",
    "Retry",
    "Run",
    "RunNotFound",
    "RunStatus",
    "Settings",
    "StoreUnavailable",
    "ValidationError",
    "VersionNotReplayed",
    "WaitTimeout",
    "Workflow",
    "WorkflowError",
    "complete_response",
    "emit",
    "idempotency_key",
    "parse_resume_metadata",
    "use_first",
    "use_interrupt",
    "use_node_state",
    "use_now",
    "use_stable_id",
    "use_step",
    "use_workflow",
    "use_workflow_state",
    "use_workflows",
]
