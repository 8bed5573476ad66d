"""Who may answer what, across sessions: one query for every surface that lists approvals
(Slack's App Home, `bot approvals`, an HTTP API), and a person's own recent turns.

The query applies the rules an answer is checked by (`agent._hitl_checks`), so what it lists for a
person is what they could answer, and never what someone else could:
- a `{"user": id}` answerer: that person, and only inside the request's own workspace (a user
  id names one person only there), so a request saved without a workspace is listed for
  nobody;
- a policy answerer: whoever the agent's `authorize_answer` admits, asked about this principal
  only after the workspace check a click would pass;
- no answerers (a turn host code started, answered by host code): nobody, since no person is
  named;
- and, once a request's escalation fired, whoever its answerers admit by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, assert_never

from agent._agent_def import Agent
from agent._errors import ResumeAuthorizationError
from agent._hitl_answerers import Answerer, PolicyAnswerer, QuorumAnswerer, UserAnswerer
from agent._hitl_answering import parked_workspace
from agent._hitl_checks import Principal, check_workspace, issue_grant, workspace_of
from agent._hitl_confirm import confirmation_digest
from agent._hitl_quorum import Tally, tally
from agent._hitl_reminding import escalated_answerers
from agent._hitl_requests import parked_requests
from agent._turn_input import TurnInput, speaker_key
from agent.seams import SessionStore, TimerKind, TurnStatus


@dataclass(frozen=True, kw_only=True)
class PendingApproval:
    """A request a person may answer now: a parked `request_input` (`kind="input"`, answered
    with `session.resume(turn_id, request_id, ...)`) or a proposed write (`kind="confirm"`,
    answered with `session.confirm(request_id, ...)`)."""

    kind: Literal["input", "confirm"]
    session: str
    turn_id: str
    """The parked turn, or the turn that proposed the write."""
    request_id: str
    """The input id, or the confirmation id."""
    prompt: str
    asked_by: str | None
    """Whose turn asked: its speaker, or its trigger's `by` (e.g. `cron:daily`)."""
    created_at: float | None
    """When it was asked (None for a park made before this was recorded)."""
    digest: str
    """What an answer (a button) binds to, as `resume(digest=)` and grants check."""
    tool: str
    expires_at: float | None = None
    answerers: Answerer | None = None
    """Who may answer: a user, a policy (decided by the agent's `authorize_answer`), or None
    (host code answers; no person is named)."""
    workspace: dict[str, str] = field(default_factory=dict)
    """The workspace (`team`, `enterprise`) an answer must come from; empty if none was saved."""
    tally: Tally | None = None
    """For a request that needs several approvals (`Quorum`): the votes so far."""
    escalated_to: tuple[Answerer, ...] = ()
    """Who else may answer it: the answerers of its escalations that fired
    (`agent._hitl_reminding`)."""

    def voted(self, user: str | None) -> bool:
        """Has `user` voted on it already (a quorum request; one person counts once)?"""
        return self.tally is not None and user in (*self.tally.approved_by, *self.tally.denied_by)


@dataclass(frozen=True, kw_only=True)
class RecentTurn:
    """One of a person's own turns, as `Runtime.recent_turns` lists them."""

    session: str
    turn_id: str
    status: TurnStatus
    text: str
    created_at: float


class InboxHost(Protocol):
    """What the query needs of the runtime: the store and which agent owns a session."""

    @property
    def store(self) -> SessionStore: ...

    def agent_for(self, key: str) -> Agent | None: ...


async def pending_approvals(store: SessionStore) -> list[PendingApproval]:
    """Every pending request across sessions, whoever may answer it, newest first: what an
    operator lists (`bot approvals`), and what `answerable` narrows down to one person."""
    found: list[PendingApproval] = []
    for record in await store.list_parked():
        for request in parked_requests(record.pending):
            turn = await store.get_turn(record.key, request.turn_id)
            parked_at = (
                record.pending.get("parked_at") if isinstance(record.pending, dict) else None
            )
            found.append(
                PendingApproval(
                    kind="input",
                    session=record.key,
                    turn_id=request.turn_id,
                    request_id=request.id,
                    prompt=request.prompt,
                    asked_by=_asker(turn.input if turn is not None else None),
                    created_at=float(parked_at) if isinstance(parked_at, int | float) else None,
                    digest=request.digest,
                    tool=request.tool,
                    expires_at=request.expires_at,
                    answerers=request.answerers,
                    workspace=parked_workspace(record.pending),
                    tally=await _tally(
                        store,
                        request.answerers,
                        record.key,
                        TimerKind.INPUT,
                        request.turn_id,
                        request.id,
                    ),
                    escalated_to=tuple(
                        await escalated_answerers(
                            store, record.key, TimerKind.INPUT, request.turn_id, request.id
                        )
                    ),
                )
            )
    for proposal in await store.pending_confirmations():
        turn = await store.get_turn(proposal.session, proposal.turn_id)
        turn_input = turn.input if turn is not None else None
        found.append(
            PendingApproval(
                kind="confirm",
                session=proposal.session,
                turn_id=proposal.turn_id,
                request_id=proposal.confirmation_id,
                prompt=proposal.prompt,
                asked_by=_asker(turn_input),
                created_at=proposal.created_at,
                digest=confirmation_digest(proposal),
                tool=proposal.tool,
                expires_at=proposal.expires_at,
                answerers=proposal.answerers,
                workspace=workspace_of(turn_input),
                tally=await _tally(
                    store,
                    proposal.answerers,
                    proposal.session,
                    TimerKind.CONFIRMATION,
                    proposal.turn_id,
                    proposal.confirmation_id,
                ),
                escalated_to=tuple(
                    await escalated_answerers(
                        store,
                        proposal.session,
                        TimerKind.CONFIRMATION,
                        proposal.turn_id,
                        proposal.confirmation_id,
                    )
                ),
            )
        )
    found.sort(key=lambda pending: pending.created_at or 0.0, reverse=True)
    return found


