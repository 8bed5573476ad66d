"""Answerers are typed (`UserAnswerer`, `PolicyAnswerer`), but hosts declare them as the dicts
they always wrote, and the stores keep those dicts: both shapes go in, one typed value comes
out, and its JSON is the dict it came from. Anything else is refused where it is declared,
with a message naming the shapes that are accepted."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    AssemblyError,
    PolicyAnswerer,
    Schedule,
    ToolContext,
    ToolError,
    Trigger,
    UserAnswerer,
    tool,
)
from agent._hitl_answerers import answerers_json
from agent._hitl_checks import answerers_of
from agent.seams import answerers_from_json, answerers_to_json

MALFORMED: list[Any] = [
    {},
    {"user": ""},
    {"user": 7},
    {"user": "U1", "policy": "ops"},
    {"policy": "ops", "team": "T1"},
    {"scope": "refunds"},
    {"policy": None},
    {"kind": "group", "group": "G1"},
    "U1",
    ["U1"],
]


@pytest.mark.parametrize(
    ("given", "typed"),
    [
        ({"user": "U1"}, UserAnswerer(user="U1")),
        ({"policy": "ops", "scope": "refunds"}, PolicyAnswerer(policy="ops", scope="refunds")),
        ({"policy": "ops"}, PolicyAnswerer(policy="ops")),
        ({"kind": "user", "user": "U1"}, UserAnswerer(user="U1")),
        (UserAnswerer(user="U1"), UserAnswerer(user="U1")),
        (None, None),
    ],
)
def test_both_shapes_normalise_to_the_typed_answerer(given: Any, typed: Any) -> None:
    assert answerers_of(given) == typed


@pytest.mark.parametrize(
    "stored",
    [
        {"user": "U1"},
        {"policy": "ops", "scope": "refunds"},
        {"policy": "ops"},
        {"policy": "ops", "scope": None},
        {"scope": "refunds", "policy": "ops"},
    ],
)
def test_the_json_is_the_dict_it_came_from(stored: dict[str, Any]) -> None:
    """No `kind` in it, and a scope only where one was given: the digest hashes this JSON."""
    typed = answerers_of(stored)
    assert answerers_json(typed) == stored
    assert answerers_from_json(answerers_to_json(typed)) == typed
    assert answerers_json(answerers_from_json(answerers_to_json(typed))) == stored


def test_a_missing_scope_and_a_null_scope_stay_apart() -> None:
    """Equal as answerers (both have no scope), but two requests with two digests before the
    types existed, so they dump as the two dicts they were."""
    omitted, null = PolicyAnswerer(policy="ops"), PolicyAnswerer(policy="ops", scope=None)
    assert answerers_json(omitted) == {"policy": "ops"}
    assert answerers_json(null) == {"policy": "ops", "scope": None}


def test_no_restriction_is_a_null_column() -> None:
    assert answerers_to_json(None) is None
    assert answerers_from_json(None) is None
    assert answerers_to_json(UserAnswerer(user="Ü1")) == '{"user":"Ü1"}'


@pytest.mark.parametrize("bad", MALFORMED, ids=repr)
def test_a_malformed_answerer_is_refused_with_the_accepted_shapes(bad: Any) -> None:
    with pytest.raises(ToolError) as refused:
        answerers_of(bad)
    message = str(refused.value)
    assert "{'user': id}" in message
    assert "{'policy': p, 'scope': s}" in message
    assert repr(bad) in message


def test_the_refusal_says_what_is_wrong() -> None:
    with pytest.raises(ToolError, match="user: String should have at least 1 character"):
        answerers_of({"user": ""})
    with pytest.raises(ToolError, match="Extra inputs are not permitted"):
        answerers_of({"policy": "ops", "team": "T1"})


def test_the_models_are_frozen() -> None:
    user = UserAnswerer(user="U1")
    with pytest.raises(ValueError, match="frozen"):
        user.user = "U2"  # type: ignore[misc]


def test_a_schedule_normalises_its_answerers() -> None:
    as_dict = Schedule(
        name="daily", cron="0 9 * * *", seed="s", channel="C1", answerers={"user": "U1"}
    )
    typed = Schedule(
        name="daily", cron="0 9 * * *", seed="s", channel="C1", answerers=UserAnswerer(user="U1")
    )
    assert as_dict == typed
    assert as_dict.answerers == UserAnswerer(user="U1")


@pytest.mark.parametrize("bad", MALFORMED, ids=repr)
def test_a_schedule_with_malformed_answerers_is_an_assembly_error(bad: Any) -> None:
    with pytest.raises(AssemblyError, match="schedule 'daily'"):
        Schedule(name="daily", cron="0 9 * * *", seed="s", channel="C1", answerers=bad)


def test_a_tool_normalises_its_answerers_when_declared() -> None:
    @tool(effect="write", confirmation="required", answerers={"policy": "ops"})
    async def pay(order: str, ctx: ToolContext) -> str:
        """Pay an order."""
        return order

    assert pay.answerers == PolicyAnswerer(policy="ops")
    assert answerers_json(pay.answerers) == {"policy": "ops"}
    Agent(name="a", instructions="x", tools=[pay])


def test_a_tool_with_malformed_answerers_does_not_declare() -> None:
    with pytest.raises(AssemblyError, match=r"tool 'pay'.*answerers must be"):

        @tool(effect="write", confirmation="required", answerers={"users": ["U1"]})
        async def pay(order: str, ctx: ToolContext) -> str:
            """Pay an order."""
            return order


def test_a_trigger_reads_and_writes_the_stored_dict() -> None:
    """A trigger is part of a stored turn input: the dict in, the same dict out."""
    trigger = Trigger(kind="proactive", by="cron:daily", answerers={"user": "U9"})
    assert trigger.answerers == UserAnswerer(user="U9")
    dumped = trigger.model_dump(mode="json")
    assert dumped["answerers"] == {"user": "U9"}
    assert Trigger.model_validate(dumped) == trigger
