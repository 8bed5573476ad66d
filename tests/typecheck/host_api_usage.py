"""A host's code against the engine's API, checked by `mypy --strict` in `make lint`; never run.

The calls a host makes must type-check as written here, and the mistakes below must not: each
carries a `# type: ignore[<code>]`, which strict mypy reports as unused the day the API stops
catching that mistake (an `Any` crept into its signature, say). `tests/unit/
test_host_api_types.py` checks the same signatures for `Any` at run time.
"""

from __future__ import annotations

from typing import Any

from agent import (
    Agent,
    AgentSession,
    AnswerRequest,
    ConfirmationRecord,
    ConfirmationStatus,
    JsonData,
    Principal,
    ReceiptRecord,
    ReceiptStatus,
    ResumeRequest,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    TurnRecord,
    grant_answer,
    grant_confirmation,
    load_agent,
    resolve_receipt,
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


async def inspect_session(session: AgentSession, store: SessionStore) -> None:
    turns: list[TurnRecord] = await session.turns()
    steps: dict[str, JsonData] = await session.steps(turns[0].turn_id)
    uncertain: list[ReceiptRecord] = await session.receipts(ReceiptStatus.UNCERTAIN)
    for receipt in uncertain:
        await session.resolve_receipt(receipt.key, status="failed")
        await session.resolve_receipt(receipt.key, status="uncertain")  # type: ignore[arg-type]
    await session.resolve_receipt("k", status=ReceiptStatus.COMPLETED, value={"id": [1, 2]})
    await resolve_receipt(store, session.key, "k", status="completed", value=steps)
