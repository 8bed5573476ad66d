"""Errors raised by the engine, drawn as a tree so a host can catch at the right depth.

    AgentError
    ├── AssemblyError            an agent definition that cannot run (bad tool, bad policy)
    ├── ModelError               the model seam failed; the step did not commit
    │   └── AbnormalStopError    an abnormal stop with an empty reply, or with tool calls
    ├── StoreError               the store seam failed
    │   ├── LeaseLostError       this worker no longer holds the session's lease (fence failed)
    │   ├── SchemaMismatchError  the database schema is not the one this code knows
    │   ├── StepConflictError    a step or message with that id already exists
    │   └── StoreUnavailableError the database cannot be reached (down, connection lost, locked)
    ├── TurnError                a turn-level refusal by the session API
    │   ├── TurnNotFoundError
    │   ├── TurnInterruptedError `turn()` cannot finish: the turn parked (`.result` says where)
    │   ├── SessionSuspendedError another turn is parked on this session
    │   └── StopAuthorizationError the person may not stop (or cancel) these turns (HTTP 403)
    ├── ResumeError
    │   ├── ResumeAuthorizationError  the resumer may not answer (HTTP 403)
    │   ├── ResumeConflictError       wrong turn, wrong input, not pending, already answered (409)
    │   └── ResumeValidationError     the answer does not fit the request's schema (422)
    ├── EffectError
    │   ├── EffectConflictError       same key, different payload
    │   ├── EffectUncertainError      the outcome of a write is unknown; a person must resolve it
    │   └── EffectNotAppliedError     raised by effect code that can prove nothing was written
    └── ToolError                a tool failed; the model reads it
        ├── UnknownToolError     the model called a tool this turn does not offer
        ├── RequestExpiredError  `ctx.request_input`: nobody answered before the request expired
        └── FatalToolError       a mistake the model cannot fix: fails the turn

Control-flow signals (parking a turn, cancelling it) are not errors and do not derive from
`Exception`, so a tool's `except Exception` cannot swallow them: see `agent._signals`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent._turn_result import TurnResult


class AgentError(Exception):
    """Root of every error the engine raises on purpose."""


class AssemblyError(AgentError):
    """The agent definition cannot run; raised when it is assembled, never mid-turn."""


class ModelError(AgentError):
    """The model call failed; nothing from it was committed."""


class AbnormalStopError(ModelError):
    """A stop like max_tokens or refusal with an empty reply (committing it would be silence) or
    with tool calls in it (their input may be cut short, so running them could do harm)."""


class StoreError(AgentError):
    """The store could not do what the engine asked."""


class LeaseLostError(StoreError):
    """The session lease moved to another worker; this worker's commit was refused."""


class SchemaMismatchError(StoreError):
    """The database was migrated by different code; the message names the upgrade command."""


class StepConflictError(StoreError):
    """A row with this step, message or turn identity already exists."""


class StoreUnavailableError(StoreError):
    """The database could not be reached, or the connection dropped mid-transaction: nothing of
    that transaction is known to have committed, and trying again once it is back is right.

    The message is one line naming the database (its password hidden) and the driver's reason;
    it never carries the SQL or its parameters.
    """


class TurnError(AgentError):
    """A refusal from the session API."""


class TurnNotFoundError(TurnError):
    """No turn with that id on this session."""


class TurnInterruptedError(TurnError):
    """`turn()` is non-interactive: it rejects when the turn does not complete.

    `result` is the turn as it stands, so a caller that let `turn()` choose the id still learns
    which turn to resume (`result.turn_id`) and what it asks (`result.request`).
    """

    def __init__(self, message: str, *, result: TurnResult) -> None:
        super().__init__(message)
        self.result = result


class SessionSuspendedError(TurnError):
    """A turn is parked waiting for a person; a different turn cannot start until it is answered."""


class StopAuthorizationError(TurnError):
    """A person asked to stop turns that are not theirs to stop; nothing was stopped.

    Stopping a parked turn is a Deny by another name, so it is for whoever may answer its
    request (and the person who asked); a running one is for the person who asked, or whom the
    agent's policy admits (`authorize_answer` asked about policy `"stop"`)."""

    http_status = 403


class ResumeError(AgentError):
    """A resume or confirmation answer was refused; the store is unchanged.

    `http_status` is what an HTTP surface should answer with.
    """

    http_status = 400


class ResumeAuthorizationError(ResumeError):
    """The resumer is not an allowed answerer."""

    http_status = 403


class ResumeConflictError(ResumeError):
    """The answer does not match what is pending."""

    http_status = 409


class ResumeValidationError(ResumeError):
    """The answer does not fit the JSON schema the tool asked with; the turn stays parked."""

    http_status = 422


class GrantNotFoundError(ResumeError):
    """No standing grant with that id in this person's workspace (one in another workspace is
    not named to them either)."""

    http_status = 404


class EffectError(AgentError):
    """A durable effect could not be coordinated."""


class EffectConflictError(EffectError):
    """The effect key was used before with a different payload."""


class EffectUncertainError(EffectError):
    """The write may or may not have happened; no code path retries it blindly."""


class EffectNotAppliedError(EffectError):
    """Raised by effect code that knows the provider applied nothing, which permits a retry."""


class ToolError(AgentError):
    """A tool failed in a way the model should read."""


class FatalToolError(ToolError):
    """A failure the model cannot fix (deployment mistake, broken invariant): fails the turn."""


class RequestExpiredError(ToolError):
    """Raised by `ctx.request_input` when the turn resumed because the request expired: nobody
    answered in time. A tool may catch it (and, say, cancel what it prepared); if it does not,
    the call's error result, which says the request expired, is what the model reads."""

    def __init__(self, message: str, *, input_id: str = "", note: str | None = None) -> None:
        super().__init__(message)
        self.input_id = input_id
        self.note = note
        """The note the engine adds for the model if the tool catches this (if it does not,
        the error result says the same, so the note is left out)."""


class UnknownToolError(ToolError):
    """The model called a tool this turn does not offer (never listed, or denied for the source)."""