async def _tally(
    store: SessionStore,
    answerers: Answerer | None,
    session: str,
    kind: TimerKind,
    turn_id: str,
    request_id: str,
) -> Tally | None:
    if not isinstance(answerers, QuorumAnswerer):
        return None
    return tally(answerers, await store.list_votes(session, kind, turn_id, request_id))


async def request_tally(
    store: SessionStore, key: str, kind: Literal["input", "confirm"], turn_id: str, request_id: str
) -> Tally | None:
    """The votes on one request that needs several approvals (`Quorum`); None for any other.
    A proposed write's stay readable once it is answered (its row keeps its answerers); a
    park's only while it waits (its `input.resolved` event says who approved)."""
    if kind == "confirm":
        proposal = await store.get_confirmation(key, request_id)
        if proposal is None or proposal.turn_id != turn_id:
            return None
        return await _tally(
            store, proposal.answerers, key, TimerKind.CONFIRMATION, turn_id, request_id
        )
    record = await store.get_session(key)
    waiting = parked_requests(record.pending) if record is not None else []
    request = next((r for r in waiting if (r.turn_id, r.id) == (turn_id, request_id)), None)
    if request is None:
        return None
    return await _tally(store, request.answerers, key, TimerKind.INPUT, turn_id, request_id)


async def answerable(host: InboxHost, principal: Principal) -> list[PendingApproval]:
    """Every pending request `principal` may answer, newest first; `[]` if none (or if the
    principal names no user). A failing `authorize_answer` propagates, as it does for a click:
    an inbox that hid what a broken hook should decide would be wrong either way."""
    user = principal.get("user")
    if not user:
        return []
    return [
        pending
        for pending in await pending_approvals(host.store)
        if not pending.voted(user) and await _may_answer_any(host, pending, principal)
    ]


async def _may_answer_any(host: InboxHost, pending: PendingApproval, principal: Principal) -> bool:
    """The request's own answerers admit the principal, or an escalation's does."""
    for answerers in (pending.answerers, *pending.escalated_to):
        if await _may_answer(
            host, pending.session, answerers, pending.workspace, principal, pending.digest
        ):
            return True
    return False


async def _may_answer(
    host: InboxHost,
    session: str,
    answerers: Answerer | None,
    workspace: dict[str, str],
    principal: Principal,
    digest: str,
) -> bool:
    try:
        check_workspace(workspace, principal)
    except ResumeAuthorizationError:
        return False
    match answerers:
        case None:
            return False
        case UserAnswerer(user=user):
            return bool(workspace) and principal.get("user") == user
        case QuorumAnswerer(users=tuple() as users):
            return bool(workspace) and principal.get("user") in users
        case PolicyAnswerer() | QuorumAnswerer():
            agent = host.agent_for(session)
            if agent is None or agent.authorize_answer is None:
                return False
            granted = await issue_grant(
                answerers,
                by=principal.get("user"),
                principal=principal,
                digest=digest,
                authorize_answer=agent.authorize_answer,
            )
            return granted is not None
        case _:
            assert_never(answerers)


def _asker(turn_input: TurnInput | None) -> str | None:
    if turn_input is None:
        return None
    if turn_input.inbound is not None and turn_input.inbound.user is not None:
        return turn_input.inbound.user.id
    return turn_input.trigger.by if turn_input.trigger is not None else None


async def recent_turns(host: InboxHost, principal: Principal, limit: int) -> list[RecentTurn]:
    """The principal's own turns (they were the attested speaker, in that workspace), newest
    first, across sessions; `[]` for a principal without a user and a team."""
    user, team = principal.get("user"), principal.get("team")
    if not user or not team or limit < 1:
        return []
    return [
        RecentTurn(
            session=record.session,
            turn_id=record.turn_id,
            status=record.status,
            text=record.input.text,
            created_at=record.created_at,
        )
        for record in await host.store.recent_turns(speaker_key(team, user), limit)
    ]
