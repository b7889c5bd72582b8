"""parkway's errors as HTTP answers: the status each error means, and what its body may say."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..problems import problem
from ..runtime.errors import (
    InterruptNotFound,
    ParkwayError,
    RunNotFound,
    SessionDenied,
    SessionError,
    SessionNotFound,
    StoreUnavailable,
    ValidationError,
    WorkflowError,
)
from ..runtime.logger import get_logger
from .limits import TooMany, too_many

log = get_logger()
_UNAVAILABLE = "this workflow cannot be started on this server"
_SERVER_ERROR = "the server could not complete this request; its log says why"


def refusal(status: int, exc: ParkwayError) -> JSONResponse:
    """The error body: what the caller can act on. What would tell the caller about the server (its
    working directory, which modules it has, Redis's replies and scripts) goes to the log only."""
    if isinstance(exc, WorkflowError):
        log.warning("http_workflow_refused", error=type(exc).__name__, detail=exc.message)
        return problem(status, "WorkflowUnavailable", _UNAVAILABLE)
    if status >= 500:
        log.error("http_server_error", error=type(exc).__name__, detail=exc.message, status=status)
        error = "StoreUnavailable" if isinstance(exc, StoreUnavailable) else "ServerError"
        return problem(status, error, _SERVER_ERROR)
    return problem(status, type(exc).__name__, exc.message)


async def parkway_error(request: Request, exc: Exception) -> JSONResponse:
    """The answer to a parkway error a route let through."""
    assert isinstance(exc, ParkwayError)
    if isinstance(exc, StoreUnavailable):
        return refusal(503, exc)
    if isinstance(exc, SessionNotFound) or (
        isinstance(exc, SessionDenied) and getattr(exc, "reason", None) in ("tenant", "owner")
    ):
        # another tenant's or owner's session reads word for word as none: a different answer
        # would tell that one exists
        return refusal(404, SessionNotFound("no such session"))
    if isinstance(exc, SessionDenied):
        return refusal(403, exc)
    if isinstance(exc, SessionError):  # a parked or busy branch, a session id taken
        return refusal(409, exc)
    if isinstance(exc, RunNotFound | InterruptNotFound):
        return refusal(404, exc)
    if isinstance(exc, ValidationError | WorkflowError):
        return refusal(422, exc)
    return refusal(500, exc)


def install(app: FastAPI) -> None:
    """Answer parkway's errors and the bounds' refusals (429) with problem details."""
    app.add_exception_handler(TooMany, too_many)
    app.add_exception_handler(ParkwayError, parkway_error)
