"""A host's code against the engine's API, checked by `mypy --strict` in `make lint`; never run.

The calls a host makes must type-check as written here, and the mistakes below must not: each
carries a `# type: ignore[<code>]`, which strict mypy reports as unused the day the API stops
catching that mistake (an `Any` crept into its signature, say). `tests/unit/
test_host_api_types.py` checks the same signatures for `Any` at run time.
"""

from __future__ import annotations

from typing import Any, assert_never

from agent import (
    STOP_POLICY,
    Agent,
    AgentSession,
    Answerer,
    AnswerRequest,
    ConfirmationRecord,
    ConfirmationRequest,
    ConfirmationRequested,
    ConfirmationStatus,
    InputRequest,
    InputRequested,
    InputResolved,
    JsonData,
    PendingApproval,
    PolicyAnswerer,
    Principal,
    QuorumAnswerer,
    ReceiptRecord,
    ReceiptStatus,
    RecentTurn,
    ResumeRequest,
    Runtime,
    Schedule,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    StopAuthorizationError,
    SuggestedPrompt,
    ToolContext,
    TurnCancelled,
    TurnEvent,
    TurnRecord,
    UserAnswerer,
    confirmation_digest,
    grant_answer,
    grant_confirmation,
    load_agent,
    resolve_receipt,
    tool,
)


async def authorize_answer(request: AnswerRequest) -> bool:
    """The agent's hook reads typed fields."""
    user: str | None = request["principal"].get("user")
    return request["policy"] == "ops" and user is not None and user == request["by"]


async def untyped_hook(request: dict[str, Any]) -> bool:
    return bool(request)


def assemble(store: SessionStore) -> Runtime:
    agent = load_agent(
        "my_agent",
        authorize_answer=authorize_answer,
        surfaces={"slack": {"mode": "append", "deny_tools": ["refund"]}},
    )
    Agent(name="a", instructions="x", surfaces={"api": {"deny_tools": []}})
    load_agent("my_agent", surfaces={"slack": {"mode": "prepend"}})  # type: ignore[dict-item]
    load_agent("my_agent", authorize_answer=untyped_hook)  # type: ignore[arg-type]
    model = ScriptedModel(
        turns=[
            [ScriptedReply(tool_calls=[("c1", "lookup", {"q": ["fan", 7, None]})])],
            [ScriptedReply(text="Done.")],
        ]
    )
    return Runtime(store, model, agent=agent)


async def answer(session: AgentSession, clicked: dict[str, str], store: SessionStore) -> None:
    who: Principal = {"team": "T1", "enterprise": None, "user": "U1"}
    granted = await grant_answer(session, ResumeRequest(turn_id="t1", input_id="ok", principal=who))
    await session.resume("t1", "ok", True, principal=who, granted=granted)
    await session.resume("t1", "ok", clicked, by="U1")
    await session.resume("t1", "ok", object(), by="U1")  # type: ignore[arg-type]
    await session.resume("t1", "ok", True, principal={"usr": "U1"})  # type: ignore[arg-type]
    pending: list[ConfirmationRecord] = await session.confirmations(ConfirmationStatus.PENDING)
    for proposal in pending:
        grant = await grant_confirmation(session, proposal.confirmation_id, by=None, principal=who)
        await session.confirm(proposal.confirmation_id, True, principal=who, granted=grant)
        shown: str = confirmation_digest(proposal)
        await session.confirm(
            proposal.confirmation_id, True, principal=who, turn_id=proposal.turn_id, digest=shown
        )
        await session.confirm(proposal.confirmation_id, True, digest=1)  # type: ignore[arg-type]


async def inspect_session(session: AgentSession, store: SessionStore) -> None:
    turns: list[TurnRecord] = await session.turns()
    steps: dict[str, JsonData] = await session.steps(turns[0].turn_id)
    uncertain: list[ReceiptRecord] = await session.receipts(ReceiptStatus.UNCERTAIN)
    for receipt in uncertain:
        await session.resolve_receipt(receipt.key, status="failed")
        await session.resolve_receipt(receipt.key, status="uncertain")  # type: ignore[arg-type]
    await session.resolve_receipt("k", status=ReceiptStatus.COMPLETED, value={"id": [1, 2]})
    await resolve_receipt(store, session.key, "k", status="completed", value=steps)


