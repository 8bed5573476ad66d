"""What a running tool can see: where it runs (session, turn, call), who asked, the store handle
and the cancellation signal. Parking, confirmations a capability asks for, and durable effects are
reached through here as well, so a tool never needs the engine itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent._effects import Effect, EffectCoordinator, EffectFn, ReconcileFn
from agent._errors import RequestExpiredError, ToolError
from agent._facts import FactsView
from agent._hitl_answer_notes import check_expiry, expired_text, note_step_id, reason_text
from agent._hitl_answerers import AnswererInput, QuorumAnswerer
from agent._hitl_capability_confirmation import Consent, NeedsConfirmation
from agent._hitl_checks import (
    answer_step_id,
    answerers_of,
    default_answerers,
    request_digest,
)
from agent._hitl_quorum import quorum_text
from agent._hitl_reminders import NO_REMINDERS, EscalationInput, Reminders, overridden
from agent._hitl_requests import InputRequest
from agent._messages import JsonValue
from agent._signals import CancellationSignal, ParkTurn
from agent._turn_input import InboundEvent, Speaker, TurnInput
from agent.seams import StoreHandle


@dataclass(kw_only=True)
class ToolContext:
    store: StoreHandle
    session: str
    turn_id: str
    call_id: str
    tool_name: str
    user: Speaker | None
    inbound: InboundEvent | None
    cancellation: CancellationSignal
    local: bool
    answers: Mapping[str, JsonValue] = field(default_factory=dict)
    """The turn's memoized steps; answers to parked requests live here under `input:…`."""
    facts: FactsView | None = None
    effects: EffectCoordinator | None = None
    turn_input: TurnInput | None = None
    """What opened the turn; decides who answers by default
    (`agent._hitl_checks.default_answerers`)."""
    consent: Consent | None = None
    """The call's standing with a person's answer (`agent._hitl_capability_confirmation`), set
    by the engine."""
    expires_after: float | None = None
    """How long `request_input` waits when the call names no limit: the tool's declared
    `expires_after`, else the agent's `approval_expires_after`; None: forever."""
    reminders: Reminders = NO_REMINDERS
    """The tool's declared reminder and escalation (`@tool(remind_after=, escalate_after=)`),
    for `request_input` calls that name none."""
    shared_batch: bool = False
    """Another call of the same model reply may ask a person too: the ids of this call's
    requests are scoped to it (`<id>@<call id>`), so siblings asking with the same id ask, and
    are answered, apart."""
    notes: list[str] = field(default_factory=list)
    """What the engine adds to this call's result for the model (a reason a person gave with
    an answer the call read, a request of the call's that expired). Filled by `request_input`."""

    async def run_effect(
        self,
        key: str,
        fn: EffectFn,
        payload: Any = None,
        *,
        reconcile: ReconcileFn | None = None,
    ) -> Effect:
        """Run a keyed external write with a durable receipt (see `agent._effects`).

        `fn(authority)` should send `authority.idempotency_key` to the provider. The same key and
        payload return the stored result without calling `fn`; a different payload under the key
        raises `EffectConflictError`; an outcome nobody can know raises `EffectUncertainError`.
        `reconcile(authority)`, if given, asks the provider what became of an uncertain write.
        """
        if self.effects is None:
            raise ToolError(
                "run_effect is for async (remote) tools; a local tool's writes go through the "
                "step's transaction instead"
            )
        return await self.effects.run(key, fn, payload, reconcile=reconcile)

    def needs_confirmation(self, *, prompt: str, details: Mapping[str, Any]) -> NeedsConfirmation:
        """Ask a person to approve `details` (a JSON object shown with `prompt`); return it.

        Only for `confirmation="capability"` tools: `return ctx.needs_confirmation(...)` ends
        the call, the engine records the interaction (answerers as for any confirmation) and the
        model reads that it is pending. If the person approves, this call runs again, from the
        top and with the same arguments, in the turn that acts on the answer; there
        `ctx.confirmed(details)` tells whether these are still the details approved.
        """
        return self._consent_or_refuse("needs_confirmation").ask(prompt, details)

    def confirmed(self, details: Mapping[str, Any]) -> bool:
        """True only when this call is the one a person approved and `details` are, as JSON,
        exactly the details they were shown; then, and only then, `run_effect` may write.

        False otherwise, e.g. before anybody was asked, or after the details changed (the price
        moved): the tool then asks again with `needs_confirmation`. An approval covers what the
        person saw, not whatever the tool finds on its second run.
        """
        return self._consent_or_refuse("confirmed").confirmed(details)

    def _consent_or_refuse(self, what: str) -> Consent:
        if self.consent is None:
            raise ToolError(f"{what}: only a confirmation='capability' tool run by the engine")
        return self.consent

    @property
    def cancelled(self) -> bool:
        """True once the turn was asked to stop; a long remote tool may check and return early."""
        return self.cancellation.cancelled

    async def request_input(
        self,
        *,
        id: str,
        prompt: str,
        schema: Mapping[str, Any] | None = None,
        answerers: AnswererInput | None = None,
        expires_after: float | None = None,
        remind_after: float | None = None,
        escalate_after: EscalationInput = None,
    ) -> JsonValue:
        """Ask a person and wait, for days if need be.

        The first call finds no answer and parks the turn: nothing is held in memory. When the
        answer arrives the turn replays and this tool runs again from the top, so this call
        returns the answer; code before it runs twice, so put side effects after it. `id` keys the
        answer within this turn only: a later turn asking with the same id parks again.
        `answerers` is a `UserAnswerer` / `PolicyAnswerer`, or the same as a dict
        (`{"user": id}`, `{"policy": p, "scope": s}`); None asks the turn's default answerers.

        `expires_after` (seconds) bounds the wait with a durable timer; None takes the tool's
        or the agent's default (`@tool(expires_after=)`, `Agent(approval_expires_after=)`),
        `math.inf` waits forever whatever they say. When it fires, this call raises
        `RequestExpiredError`, whose text (it says the request expired) is the call's error
        result unless the tool catches it; the model is told either way. If the person gave a
        reason with their answer, the engine adds it to the call's result for the model
        (`answer_reason` reads it here). `remind_after` and `escalate_after=(seconds,
        answerers)` remind whoever may answer, and widen who may, while nobody has; None takes
        the tool's (`agent._hitl_reminders`).
        """
        if self.local:
            raise ToolError(
                "request_input: only an async (remote) tool can park; a local (def) tool runs "
                "inside the step's transaction, which cannot stay open while a person answers"
            )
        id = self.request_id(id)
        step = answer_step_id(self.turn_id, id)
        if step in self.answers:
            note = self._note(id)
            if note is not None and note.get("outcome") == "expired":
                text = expired_text(id, note)
                self.notes.append(f"{text[0].upper()}{text[1:]}.")
                raise RequestExpiredError(text, input_id=id, note=self.notes[-1])
            if note is not None and "approved_by" in note:
                self.notes.append(quorum_text(id, note))
            elif note is not None and note.get("reason"):
                self.notes.append(reason_text(id, note))
            return self.answers[step]
        try:
            lifetime = check_expiry(
                self.expires_after if expires_after is None else expires_after,
                what="request_input",
            )
            reminders = overridden(
                self.reminders, remind_after, escalate_after, what="request_input"
            )
        except ValueError as err:
            raise ToolError(str(err)) from None
        chosen = (
            answerers_of(answerers)
            if answerers is not None
            else default_answerers(
                self.turn_input or (TurnInput.of(self.inbound) if self.inbound else None),
                what="ask for input",
            )
        )
        schema_json = dict(schema) if schema is not None else None
        if isinstance(chosen, QuorumAnswerer) and schema_json not in (None, {"type": "boolean"}):
            raise ToolError(
                "request_input: a request that needs several approvals (Quorum) is a yes or a "
                "no; ask it without a schema (or with {'type': 'boolean'})"
            )
        raise ParkTurn(
            InputRequest(
                id=id,
                prompt=prompt,
                schema=schema_json,
                answerers=chosen,
                turn_id=self.turn_id,
                call_id=self.call_id,
                tool=self.tool_name,
                digest=request_digest(self.turn_id, id, prompt, schema_json, chosen),
            ),
            expires_after=lifetime,
            reminders=reminders,
        )

    def answer_reason(self, id: str) -> str | None:
        """The reason the person gave with their answer to request `id` of this turn, if any
        (the engine adds it to the call's result for the model anyway)."""
        note = self._note(self.request_id(id))
        reason = note.get("reason") if note is not None else None
        return reason if isinstance(reason, str) else None

    def request_id(self, id: str) -> str:
        """The id a request asked with `id` gets: `id` itself, unless another call of the same
        model reply may ask too (`shared_batch`: three refund calls may each ask "approve"):
        then `<id>@<call id>`, so an answer binds to one call and never reaches a sibling."""
        return f"{id}@{self.call_id}" if self.shared_batch else id

    def _note(self, id: str) -> Mapping[str, JsonValue] | None:
        note = self.answers.get(note_step_id(self.turn_id, id))
        return note if isinstance(note, Mapping) else None

    def details(self) -> dict[str, str]:
        return {"session": self.session, "turn_id": self.turn_id, "call_id": self.call_id}
