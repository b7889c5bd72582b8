"""``/healthz``, ``/metrics`` and ``/v1/me``: whether the server reaches Redis, its counters, and who a key is."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ...problems import responses
from ..auth import Who, scraper
from ..bodies import CamelBody
from ..deps import Client, House

router = APIRouter(tags=["health"])


class Me(CamelBody):
    name: str
    role: str
    owner: str | None = None
    tenant: str | None = None


@router.get("/healthz", responses={503: {"description": "Redis does not answer"}})
async def healthz(pw: Client) -> JSONResponse:
    try:
        await anyio.to_thread.run_sync(pw.store.ping)
    except Exception as exc:  # noqa: BLE001 - any failure to reach Redis is "unhealthy"
        return JSONResponse({"redis": "unreachable", "detail": type(exc).__name__}, status_code=503)
    return JSONResponse({"redis": "ok"})


@router.get("/metrics", response_class=Response, responses=responses(401, 403, 503))
def metrics(_: Annotated[None, Depends(scraper)], house: House) -> Response:
    """Prometheus text exposition: the deployment's counters, kept in Redis (``parkway.http.metrics``)."""
    return Response(generate_latest(house.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/me", response_model=Me, responses=responses(401, 403))
def me(who: Who) -> dict[str, Any]:
    """Who the key is: role, owner and tenant (what the inbox page says it sees, and why)."""
    return {"name": who.name, "role": who.role, "owner": who.owner, "tenant": who.tenant}