def who_answers(answerers: Answerer | None) -> str:
    """A host matches on the answerer kinds; mypy proves the match complete."""
    match answerers:
        case None:
            return "anyone"
        case UserAnswerer(user=user):
            return user
        case PolicyAnswerer(policy=policy, scope=scope):
            return f"{policy}/{scope}"
        case QuorumAnswerer(quorum=need, users=users, policy=policy):
            return f"{need} of {users or policy}"
        case _:
            assert_never(answerers)


async def answer_what_is_pending(session: AgentSession) -> None:
    """`pending()` is a typed request: fields, not keys."""
    waiting: list[InputRequest] = await session.pending()
    if not waiting:
        return
    request = waiting[0]
    schema: dict[str, Any] | None = request.json_schema
    by = request.answerers.user if isinstance(request.answerers, UserAnswerer) else None
    await session.resume(request.turn_id, request.id, schema is not None, by=by)
    await session.resume(request.turn_id, request.id, True, digest=request.digest)
    input_id: str = request["id"]  # type: ignore[index]
    user: str = request.answerers.user  # type: ignore[union-attr]
    await session.resume(request.turn_id, input_id, True, by=user)


def show(event: TurnEvent) -> str | None:
    """The events that ask a person carry typed requests."""
    if isinstance(event, InputRequested):
        return event.request.prompt + who_answers(event.request.answerers)
    if isinstance(event, ConfirmationRequested):
        shown: ConfirmationRequest = event.confirmation
        return shown.prompt + who_answers(shown.answerers)
    return None


def declare_answerers() -> list[Schedule]:
    """Answerers are declared typed or as the dict hosts always wrote; both are held typed."""

    @tool(effect="write", confirmation="required", answerers={"policy": "ops", "scope": "pay"})
    async def pay(order: str, ctx: ToolContext) -> str:
        """Pay an order."""
        return order

    typed: Answerer | None = pay.answerers
    return [
        Schedule(name="a", cron="0 9 * * *", seed="s", channel="C1", answerers={"user": "U1"}),
        Schedule(
            name="b", cron="0 9 * * *", seed="s", channel="C1", answerers=UserAnswerer(user="U1")
        ),
        Schedule(name="c", cron="0 9 * * *", seed="s", channel="C1", answerers="U1"),  # type: ignore[arg-type]
        Schedule(name="d", cron="0 9 * * *", seed="s", channel="C1", answerers=typed),
    ]


async def the_slack_agent_experience(runtime: Runtime, agent: Agent, who: Principal) -> None:
    """Issue 16 as a host calls it: Stop, expiry, reasons, the inbox, recent turns, prompts."""
    session = runtime.session(agent, "slack:T1:C1:1.0")
    stopped: list[str] = await session.stop(by="U1")
    await session.stop(by=7)  # type: ignore[arg-type]
    try:
        await session.stop(principal=who)
        await session.cancel("t1", principal=who)
    except StopAuthorizationError as refused:
        refusal: tuple[int, str] = (refused.http_status, STOP_POLICY)
        del refusal
    await session.resume("t1", "ok", False, by="U1", reason="wrong amount")
    await session.confirm("t1:c1", False, principal=who, reason="not a vendor")
    await session.confirm("t1:c1", False, reason=["no"])  # type: ignore[arg-type]
    expired: int = await runtime.expire_due()
    await runtime.expire_due(now=1.0)
    inbox: list[PendingApproval] = await runtime.answerable(who)
    for item in inbox:
        if item.kind == "input":
            await runtime.session(agent, item.session).resume(
                item.turn_id, item.request_id, True, principal=who, digest=item.digest
            )
        else:
            await runtime.session(agent, item.session).confirm(item.request_id, True, principal=who)
    recent: list[RecentTurn] = await runtime.recent_turns(who, limit=5)
    prompts: tuple[SuggestedPrompt, ...] = tuple(agent.suggested_prompts)
    assert stopped or expired or recent or prompts


def how_it_ended(event: TurnEvent) -> str:
    """A renderer's view of how parks end and who stopped a turn."""
    match event:
        case InputResolved(outcome="expired"):
            return f"{event.input_id} expired"
        case InputResolved():
            return f"{event.input_id} {event.outcome} by {event.by}"
        case TurnCancelled(by=None):
            return event.reason
        case TurnCancelled():
            return f"stopped by <@{event.by}>"
        case _:
            return event.type


async def ask_with_a_deadline(ctx: ToolContext) -> JsonData:
    answer: JsonData = await ctx.request_input(id="ok", prompt="OK?", expires_after=3600)
    reason: str | None = ctx.answer_reason("ok")
    await ctx.request_input(id="ok", prompt="OK?", expires_after="1h")  # type: ignore[arg-type]
    return answer if reason is None else reason
