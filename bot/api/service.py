"""What each API call does, in engine calls: the same ones the Slack surface makes, with the
token's principal where Slack has the signed clicker.

- A turn is `session.start(InboundEvent(source="api", user=<attested principal>))`, so the
  speaker is the token's user, the default answerer of what the turn asks, and the workspace
  (the token's team and enterprise) is saved with any park, where the engine checks answers.
- An answer is `grant_answer` / `grant_confirmation` (the agent's `authorize_answer`, for a
  policy) then `session.resume(..., digest=)` / `session.confirm(...)`, with `by` and
  `principal`: the engine decides who may answer, as for a click. A hook that raises is a 500
  and nothing is applied.
- Cancel is `session.cancel`, or `session.stop` for a parked turn or the whole session, with
  the token's principal: the engine decides who may stop what, as for Slack's Stop;
  reset is `session.reset()`; pending is `session.pending()`, the session's pending
  confirmations, and `runtime.answerable(principal)` for which of them this principal may
  answer.
- Standing grants are `standing_grants` / `revoke_grant` with the token's principal, and the
  agent's `authorize_answer` for policy `GRANTS_POLICY` (`bot.api.grants`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

from agent import (
    Agent,
    CancelReason,
    InboundEvent,
    InputRequested,
    Runtime,
    Speaker,
    StoreUnavailableError,
    TurnEvent,
    TurnRecord,
    TurnResult,
    TurnStatus,
)
from bot.api import answers, grants, keys
from bot.api.addressed import Addressed, hooked
from bot.api.auth import Caller, TokenTable
from bot.api.errors import ApiError, unauthorized
from bot.api.feed import Feed
from bot.api.schemas import (
    CancelBody,
    CancelOut,
    ConfirmationsOut,
    ConfirmBody,
    ConfirmOut,
    EventsOut,
    GrantOut,
    GrantsOut,
    PendingOut,
    ResetOut,
    ResumeBody,
    ResumeOut,
    TurnBody,
    TurnOut,
)
from bot.api.sse import frame, stream

log = logging.getLogger(__name__)
T = TypeVar("T")

SOURCE = "api"
RESTING = (
    TurnStatus.SUSPENDED,
    TurnStatus.COMPLETED,
    TurnStatus.FAILED,
    TurnStatus.CANCELLED,
)
ENDS_TURN = frozenset({"turn.completed", "turn.failed", "turn.cancelled"})


@dataclass(frozen=True, kw_only=True)
class ApiSettings:
    wait: float = 30.0
    heartbeat: float = 15.0
    poll: float = 1.0
    max_chars: int = 40_000


class ApiService:
    def __init__(
        self, *, runtime: Runtime, agent: Agent, tokens: TokenTable, settings: ApiSettings
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.tokens = tokens
        self.settings = settings
        self.streams = 0
        """Event streams open now (each holds one subscription to the hub)."""
        self._open = True
        self._closing = asyncio.Event()

    def close(self) -> None:
        """The server is stopping: open streams end at their next poll with a `closing` frame
        (new ones at once), and a POST waiting on its turn answers with the turn as it stands
        (a 202 to poll), so that none holds the process for its whole grace period."""
        self._open = False
        self._closing.set()

    def is_open(self) -> bool:
        return self._open

    # who and where ---------------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> Caller:
        if not authorization:
            raise unauthorized("a bearer token is required", invalid=False)
        caller = self.tokens.caller(authorization)
        if caller is None:
            raise unauthorized("the bearer token is not valid", invalid=True)
        return caller

    def address(self, caller: Caller, key: str) -> Addressed:
        if not keys.valid_key(key):
            raise ApiError(
                400,
                "a session key is 1-128 letters, digits or '._:-', starting with one of "
                "the first two",
            )
        session = self.runtime.session(self.agent, keys.store_key(caller.team, key))
        return Addressed(caller=caller, key=key, session=session)

    async def existing(self, caller: Caller, key: str) -> Addressed:
        """The session, if it has ever had a turn; 404 otherwise (and for another team's key,
        which is never reachable: it is another store key)."""
        where = self.address(caller, key)
        if await self.runtime.store.get_session(where.stored) is None:
            raise ApiError(404, "no such session")
        return where

    # turns -----------------------------------------------------------------------------------

    async def start(self, where: Addressed, body: TurnBody, idempotency: str | None) -> str:
        caller = where.caller
        if idempotency is not None and not keys.valid_turn_id(idempotency):
            raise ApiError(400, "Idempotency-Key must be 1-128 letters, digits or '._-'")
        if body.turn_id and idempotency and body.turn_id != idempotency:
            raise ApiError(422, "turn_id and the Idempotency-Key header name different turns")
        if body.speaker is not None and body.speaker != caller.user:
            raise ApiError(403, "a token speaks only as its own principal")
        if len(body.text) > self.settings.max_chars:
            raise ApiError(
                422,
                f"the text has {len(body.text)} characters; at most "
                f"{self.settings.max_chars} are read",
            )
        turn_id = body.turn_id or idempotency or uuid.uuid4().hex
        inbound = InboundEvent(
            source=SOURCE,
            text=body.text,
            user=Speaker(id=caller.user, attested=True),
            context={"team": caller.team, "enterprise": caller.enterprise, "session": where.key},
        )
        await where.session.start(inbound, turn_id=turn_id, replace=body.replace)
        record = await self.runtime.store.get_turn(where.stored, turn_id)
        if record is None or not _same_message(record, inbound):
            # Another message under this id (an earlier one, or one racing this): the id
            # names that turn, which this request must not be taken for.
            raise ApiError(409, "this turn id was already used for another message")
        return turn_id

    async def wait(self, where: Addressed, turn_id: str, seconds: float) -> TurnResult:
        """The turn once it ends or parks, or as it stands after `seconds` (or once the API
        closes, whichever is first)."""
        if seconds > 0 and self._open:
            ended = asyncio.ensure_future(where.session.result(turn_id))
            closing = asyncio.ensure_future(self._closing.wait())
            try:
                await asyncio.wait(
                    {ended, closing}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                closing.cancel()
                ended.cancel()
            if ended.done() and not ended.cancelled():
                return ended.result()
        return await self.turn(where, turn_id)

    async def turn(self, where: Addressed, turn_id: str) -> TurnResult:
        record = await self.runtime.store.get_turn(where.stored, turn_id)
        if record is None:
            raise ApiError(404, "no such turn on this session")
        return TurnResult.from_record(record)

    def turn_out(self, where: Addressed, result: TurnResult) -> TurnOut:
        data = result.to_json()
        return TurnOut.model_validate(
            {
                **data,
                "session": where.key,
                "turn_id": result.turn_id,
                "replayed": result.replayed,
                "poll": where.poll(result.turn_id),
                "note": result.note,
                "requests": [request.to_json() for request in result.requests],
            }
        )

    def feed(self, where: Addressed, after: int) -> Feed:
        return Feed(where.session, after=after)

    def turn_stream(self, where: Addressed, turn_id: str, feed: Feed) -> AsyncIterator[str]:
        """The turn's events as they happen (from the feed's cursor), then its result."""

        async def until(event: TurnEvent) -> bool:
            if event.turn_id != turn_id:
                return False
            if event.type in ENDS_TURN:
                return True
            if isinstance(event, InputRequested):
                # A park on several requests logs one event each: the stream ends at the last.
                waiting = await where.session.pending()
                return (
                    bool(waiting)
                    and waiting[-1].turn_id == turn_id
                    and (waiting[-1].id == event.request.id)
                )
            return False

        async def done() -> bool:
            record = await self.runtime.store.get_turn(where.stored, turn_id)
            return record is None or record.status in RESTING

        async def ending() -> str:
            out = self.turn_out(where, await self.turn(where, turn_id))
            return frame(out.model_dump(mode="json"), event="turn.result")

        return self._stream(
            where,
            feed,
            wanted=lambda event: event.turn_id == turn_id,
            until=until,
            done=done,
            ending=ending,
        )

    # events ----------------------------------------------------------------------------------

    async def events(self, where: Addressed, after: int, limit: int) -> EventsOut:
        found = (await where.session.events(after))[:limit]
        return EventsOut.model_validate(
            {
                "events": [event_json(event, where.key) for event in found],
                "last_seq": found[-1].seq if found else after,
            }
        )

    def event_stream(self, where: Addressed, after: int) -> AsyncIterator[str]:
        return self._stream(where, self.feed(where, after))

    async def _stream(self, where: Addressed, feed: Feed, **options: Any) -> AsyncIterator[str]:
        self.streams += 1
        try:
            frames = stream(
                feed,
                to_json=lambda event: event_json(event, where.key),
                heartbeat=self.settings.heartbeat,
                poll=self.settings.poll,
                open_=self.is_open,
                **options,
            )
            async for chunk in frames:
                yield chunk
        except StoreUnavailableError:
            log.warning("an event stream ended: the database is unavailable")
            yield frame({"error": "the database is unavailable; reconnect"}, event="error")
        finally:
            feed.close()
            self.streams -= 1

    # answers ---------------------------------------------------------------------------------

    async def resume(self, where: Addressed, body: ResumeBody) -> ResumeOut:
        return await answers.resume(where, body)

    async def confirm(
        self, where: Addressed, confirmation_id: str, body: ConfirmBody
    ) -> ConfirmOut:
        return await answers.confirm(where, confirmation_id, body)

    async def pending(self, where: Addressed) -> PendingOut:
        return await answers.pending(self.runtime, where)

    async def confirmations(self, where: Addressed, limit: int) -> ConfirmationsOut:
        return await answers.history(where, limit)

    # standing grants --------------------------------------------------------------------------

    async def grants(self, caller: Caller) -> GrantsOut:
        return await grants.listed(self.runtime, caller)

    async def revoke_grant(self, caller: Caller, grant_id: str) -> GrantOut:
        return await grants.revoke(self.runtime, self.agent, caller, grant_id)

    # control ---------------------------------------------------------------------------------

    async def cancel(self, where: Addressed, body: CancelBody) -> CancelOut:
        """One turn (`turn_id`), or every unfinished turn of the session. A parked turn ends
        as Slack's Stop ends it (`stop(principal=)`: a person cancelling ends a park, where a
        newer message never does); a queued or running one stops at its next checkpoint. Only
        what the token's principal may stop, by the engine's rule for every surface
        (`StopAuthorizationError`, a 403, and nothing stops). The body's `reason` is the
        caller's free text, recorded as given; without one, the engine's own reason
        (`CancelReason.CANCELLED` for one turn, `STOPPED` for a Stop)."""
        principal = where.caller.principal
        if body.turn_id is None:
            return CancelOut(session=where.key, cancelled=await _stopping(where, body))
        record = await self.runtime.store.get_turn(where.stored, body.turn_id)
        if record is None:
            raise ApiError(404, "no such turn on this session")
        if record.status.finished:
            raise ApiError(409, f"the turn has ended already ({record.status.value})")
        if record.status == TurnStatus.SUSPENDED:
            return CancelOut(session=where.key, cancelled=await _stopping(where, body))
        cancel = where.session.cancel(
            body.turn_id, body.reason or CancelReason.CANCELLED, principal=principal
        )
        if not await hooked(cancel):
            raise ApiError(409, "the turn has ended already")
        return CancelOut(session=where.key, cancelled=[body.turn_id])

    async def reset(self, where: Addressed) -> tuple[ResetOut, bool]:
        """The reset, and whether it was applied within the wait (else it is queued)."""
        try:
            async with asyncio.timeout(self.settings.wait):
                done = await where.session.reset()
        except TimeoutError:
            out = ResetOut(
                session=where.key, status="queued", archived_generation=None, generation=None
            )
            return out, False
        archived = done.generation - 1
        out = ResetOut(
            session=where.key,
            status="applied",
            archived_generation=archived,
            generation=done.generation,
        )
        return out, True


def _same_message(record: TurnRecord, inbound: InboundEvent) -> bool:
    stored = record.input.inbound
    return (
        stored is not None
        and stored.source == inbound.source
        and stored.text == inbound.text
        and stored.user is not None
        and inbound.user is not None
        and stored.user.id == inbound.user.id
    )


async def _stopping(where: Addressed, body: CancelBody) -> list[str]:
    """`session.stop` by the token's principal (who may stop what is the engine's to say)."""
    principal = where.caller.principal
    return await hooked(
        where.session.stop(principal=principal, reason=body.reason or CancelReason.STOPPED)
    )


def event_json(event: TurnEvent, key: str) -> dict[str, Any]:
    data: dict[str, Any] = event.model_dump(mode="json")
    data["session"] = key
    data["live"] = event.seq == 0
    return data
