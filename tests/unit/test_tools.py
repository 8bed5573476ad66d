"""`@tool`: schema from type hints, local/remote by declaration, assembly checks."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from agent import Agent, AssemblyError, ToolContext, tool


def test_schema_from_type_hints_leaves_out_the_context() -> None:
    @tool
    def refund(order_id: str, amount: float, ctx: ToolContext, note: str = "") -> dict[str, Any]:
        """Refund an order.

        Longer text the model does not need."""
        return {}

    assert refund.name == "refund"
    assert refund.description == "Refund an order."
    assert refund.local
    assert refund.input_schema == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "amount": {"type": "number"},
            "note": {"type": "string", "default": ""},
        },
        "required": ["order_id", "amount"],
        "additionalProperties": False,
    }


def test_annotated_constraints_reach_the_schema_and_the_check() -> None:
    """A bound declared on an argument is what the model reads and what every call (and every
    edit of a proposed call) is checked against; dropping it would let a refund of -5 run."""

    @tool
    def refund(amount: Annotated[int, Field(gt=0, le=500, description="In euros.")]) -> None:
        """Refund."""

    assert refund.input_schema["properties"]["amount"] == {
        "type": "integer",
        "exclusiveMinimum": 0,
        "maximum": 500,
        "description": "In euros.",
    }
    assert refund.parse_input({"amount": 40}) == {"amount": 40}
    for wrong in (-5, 0, 501):
        with pytest.raises(ValidationError):
            refund.parse_input({"amount": wrong})


def test_async_def_is_remote() -> None:
    @tool(name="lookup", description="Find things.")
    async def find(query: str) -> list[str]:
        return []

    assert not find.local
    assert find.spec.name == "lookup"
    assert find.spec.description == "Find things."


def test_write_tool_without_confirmation_is_rejected_at_assembly() -> None:
    @tool(effect="write")
    async def issue_refund(order_id: str) -> str:
        """Refund."""
        return order_id

    with pytest.raises(AssemblyError, match="issue_refund"):
        Agent(name="ops", instructions="x", tools=[issue_refund])


def test_write_tool_with_confirmation_assembles() -> None:
    @tool(effect="write", confirmation="required")
    async def issue_refund(order_id: str) -> str:
        """Refund."""
        return order_id

    assert Agent(name="ops", instructions="x", tools=[issue_refund]).tool_named("issue_refund")


def test_a_local_capability_tool_is_rejected_at_assembly() -> None:
    """It could neither ask a person nor write through run_effect, where the answer is checked."""

    @tool(effect="write", confirmation="capability")
    def charge(order: str) -> str:
        """Charge."""
        return order

    with pytest.raises(AssemblyError, match=r"'charge'.*local \(def\).*async def"):
        Agent(name="ops", instructions="x", tools=[charge])

    @tool(effect="write", confirmation="capability", name="charge")
    async def remote_charge(order: str) -> str:
        """Charge."""
        return order

    assert Agent(name="ops", instructions="x", tools=[remote_charge]).tool_named("charge")


def test_duplicate_tool_names_are_rejected() -> None:
    @tool
    def a() -> int:
        """A."""
        return 1

    with pytest.raises(AssemblyError, match="two tools"):
        Agent(name="x", instructions="x", tools=[a, a])
