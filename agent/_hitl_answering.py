"""Which parked request an answer is for, and why it is refused when that request is not the
one waiting: the checks `resume` and `grant_answer` make first, in words a person can read.

Every surface shows these texts as they are (a Slack click's ephemeral, the HTTP API's 409), so
they say what became of the request (answered already, expired, stopped, or another one waits
now) and never name the engine's internal keys. A second answer to a request that was answered
is "already answered", whether it was refused before the store was asked or by the store under
its lock (a race between two clicks): the store's own refusal is read back into the same words.
"""

from __future__ import annotations

from agent._errors import ResumeConflictError
from agent._hitl_answer_notes import note_step_id
from agent._hitl_checks import (
    AuthorizeAnswer,
    Grant,
    ResumeRequest,
    answer_step_id,
    answering_user,
    check_workspace,
    workspace_of,
)
from agent._hitl_reminding import escalated_answerers, grant_widened
from agent._hitl_requests import InputRequest, parked_requests
from agent._messages import JsonValue
from agent._session_host import SessionHandle
from agent._turn_input import InboundEvent, TurnInput
from agent.seams import SessionRecord, SessionStatus, SessionStore, TimerKind, TurnStatus

ALREADY_ANSWERED = "this request was already answered"
EXPIRED = "this request expired before anyone answered it"
STOPPED = "this request was stopped before anyone answered it"
NOT_WAITING = "this request is no longer waiting for an answer"
ANOTHER_WAITS = "another request is waiting in this conversation, not the one answered"
CHANGED = "the request changed since this answer was given for it"


async def gone_reason(store: SessionStore, key: str, turn_id: str, input_id: str) -> str:
    """What became of a request that is not waiting: its answer or expiry is in the turn's
    steps (until a reset archives them), a Stop cancelled its turn."""
    steps = await store.load_steps(key, turn_id)
    note = steps.get(note_step_id(turn_id, input_id))
    if isinstance(note, dict) and note.get("outcome") == "expired":
        return EXPIRED
    if answer_step_id(turn_id, input_id) in steps:
        return ALREADY_ANSWERED
    turn = await store.get_turn(key, turn_id)
    if turn is not None and turn.status == TurnStatus.CANCELLED:
        return STOPPED
    return NOT_WAITING


async def waiting_request(
    store: SessionStore,
    key: str,
    turn_id: str,
    input_id: str,
    *,
    digest: str | None,
    now: float,
) -> tuple[SessionRecord, InputRequest]:
    """The session and the parked request named (with `digest`, still the one the answer was
    given for), among the requests the park waits on; `ResumeConflictError` saying why not."""
    record = await store.get_session(key)
    parked = (
        record is not None and record.status == SessionStatus.SUSPENDED and bool(record.pending)
    )
    if record is None or not parked:
        raise ResumeConflictError(await gone_reason(store, key, turn_id, input_id))
    waiting = parked_requests(record.pending)
    request = next((r for r in waiting if (r.turn_id, r.id) == (turn_id, input_id)), None)
    if request is None:
        why = await gone_reason(store, key, turn_id, input_id)
        raise ResumeConflictError(ANOTHER_WAITS if why == NOT_WAITING else why)
    if digest is not None and digest != request.digest:
        raise ResumeConflictError(CHANGED)
    refuse_expired(request.expires_at, now)
    return record, request


def refuse_expired(expires_at: float | None, now: float) -> None:
    """Past its deadline a request takes no answer, even before a sweep has applied its expiry
    (which it will): the deadline is the one the person was shown."""
    if expires_at is not None and now >= expires_at:
        raise ResumeConflictError(EXPIRED)


def parked_workspace(pending: JsonValue) -> dict[str, str]:
    """The workspace of the parked turn, saved with its checkpoint (older checkpoints: read off
    the inbound event they saved)."""
    if not isinstance(pending, dict):
        return {}
    saved = pending.get("workspace")
    if isinstance(saved, dict):
        return {str(k): str(v) for k, v in saved.items()}
    inbound = pending.get("inbound")
    if isinstance(inbound, dict):
        return workspace_of(TurnInput(text="", inbound=InboundEvent.model_validate(inbound)))
    return {}


async def grant_answer(
    session: SessionHandle,
    request: ResumeRequest,
    authorize_answer: AuthorizeAnswer | None = None,
) -> Grant | None:
    """The one async step before a policy resume: ask the agent's `authorize_answer` hook.

    Its exceptions propagate (an HTTP surface answers 500 and applies nothing, so the same
    answer can be retried). Returns None when the hook says no or no policy applies. The
    request's `by` and `principal` are checked as `resume` checks them (the hook is asked about
    the one person they name), so the grant fits the resume that follows.
    """
    runtime = session.runtime
    record, pending = await waiting_request(
        runtime.store,
        session.key,
        request.turn_id,
        request.input_id,
        digest=None,
        now=runtime.clock(),
    )
    # The hook is never asked about someone from another workspace, nor about two people.
    check_workspace(parked_workspace(record.pending), request.principal)
    by = answering_user(request.by, request.principal)
    escalated = await escalated_answerers(
        runtime.store, session.key, TimerKind.INPUT, request.turn_id, request.input_id
    )
    return await grant_widened(
        pending.answerers,
        escalated,
        by=by,
        principal=request.principal,
        digest=pending.digest,
        authorize_answer=authorize_answer or session.agent.authorize_answer,
    )
