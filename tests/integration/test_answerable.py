"""Who may answer what, in one query across sessions, and a person's own recent turns.

What `Runtime.answerable` lists for a person is what they could answer (each item is then
answered with what it carries), and never what someone else could. Runs on every store.
"""

from __future__ import annotations

from typing import Any

from agent import (
    Agent,
    AnswerRequest,
    InboundEvent,
    PendingApproval,
    Principal,
    ResumeRequest,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    Speaker,
    ToolCall,
    ToolContext,
    TurnInput,
    TurnStatus,
    grant_answer,
    tool,
)

HOOK_ASKED: list[Principal] = []


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


@tool
async def approve(ctx: ToolContext) -> str:
    """Asks the speaker."""
    return str(await ctx.request_input(id="ok", prompt="OK?"))


@tool
async def escalate(ctx: ToolContext) -> str:
    """Asks whoever the approvers policy admits."""
    return str(await ctx.request_input(id="esc", prompt="Escalate?", answerers={"policy": "ops"}))


@tool(effect="write", confirmation="required")
async def wire(to: str) -> dict[str, str]:
    """Wire money."""
    return {"wired": to}


async def _authorize(request: AnswerRequest) -> bool:
    HOOK_ASKED.append(request["principal"])
    return request["principal"].get("user") == "U5"


def _agent() -> Agent:
    return Agent(
        name="a", instructions="x", tools=[approve, escalate, wire], authorize_answer=_authorize
    )


def _calling(name: str, **arguments: Any) -> list[ScriptedReply]:
    call = ToolCall(id=f"c-{name}", name=name, input=arguments)
    return [ScriptedReply(tool_calls=[call]), ScriptedReply(text=f"{name} done")]


MODEL_SCRIPTS = {
    "approve": _calling("approve"),
    "escalate": _calling("escalate"),
    "wire": _calling("wire", to="bob"),
    "chat": [ScriptedReply(text="hi")],
}


def _said(text: str, user: str, team: str = "T1") -> InboundEvent:
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=True),
        context={"team": team, "channel": "C1"},
    )


async def _populate(rt: Runtime, agent: Agent) -> None:
    async def run(key: str, turn_id: str, event: InboundEvent | TurnInput) -> None:
        session = rt.session(agent, key)
        await session.result(await session.start(event, turn_id=turn_id))

    await run("s-mine", "T1", _said("approve", "U1"))
    await run("s-policy", "T2", _said("escalate", "U2"))
    await run("s-wire", "T3", _said("wire", "U1"))
    await run("s-host", "T4", TurnInput(text="approve"))  # host code: no person named
    await run("s-other-team", "T5", _said("approve", "U1", team="T9"))
    await run("s-chat", "T6", _said("chat", "U1"))


def _listed(found: list[PendingApproval]) -> list[tuple[str, str, str, str | None]]:
    return [(p.kind, p.session, p.request_id, p.asked_by) for p in found]


async def test_answerable_lists_what_the_principal_may_answer_newest_first(
    store: SessionStore,
) -> None:
    HOOK_ASKED.clear()
    agent = _agent()
    model = ScriptedModel(by_opening=MODEL_SCRIPTS)
    async with Runtime(store, model, agent=agent, clock=Clock(), poll_interval=0.02) as rt:
        await _populate(rt, agent)
        principal = Principal(team="T1", user="U1")

        mine = await rt.answerable(principal)

        assert _listed(mine) == [
            ("confirm", "s-wire", "T3:c-wire", "U1"),
            ("input", "s-mine", "ok", "U1"),
        ]
        assert [(p.turn_id, p.tool, p.prompt) for p in mine] == [
            ("T3", "wire", 'Allow wire with {"to": "bob"}?'),
            ("T1", "approve", "OK?"),
        ]
        assert all(p.created_at is not None for p in mine)
        assert mine[0].created_at > mine[1].created_at  # type: ignore[operator]
        assert [principal] == HOOK_ASKED, "the policy hook was asked about this person only"

        # Each item carries what answering it takes.
        confirm, park = mine
        await rt.session(agent, "s-wire").confirm(confirm.request_id, True, principal=principal)
        await rt.session(agent, "s-mine").resume(
            park.turn_id, park.request_id, True, principal=principal, digest=park.digest
        )
        assert (await rt.session(agent, "s-mine").result("T1")).status == TurnStatus.COMPLETED
        assert _listed(await rt.answerable(principal)) == []


async def test_the_same_user_id_elsewhere_a_policy_and_nobody(store: SessionStore) -> None:
    HOOK_ASKED.clear()
    agent = _agent()
    model = ScriptedModel(by_opening=MODEL_SCRIPTS)
    async with Runtime(store, model, agent=agent, clock=Clock(), poll_interval=0.02) as rt:
        await _populate(rt, agent)

        elsewhere = await rt.answerable(Principal(team="T9", user="U1"))
        approver = Principal(team="T1", user="U5")
        admitted = await rt.answerable(approver)
        refused = await rt.answerable(Principal(team="T1", user="U7"))
        other_team = await rt.answerable(Principal(team="T2", user="U5"))
        nobody = await rt.answerable(Principal(team="T1"))

        assert _listed(elsewhere) == [("input", "s-other-team", "ok", "U1")]
        assert _listed(admitted) == [("input", "s-policy", "esc", "U2")]
        assert (refused, other_team, nobody) == ([], [], [])
        assert [p.get("user") for p in HOOK_ASKED] == ["U5", "U7"], (
            "never asked about someone from another workspace"
        )
        # The listed policy request is answered with a grant, as from any surface.
        [pending] = admitted
        session = rt.session(agent, "s-policy")
        request = ResumeRequest(
            turn_id=pending.turn_id, input_id=pending.request_id, principal=approver
        )
        granted = await grant_answer(session, request)
        await session.resume(
            pending.turn_id, pending.request_id, True, principal=approver, granted=granted
        )
        assert (await session.result("T2")).status == TurnStatus.COMPLETED


async def test_recent_turns_are_the_principals_own_newest_first(store: SessionStore) -> None:
    agent = _agent()
    model = ScriptedModel(by_opening=MODEL_SCRIPTS)
    async with Runtime(store, model, agent=agent, clock=Clock(), poll_interval=0.02) as rt:
        await _populate(rt, agent)

        mine = await rt.recent_turns(Principal(team="T1", user="U1"))
        two = await rt.recent_turns(Principal(team="T1", user="U1"), limit=2)
        theirs = await rt.recent_turns(Principal(team="T1", user="U2"))
        no_team = await rt.recent_turns(Principal(user="U1"))

    assert [(t.session, t.turn_id, t.text, t.status) for t in mine] == [
        ("s-chat", "T6", "chat", TurnStatus.COMPLETED),
        ("s-wire", "T3", "wire", TurnStatus.COMPLETED),
        ("s-mine", "T1", "approve", TurnStatus.SUSPENDED),
    ]
    assert [t.turn_id for t in two] == ["T6", "T3"]
    assert [t.turn_id for t in theirs] == ["T2"]
    assert no_team == []
