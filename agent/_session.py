"""`AgentSession`: the API a host uses for one conversation (a Slack thread, say)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from agent import _effects as effects
from agent._agent_def import Agent
from agent._errors import (
    AgentError,
    ToolError,
    TurnInterruptedError,
    TurnNotFoundError,
)
from agent._events import InputResolved, TurnEvent
from agent._hitl_answerers import AnswererInput
from agent._hitl_checks import (
    WORKSPACE_KEYS,
    Grant,
    Principal,
    answerers_of,
    answering_user,
)
from agent._hitl_confirm import answer_confirmation
from agent._hitl_grants import AllowAgain
from agent._hitl_inbox import request_tally
from agent._hitl_quorum import Tally
from agent._hitl_requests import InputRequest, parked_requests
from agent._hitl_resume import answer_input
from agent._messages import JsonData, JsonValue, Message
from agent._observe import observe_replayed
from agent._session_host import SessionRuntime
from agent._sinks import Observer, Unsubscribe
from agent._stop_rights import check_may_stop, stoppable
from agent._tool_batch import in_call_order
from agent._turn_input import InboundEvent, Trigger, TurnInput
from agent._turn_result import TurnResult
from agent.seams import (
    CancelReason,
    ConfirmationRecord,
    ConfirmationStatus,
    ReceiptRecord,
    ReceiptStatus,
    SessionStatus,
    SessionStore,
    StoreHandle,
    TurnRecord,
    TurnStatus,
)


@dataclass(frozen=True, kw_only=True)
class ResetResult:
    previous_session: str
    """`<key>#g<N>`: where the retired generation's rows can be found."""
    generation: int


