"""Workflows the inbox page's browser tests run (``tests.flows_inbox:NAME``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from parkway import Contract, Retry, Workflow, use_interrupt

approvals = Workflow("inbox_approvals")


@approvals.node(start=True)
def approve(data: dict[str, Any]) -> dict[str, Any]:
    picked = use_interrupt(
        {"kind": "choice", "question": f"Approve order {data['n']}?",
         "options": [{"id": "yes", "label": "Approve"}, {"id": "no", "label": "Refuse"}]},
        id="approve",
    )
    return {"approved": picked == "yes"}


refunds = Workflow("inbox_refunds")


@refunds.node(start=True)
def refund(data: dict[str, Any]) -> dict[str, Any]:
    picked = use_interrupt(
        {"kind": "choice", "question": f"Refund order {data['n']}?",
         "options": [{"id": "yes", "label": "Refund"}, {"id": "no", "label": "Keep"}]},
        id="refund",
    )
    return {"refunded": picked == "yes"}


deep_failure = Workflow("inbox_deep_failure")


def _descend(depth: int, trail: str) -> None:
    if depth == 0:
        raise RuntimeError(f"the ledger at the bottom disagreed ({trail})")
    _descend(depth - 1, trail + "/level")


@deep_failure.node(start=True, retry=Retry(attempts=2))  # a failure retried once, then the last
def fail_deep(data: dict[str, Any]) -> None:
    _descend(30, "start")


class Address(BaseModel):
    street: str = Field(min_length=1, description="street and number")
    city: str = Field(min_length=1)


class Shipment(BaseModel):
    """A contract whose answer holds a nested object and arrays (of text and of numbers)."""

    address: Address
    tags: list[str] = Field(default_factory=list, description="labels for the parcel")
    weights: list[float] = Field(min_length=1)
    rush: bool = False


class ShipmentAsk(BaseModel):
    order: int


ship_to = Contract("ship-to", version=1, request=ShipmentAsk, response=Shipment, question="Where does it ship?")
shipping = Workflow("inbox_shipping")


@shipping.node(start=True)
def ship(data: dict[str, Any]) -> dict[str, Any]:
    answer = use_interrupt(contract=ship_to, request={"order": data["order"]}, id="ship")
    assert isinstance(answer, Shipment)
    return answer.model_dump()
