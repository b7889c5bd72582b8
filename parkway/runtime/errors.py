"""parkway's exceptions: one tree, one root.

::

    ParkwayError
    ├── ConfigError              settings that cannot work (bad URL, bad TTL)
    ├── ValidationError          input refused at a public entry point
    │   ├── InvalidId            a run/request/workflow id that may not reach a key
    │   ├── PayloadTooLarge      an encoded payload above its bound
    │   ├── InvalidAnswer        a resume answer that does not fit the request
    │   └── MalformedResume      a resume token or metadata that cannot be parsed
    ├── WorkflowError            a workflow definition or reference that cannot work
    │   └── WorkflowUnavailable  a workflow module not found, or not allowed (PARKWAY_WORKFLOWS)
    │       └── VersionNotReplayed  the code does not replay the version a pause was made under
    ├── NondeterminismError      a replay asked a hook for something else than the journal holds
    ├── InterruptCancelled       raised by use_interrupt when its interrupt was cancelled
    ├── ChildFailed              raised by use_workflow when the child run failed, was cancelled or expired
    ├── StaleFence               a commit from an attempt that is no longer current
    ├── RunNotFound              no run (and no summary) under that id
    ├── InterruptNotFound        no interrupt (nor its lifecycle record) under that request id
    ├── ToolError                raised by use_tool when the tool (or the policy) answered with an error
    ├── SessionError             a session transition refused; nothing was written
    │   ├── SessionNotFound      no session under that id
    │   ├── BranchParked         the path a message would extend is parked by an interrupt
    │   ├── BranchBusy           a run is live at the head a message would extend
    │   └── SessionDenied        the caller may not do this to this session
    ├── WaitTimeout              wait()/stream() gave up
    └── StoreError               the store failed or holds something unreadable
        ├── StoreUnavailable     the connection to Redis is lost
        ├── CorruptRecord        a record that cannot be decoded
        └── FormatTooNew         a record of a stored format newer than this code reads

This module imports nothing internal. Every exception keeps its structured
fields and survives pickling (``__reduce__`` rebuilds it from its message and
fields).
"""

from __future__ import annotations

from typing import Any


class ParkwayError(Exception):
    """Root of every error parkway raises on purpose."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.fields))


def _rebuild(cls: type[ParkwayError], message: str, fields: dict[str, Any]) -> ParkwayError:
    return cls(message, **fields)


class ConfigError(ParkwayError):
    """A setting that cannot work."""


class ValidationError(ParkwayError):
    """Input refused at a public entry point; nothing was changed."""


class InvalidId(ValidationError):
    """An id that may not become part of a key."""


class PayloadTooLarge(ValidationError):
    """An encoded payload above its configured bound."""


class InvalidAnswer(ValidationError):
    """A resume answer that does not fit the request; the interrupt stays open."""


class MalformedResume(ValidationError):
    """A resume token or resume metadata that cannot be parsed."""


class WorkflowError(ParkwayError):
    """A workflow definition or reference that cannot work."""


class WorkflowUnavailable(WorkflowError):
    """A workflow this process cannot load: its module is not found, or not allowed.

    A worker leaves such a run queued for a worker that can load it."""


class VersionNotReplayed(WorkflowUnavailable):
    """The workflow declares the older versions it replays (``replays=``), and the version a pause was
    made under is not one of them. A resume is refused before the token is spent; a worker that
    meets such an activation gives it back queued, for a worker running that version.

    Fields: ``run_id``, ``node``, ``recorded`` (the pause's version), ``current``."""


class NondeterminismError(ParkwayError):
    """On replay, a hook asked for something other than what the journal recorded."""


class InterruptCancelled(ParkwayError):
    """The interrupt was cancelled instead of answered; catch it to take a "denied" path.

    Uncaught, the run ends ``cancelled``.
    """


class ChildFailed(ParkwayError):
    """The child run ``use_workflow`` started ended without an output.

    Fields: ``run_id`` (the parent), ``child_run_id``, ``status`` (``failed``, ``cancelled`` or
    ``expired``) and ``error_message`` (the child's error, if it had one). Uncaught, the parent
    fails naming the child (or ends ``cancelled`` when the child was cancelled).
    """

    child_run_id: str
    status: str
    error_message: str


class StaleFence(ParkwayError):
    """A commit from an attempt that is no longer the run's current one; nothing changed."""


class RunGone(StaleFence):
    """A commit or a begin for a run that does not exist (its records expired, or the id was
    never a run's); nothing changed."""


class RunNotFound(ParkwayError):
    """No run and no run summary under that id."""


class InterruptNotFound(ParkwayError):
    """No interrupt under that request id: never made, or past the retention of its run's summary."""


class ToolError(ParkwayError):
    """``use_tool`` got an error for its call (from the tool, or from the session's policy, e.g. a
    declined approval). Fields: ``tool``, ``tool_call_id``."""


class SessionError(ParkwayError):
    """A session transition was refused; nothing was written."""


class SessionNotFound(SessionError):
    """No session under that id (never opened, or past its TTL)."""


class BranchParked(SessionError):
    """The path a message would extend is parked: ``interrupts`` lists the ids parking it (answer
    or clear them, or branch off above their anchors with ``edit``)."""


class BranchBusy(SessionError):
    """A run is still live at the head a message would extend (one live run per branch):
    ``run_id`` names it."""


class SessionDenied(SessionError):
    """The caller may not do this: another tenant, not the session's owner, or an interrupt raised
    with more privilege than the caller has."""


class WaitTimeout(ParkwayError):
    """wait(), stream() or drain() reached its timeout."""


class StoreError(ParkwayError):
    """The store failed, or holds something parkway cannot read."""


class StoreUnavailable(StoreError):
    """The connection to the store is lost."""


class CorruptRecord(StoreError):
    """A stored record that cannot be decoded."""


class FormatTooNew(StoreError):
    """A stored record written in a format newer than this code reads (a later version of parkway
    wrote it): refused, and left as it is, never read as an older format.

    Fields: ``record`` (which record: ``run <id>``), ``found`` (its format), ``reads`` (the newest
    format this code reads), ``run_id`` when the record is a run's."""