class AgentSession:
    def __init__(self, runtime: SessionRuntime, agent: Agent, key: str) -> None:
        self.runtime = runtime
        self.agent = agent
        self.key = key

    @property
    def _store(self) -> SessionStore:
        return self.runtime.store

    # turns --------------------------------------------------------------------------------

    async def start(
        self,
        input: str | TurnInput | InboundEvent,
        *,
        turn_id: str | None = None,
        replace: bool = False,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> str:
        """Queue the turn durably (committed before this returns) and hand it to a worker.

        Re-delivering a known turn id queues nothing new: a finished turn stays finished (and
        `result()` in this process returns its stored result with `replayed=True`), an
        unfinished one is picked up where its checkpoints left it. `replace=True` first cancels
        every queued or running turn of the session (reason `replaced`), never a parked one.
        `alongside` is a write of the application's committed in the same transaction (see
        `SessionStore.enqueue_turn`).
        """
        tid = turn_id or uuid.uuid4().hex
        record, created = await self._store.enqueue_turn(
            self.key,
            tid,
            TurnInput.of(input),
            cancel_unfinished=CancelReason.REPLACED if replace else None,
            alongside=alongside,
        )
        if replace and created:
            self.runtime.signal_cancel(self.key, CancelReason.REPLACED, keep=tid)
        if record.status.finished:
            self.runtime.note_replay(self.key, tid)
        else:
            self.runtime.kick(self.key)
        return tid

    async def receive(
        self,
        seed: str,
        *,
        by: str,
        kind: str = "proactive",
        answerers: AnswererInput | None = None,
        workspace: Mapping[str, str] | None = None,
        turn_id: str | None = None,
    ) -> str:
        """Queue a proactive turn, one nobody sent (a schedule, an alert), like `start()`.

        The seed is stored as a `trigger` message attributed to `by` (e.g. `cron:daily`), so
        the transcript records that no person wrote it. Nobody spoke, so nobody is the speaker
        who may answer: what the turn asks is answered by `answerers` (an `Answerer`, or its
        dict `{"user": id}` / `{"policy": p, "scope": s}`), and without them the turn cannot
        park. `workspace`
        (`team`, `enterprise`) is where the turn posts and where answers must come from. A
        caller-chosen `turn_id` makes the trigger idempotent: a clock that fires a slot twice
        gets one turn. The host shows the turn as it shows any reply, from the durable log.

        Raises `AgentError` for malformed answerers and `SessionSuspendedError` while the
        session waits on an answer; nothing is queued then.
        """
        try:
            chosen = answerers_of(answerers)
        except ToolError as err:
            raise AgentError(f"receive: {err}; turn not started") from None
        context = {k: str(v) for k, v in (workspace or {}).items() if k in WORKSPACE_KEYS and v}
        trigger = Trigger(
            kind=kind,
            by=by,
            answerers=chosen,
            context=context,
        )
        return await self.start(TurnInput(text=seed, trigger=trigger), turn_id=turn_id)

    async def result(self, turn_id: str) -> TurnResult:
        """Wait until the turn completes, fails, is cancelled or parks (bound it with
        `asyncio.timeout` if needed)."""
        return await self.runtime.wait_turn(self.key, turn_id)

    async def turn(
        self,
        input: str | TurnInput | InboundEvent,
        *,
        turn_id: str | None = None,
        replace: bool = False,
    ) -> TurnResult:
        """Start and await; non-interactive, so it rejects a turn that parks, with the parked
        result on the error (its `turn_id` and `request` are what `resume` needs: the caller
        may not have chosen the id). A turn that already finished returns its stored result
        with `replayed=True` and runs nothing: the same path as `start()` then `result()`."""
        tid = await self.start(input, turn_id=turn_id, replace=replace)
        result = await self.result(tid)
        if result.status == TurnStatus.SUSPENDED:
            raise TurnInterruptedError(
                f"turn {tid!r} parked waiting for input; answer it with resume(), or use "
                "start()/result() to handle parking",
                result=result,
            )
        return result

    async def cancel(
        self,
        turn_id: str,
        reason: CancelReason | str = CancelReason.CANCELLED,
        *,
        principal: Principal | None = None,
    ) -> bool:
        """Durably ask the turn to stop at its next checkpoint; False if it is finished or
        parked (a park is left for `stop`, reset or an answer). `reason`: a `CancelReason`, or
        the caller's own words (free text, stored and shown as given). `principal`: the person
        asking, refused with `StopAuthorizationError` unless they may stop it
        (`agent._stop_rights`); None is host code, which may stop anything."""
        if principal is not None:
            await check_may_stop(self, principal, answering_user(None, principal), only=turn_id)
        record = await self._store.request_cancel(self.key, turn_id, reason)
        if record is None:
            return False
        self.runtime.signal_cancel(self.key, reason, only=turn_id)
        self.runtime.kick(self.key)
        return True

    async def stop(
        self,
        *,
        by: str | None = None,
        principal: Principal | None = None,
        reason: CancelReason | str = CancelReason.STOPPED,
    ) -> list[str]:
        """A person's Stop: durably end every unfinished turn of the session, parked or not;
        returns the ids of the turns this call stopped.

        One transaction, committed before this returns: a running turn stops at its next
        checkpoint as with `cancel` (what committed stays; calls of the batch that never ran
        get `{"cancelled": true}`), a queued one never starts, and, unlike `cancel` and
        `replace`, a parked one ends too: its call gets the same synthetic result, so the
        transcript stays valid, the session leaves `suspended`, `input.resolved` (outcome
        `cancelled`, `by`) is logged, a later answer to it is a `ResumeConflictError`, and the
        model is not called again for that turn. The turns end `cancelled` with `reason` (a
        `CancelReason`, or the caller's own words as free text), and `turn.cancelled` says
        `by` whom. If this process dies before it ends them, whichever worker picks the
        session up does.

        Who may stop: with `principal` (the person as the surface verified them, `by` their
        id as for `resume`), only the turns theirs to stop end (`agent._stop_rights`: a parked
        turn is for whoever may answer it and the person who asked; a running or queued one
        for the person who asked, or whom the agent's `authorize_answer` admits for policy
        `"stop"`); another person's turn queued behind theirs goes on, and a person with none
        is refused with `StopAuthorizationError`, nothing stopped. Without a principal the
        caller is host code, which may stop anything.

        Pending confirmations are left as they are: the turn that proposed them has already
        finished, and an answer to one queues a new turn (deny it to refuse the write).
        """
        if principal is not None:
            by = answering_user(by, principal)
            theirs, refused = await stoppable(self, principal, by)
            if refused is not None and not theirs:
                raise refused
            if refused is not None:
                # Some turns are another person's (a message queued behind theirs): only
                # theirs end, each as `cancel` ends it (no park among them: a parked session
                # has no other unfinished turn).
                return [t for t in theirs if await self.cancel(t, reason)]

        def ended_park(pending: JsonValue) -> list[TurnEvent]:
            return [
                InputResolved(
                    session=self.key,
                    turn_id=request.turn_id,
                    input_id=request.id,
                    outcome="cancelled",
                    by=by,
                )
                for request in parked_requests(pending)
            ]

        stopped, events = await self._store.stop_session(
            self.key, reason=reason, by=by, now=self.runtime.clock(), ended_park=ended_park
        )
        for event in events:
            await self.runtime.hub.emit(event)
        for record in stopped:
            self.runtime.signal_cancel(self.key, reason, only=record.turn_id)
        if stopped:
            self.runtime.kick(self.key)
        return [record.turn_id for record in stopped]

    async def reset(self) -> ResetResult:
        """Retire the session's history without changing its address, in order on the turn
        chain: unfinished turns are cancelled (`reset`), then messages, steps, facts and events
        are archived under the current generation and the live tables cleared."""
        reset_id = f"reset:{uuid.uuid4().hex}"
        await self._store.enqueue_reset(self.key, reset_id)
        self.runtime.signal_cancel(self.key, CancelReason.RESET)
        self.runtime.kick(self.key)
        await self.runtime.wait_turn(self.key, reset_id)
        record = await self._store.get_turn(self.key, reset_id)
        data = record.result if record is not None and isinstance(record.result, dict) else {}
        archived = int(data.get("archived_generation", 0))
        return ResetResult(previous_session=f"{self.key}#g{archived}", generation=archived + 1)

    # human in the loop --------------------------------------------------------------------

    async def pending(self) -> list[InputRequest]:
        """The requests the session's parked turn waits on, in call order (the calls of one
        batch that each asked wait together; each is answered on its own); `[]` if none."""
        record = await self._store.get_session(self.key)
        if record is None or record.status != SessionStatus.SUSPENDED or not record.pending:
            return []
        return parked_requests(record.pending)

    async def resume(
        self,
        turn_id: str,
        input_id: str,
        value: JsonData,
        *,
        by: str | None = None,
        principal: Principal | None = None,
        granted: Grant | None = None,
        digest: str | None = None,
        reason: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> Tally | None:
        """Answer one request the turn is parked on; the turn replays once none still waits
        (the calls of one batch that each asked park together, and each is answered on its own,
        in any order, by its own answerers: an answer binds to `input_id` alone).

        Who answers is what the host verified (a signed Slack click): `by`, the person's id,
        and/or `principal`, the person with their workspace. No principal means host code
        answering, which is trusted with `by` as given. A principal is always used:
        - its `user` and `by` must be the same person (`ResumeAuthorizationError` otherwise);
          given without `by`, its `user` is `by`, since it is the same verified fact;
        - its `team` / `enterprise` must be the request's (a user id names one person only
          inside its workspace). A request saved without a workspace (a turn started by host
          code, with no inbound message or trigger context) has nothing to compare them with,
          so there only the person is checked: principal against `by`, then against the
          answerers.

        `reason`: what the person says with the answer (trimmed, scrubbed of secrets, at most
        `MAX_REASON_CHARS`), stored with it and added by the engine to the parked call's result
        for the model, whatever the tool returns (the tool reads it with `ctx.answer_reason`).

        Refusals change nothing: `ResumeConflictError` (wrong turn or input, not parked, already
        answered or expired, or the request changed since `digest`), `ResumeAuthorizationError`,
        `ResumeValidationError`. `alongside`: the host's write committed with the answer (see
        `start`), e.g. waking whatever shows the turn, so the resumed turn can never be left
        unseen.

        A request whose answerers are a `Quorum` takes votes: `value` is True (approve) or False
        (deny), and `by` (or the principal's user) is the voter, counted once. The vote is
        stored; the request is answered (with True or False, and who approved told to the
        model) only when the votes decide it (`agent._hitl_quorum`). Returns the `Tally` after
        this vote for such a request (`counted` False: the voter had voted already, their first
        vote stands), None for any other.
        """
        return await answer_input(
            self,
            turn_id,
            input_id,
            value,
            by=by,
            principal=principal,
            granted=granted,
            digest=digest,
            reason=reason,
            alongside=alongside,
        )

    async def confirm(
        self,
        confirmation_id: str,
        accepted: bool,
        *,
        by: str | None = None,
        principal: Principal | None = None,
        granted: Grant | None = None,
        reason: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
        turn_id: str | None = None,
        digest: str | None = None,
        allow_again: AllowAgain | None = None,
        edits: Mapping[str, JsonData] | None = None,
    ) -> str:
        """Answer a proposed write; returns the id of the turn that acts on the answer.

        Accepted: that turn runs the stored call with exactly its stored arguments, then lets
        the model report; a `confirmation="capability"` tool runs again from the top and writes
        only if `ctx.confirmed` finds the details approved here. Denied: the refusal is recorded,
        the tool does not run, and the model is told. `by` and `principal` are checked as for
        `resume` (the workspace is the proposing turn's), and the person they name is the one
        recorded as having answered. `reason` (cleaned as for `resume`) is stored with the
        answer and quoted in what the model of the acting turn reads. A proposal past its
        `expires_at` is no longer pending. `alongside`: as for `resume`.

        `turn_id` and `digest` bind the answer to what was shown, as `resume(digest=)` does: the
        turn that proposed the write and `confirmation_digest` of the proposal; an answer that
        names another turn or carries another digest is a `ResumeConflictError` and nothing is
        written. Leaving them out names the proposal by its id alone (`agent._hitl_confirm`).

        A proposal whose answerers are a `Quorum` takes votes, as `resume` does: the vote is
        stored, and the acting turn (whose id is returned either way) is queued only once the
        votes decide; `tally` tells where it stands.

        `allow_again` (with an approval, for a tool declared `grantable_for`): also allow the
        tool's later calls for the same speaker in this thread or channel, for that long, as a
        standing grant (`agent._hitl_grants`); refused (422, nothing applied) where it cannot be.

        `edits` (with an approval, for a tool declared `editable`): `{argument: value}` for the
        arguments the person changed; the call runs with them, and the model reads what changed
        (`agent._hitl_edits`). Edits that break the tool's schema, or touch an argument that is
        not editable, are an `EditRejected` (422, each field's error) and nothing is applied.
        """
        return await answer_confirmation(
            self,
            confirmation_id,
            accepted,
            by=by,
            principal=principal,
            granted=granted,
            reason=reason,
            alongside=alongside,
            turn_id=turn_id,
            digest=digest,
            allow_again=allow_again,
            edits=edits,
        )

    async def tally(
        self, kind: Literal["input", "confirm"], turn_id: str, request_id: str
    ) -> Tally | None:
        """The votes so far on a request that needs several approvals (`Quorum`): a park's
        input (`kind="input"`, while it waits) or a proposed write (`"confirm"`, `request_id`
        its confirmation id, also once answered); None for any other request."""
        return await request_tally(self._store, self.key, kind, turn_id, request_id)

    # reading ------------------------------------------------------------------------------

    async def observe(
        self, callback: Observer, *, turn_id: str | None = None, replay: bool = False
    ) -> Unsubscribe:
        """Subscribe to live events; with `replay`, the durable log is delivered first.

        Live events that raced with the replay are de-duplicated by their `seq`.
        """
        if not replay:
            return self.runtime.hub.subscribe(callback, session=self.key, turn_id=turn_id)
        return await observe_replayed(self.runtime.hub, self._store, self.key, callback, turn_id)

    async def events(self, after_seq: int = 0) -> list[TurnEvent]:
        result: list[TurnEvent] = await self._store.read_events(self.key, after_seq)
        return result

    async def transcript(self) -> list[Message]:
        """The session's messages, each batch's tool results in the order of its calls (they
        are stored in the order they finished)."""
        return in_call_order(await self._store.load_transcript(self.key))

    async def turns(self) -> list[TurnRecord]:
        """Every turn of the session's live generation, in queue order (a reset retires the
        turns before it; one still queued is listed, with kind `reset`)."""
        result: list[TurnRecord] = await self._store.list_turns(self.key)
        return result

    async def steps(self, turn_id: str) -> dict[str, JsonData]:
        """The turn's memoized steps by step id, in commit order: `model:<n>` and
        `tool:<n>:<call id>` (`n`: the transcript index of the assistant message), `park:` and
        `input:<turn id>:<input id>` for a request and its answer (with
        `answer:<turn id>:<input id>` beside it when the answer came with a reason, or the
        request expired), `confirm:<n>` for a proposed write. Empty once a reset archived them,
        or once a prune removed them (`SessionStore.prune_history`); `TurnNotFoundError` for a
        turn the session never had."""
        if await self._store.get_turn(self.key, turn_id) is None:
            raise TurnNotFoundError(f"no turn {turn_id!r} on session {self.key!r}")
        result: dict[str, JsonData] = await self._store.load_steps(self.key, turn_id)
        return result

    async def confirmations(
        self, status: ConfirmationStatus | None = None
    ) -> list[ConfirmationRecord]:
        """The session's proposed writes, oldest first; `status=ConfirmationStatus.PENDING` for
        those still waiting on an answer (what `confirm` takes)."""
        wanted = ConfirmationStatus(status) if status is not None else None
        result: list[ConfirmationRecord] = await self._store.list_confirmations(self.key, wanted)
        return result

    async def receipts(self, status: ReceiptStatus | None = None) -> list[ReceiptRecord]:
        """The receipts of the session's durable effects, oldest first (keys are
        `<tool>:<key>`); `status=ReceiptStatus.UNCERTAIN` for those awaiting an operator."""
        wanted = ReceiptStatus(status) if status is not None else None
        result: list[ReceiptRecord] = await self._store.list_receipts(
            session=self.key, status=wanted
        )
        return result

    async def resolve_receipt(
        self,
        key: str,
        *,
        status: ReceiptStatus | Literal["completed", "failed"],
        value: JsonData = None,
    ) -> ReceiptRecord:
        """`agent.resolve_receipt` on this session: settle an `uncertain` receipt as `completed`
        with the value observed at the provider, or `failed` (not applied; no value)."""
        return await effects.resolve_receipt(self._store, self.key, key, status=status, value=value)
