"""parkway: durable, human-in-the-loop workflows on Redis.

Nodes are plain functions run as RQ jobs; ``use_interrupt`` pauses a run for
a person and ends the job; a resume token answers the pause exactly once and
the node replays with its hooks returning what they recorded.
"""

from .aio import AsyncParkway
from .client import Parkway
from .config import Settings
from .runtime.contracts import Contract
from .runtime.errors import (
    ChildFailed,
    ConfigError,
    CorruptRecord,
    InterruptCancelled,
    InvalidAnswer,
    InvalidId,
    MalformedResume,
    NondeterminismError,
    ParkwayError,
    PayloadTooLarge,
    RunNotFound,
    StaleFence,
    StoreError,
    StoreUnavailable,
    ValidationError,
    WaitTimeout,
    WorkflowError,
    WorkflowUnavailable,
)
from .runtime.hooks import (
    ParkwayWarning,
    complete_response,
    emit,
    idempotency_key,
    use_interrupt,
    use_node_state,
    use_now,
    use_stable_id,
    use_step,
    use_workflow,
    use_workflow_state,
)
from .runtime.protocol import (
    CancelOutcome,
    CancelResult,
    Event,
    Interrupt,
    InterruptPage,
    InterruptRequest,
    Option,
    ResumeOutcome,
    ResumeResult,
    Run,
    RunStatus,
)
from .runtime.reasoning import ModelProvider, ScriptedModel, use_reason
from .runtime.resume import parse_resume_metadata
from .runtime.workflow import Result, Retry, Workflow

__all__ = [
    "AsyncParkway",
    "CancelOutcome",
    "CancelResult",
    "ChildFailed",
    "ConfigError",
    "Contract",
    "CorruptRecord",
    "Event",
    "Interrupt",
    "InterruptCancelled",
    "InterruptPage",
    "InterruptRequest",
    "InvalidAnswer",
    "InvalidId",
    "MalformedResume",
    "ModelProvider",
    "NondeterminismError",
    "Option",
    "Parkway",
    "ParkwayError",
    "ParkwayWarning",
    "PayloadTooLarge",
    "Result",
    "ResumeOutcome",
    "ResumeResult",
    "Retry",
    "Run",
    "RunNotFound",
    "RunStatus",
    "ScriptedModel",
    "Settings",
    "StaleFence",
    "StoreError",
    "StoreUnavailable",
    "ValidationError",
    "WaitTimeout",
    "Workflow",
    "WorkflowError",
    "WorkflowUnavailable",
    "complete_response",
    "emit",
    "idempotency_key",
    "parse_resume_metadata",
    "use_interrupt",
    "use_node_state",
    "use_now",
    "use_reason",
    "use_stable_id",
    "use_step",
    "use_workflow",
    "use_workflow_state",
]
