"""Who may stop a turn: the one check `AgentSession.stop` and `cancel` make when a surface
names the person asking (`principal=`), whatever the surface (Slack's Stop button, an HTTP
cancel).

Stopping a parked turn ends its request unanswered, which is a Deny by another name, so it is
for whoever may answer that request (its user, or whom `authorize_answer` grants its policy)
and for the person who asked. A queued or running turn is for the person who asked (its
attested speaker; a triggered turn's answerers, such as whoever confirmed the write a
follow-up turn carries out), or for whom the agent's policy allows: `authorize_answer` asked
about policy `STOP_POLICY` with the session key as its scope. Nobody from another workspace
than the turn's, since a user id names one person only inside it. A call that names nobody is
host code, which is trusted, as it is for answers.

A person's Stop ends the turns theirs to stop and leaves the others (a message someone else
sent behind theirs still gets its answer); one with none of them is refused and nothing stops.
Where every unfinished turn is theirs the session is stopped whole (one transaction, recording
who); the check reads the turns before that commits, so a turn queued in between by someone
else ends with the others (a park cannot appear in between: a session with an unfinished turn
does not park another, and a parked session queues nothing).
"""

from __future__ import annotations

from typing import assert_never

from agent._errors import ResumeAuthorizationError, StopAuthorizationError
from agent._hitl_answerers import Answerer, PolicyAnswerer, QuorumAnswerer, UserAnswerer
from agent._hitl_answering import parked_workspace
from agent._hitl_checks import AnswerRequest, Principal, check_workspace, issue_grant, workspace_of
from agent._hitl_requests import InputRequest, parked_requests
from agent._session_host import SessionHandle
from agent.seams import SessionStatus, TurnKind, TurnRecord, TurnStatus

STOP_POLICY = "stop"
"""The policy `authorize_answer` is asked about for a Stop of a turn that is not the asker's
own (its `scope` is the session key); a hook that admits nobody for it leaves Stop to the
person who asked."""
ANOTHER_WORKSPACE = "it belongs to another workspace, and only people there can stop it"
NOT_YOURS_PARKED = (
    "it is waiting for an answer that is not yours to give; only the person who asked, or "
    "someone who may answer it, can stop it"
)
NOT_YOURS = "only the person who asked (or someone the agent's policy allows) can stop it"


async def check_may_stop(
    session: SessionHandle, principal: Principal, by: str | None, *, only: str | None = None
) -> None:
    """Raise `StopAuthorizationError` unless `principal` (`by`) may stop every unfinished turn
    of the session (only the turn `only`, for `cancel`); nothing has been written then."""
    _, refusal = await stoppable(session, principal, by, only=only)
    if refusal is not None:
        raise refusal


async def stoppable(
    session: SessionHandle, principal: Principal, by: str | None, *, only: str | None = None
) -> tuple[list[str], StopAuthorizationError | None]:
    """The unfinished turns `principal` may stop (in queue order), and why one was refused
    (None: every one may be)."""
    store = session.runtime.store
    record = await store.get_session(session.key)
    parked: list[InputRequest] = []
    workspace: dict[str, str] = {}
    if record is not None and record.status == SessionStatus.SUSPENDED and record.pending:
        parked = parked_requests(record.pending)
        workspace = parked_workspace(record.pending)
    allowed: list[str] = []
    refusal: StopAuthorizationError | None = None
    for turn in await store.list_turns(session.key):
        if turn.kind != TurnKind.TURN or turn.cancel_reason is not None:
            continue
        if only is not None and turn.turn_id != only:
            continue
        try:
            parks = bool(parked) and parked[0].turn_id == turn.turn_id
            if parks and turn.status == TurnStatus.SUSPENDED:
                await _check_park(session, turn, parked, workspace, principal, by)
            elif turn.status in (TurnStatus.QUEUED, TurnStatus.RUNNING):
                await _check_running(session, turn, principal, by)
            else:
                continue
        except StopAuthorizationError as refused:
            refusal = refusal or refused
            continue
        allowed.append(turn.turn_id)
    return allowed, refusal


async def _check_park(
    session: SessionHandle,
    turn: TurnRecord,
    parked: list[InputRequest],
    workspace: dict[str, str],
    principal: Principal,
    by: str | None,
) -> None:
    """The person who asked, or one who may answer every request the turn waits on: a Stop
    ends them all, so someone who may answer only one of them cannot take the others' answers
    from the people they are for (that one they can deny)."""
    _same_workspace(workspace or workspace_of(turn.input), principal)
    if _speaker(turn) == by and by is not None:
        return
    for request in parked:
        if not await _may_answer(session, request.answerers, principal, by, request.digest):
            raise StopAuthorizationError(NOT_YOURS_PARKED)


async def _check_running(
    session: SessionHandle, turn: TurnRecord, principal: Principal, by: str | None
) -> None:
    _same_workspace(workspace_of(turn.input), principal)
    if _speaker(turn) == by and by is not None:
        return
    trigger = turn.input.trigger
    owners = trigger.answerers if trigger is not None else None
    if owners is not None and await _may_answer(session, owners, principal, by, digest=""):
        return
    hook = session.agent.authorize_answer
    if hook is not None and by is not None:
        asked = AnswerRequest(
            policy=STOP_POLICY, scope=session.key, by=by, principal=principal.copy()
        )
        if await hook(asked) is True:
            return
    raise StopAuthorizationError(NOT_YOURS)


def _same_workspace(workspace: dict[str, str], principal: Principal) -> None:
    try:
        check_workspace(workspace, principal)
    except ResumeAuthorizationError:
        raise StopAuthorizationError(ANOTHER_WORKSPACE) from None


def _speaker(turn: TurnRecord) -> str | None:
    """The person who asked, where the surface attested them."""
    inbound = turn.input.inbound
    if inbound is None or inbound.user is None or not inbound.user.attested:
        return None
    return inbound.user.id


async def _may_answer(
    session: SessionHandle,
    answerers: Answerer | None,
    principal: Principal,
    by: str | None,
    digest: str,
) -> bool:
    match answerers:
        case None:
            return False  # host code answers; no person is named
        case UserAnswerer(user=user):
            return by is not None and by == user
        case QuorumAnswerer(users=tuple() as users):
            return by is not None and by in users
        case PolicyAnswerer() | QuorumAnswerer():
            granted = await issue_grant(
                answerers,
                by=by,
                principal=principal,
                digest=digest,
                authorize_answer=session.agent.authorize_answer,
            )
            return granted is not None
        case _:
            assert_never(answerers)
