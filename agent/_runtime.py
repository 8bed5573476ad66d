"""The runtime: who runs which session's turns, and when.

One worker at a time holds a session's lease and drains its turn queue in order; turns of
different sessions run concurrently. The lease's epoch fences every commit, so a worker that was
paused past its lease (a "zombie") cannot commit over its successor. A sweeper picks up sessions
whose lease expired with work left, so a turn whose worker died resumes without re-delivery.

A worker whose database goes away mid-turn is not dead: it keeps the drain, waits for the
database (backing off), and goes on at once when it is back, if the lease is still its own.
A step the store refuses as a duplicate is tried again on a fresh read, or, when the same clash
comes back, fails its turn so the drain goes on (`agent._step_conflicts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType

from opentelemetry.trace import TracerProvider

from agent import _hitl_expiry, _hitl_inbox
from agent._agent_def import Agent
from agent._cancel_news import CancelNews
from agent._errors import LeaseLostError, StepConflictError, StoreUnavailableError
from agent._hitl_checks import Principal
from agent._hitl_inbox import PendingApproval, RecentTurn
from agent._redaction import Redactor
from agent._session import AgentSession
from agent._sinks import EventHub
from agent._step_conflicts import StepConflicts
from agent._store_outage import OutageLog, renew_when_reachable
from agent._telemetry_seam import TurnMeter
from agent._tracing import Tracing
from agent._transcript_window import recent_end
from agent._turn_env import DEFAULT_TOOL_CONCURRENCY
from agent._turn_loop import TurnEnv, TurnRunner
from agent._turn_metering import Telemetry
from agent._turn_result import TurnResult
from agent._turn_waits import TurnWaits
from agent.seams import (
    Dispatcher,
    EventSink,
    Lease,
    Model,
    SessionStore,
    TurnKind,
    model_compacts,
)

log = logging.getLogger(__name__)

REMEMBERED_REPLAYS = 1024
"""How many re-delivered committed turn ids a runtime remembers for `result()` to report."""


DEFAULT_CONTEXT_MESSAGES = 400
"""A bound on messages, not tokens, for a model that does not compact (one that does is shown
the thread since its newest compaction): the adapter still trims a request that would not fit
its context window (the Anthropic adapter's `max_context_tokens`)."""


class Runtime:
    def __init__(
        self,
        store: SessionStore,
        model: Model,
        *,
        agent: Agent | None = None,
        sink: EventSink | None = None,
        owner: str | None = None,
        lease_ttl: float = 30.0,
        heartbeat_interval: float | None = None,
        recovery_interval: float = 2.0,
        poll_interval: float = 0.2,
        clock: Callable[[], float] = time.time,
        run_turns: bool = True,
        max_concurrent_sessions: int = 32,
        secrets: Iterable[str] = (),
        context_messages: int = DEFAULT_CONTEXT_MESSAGES,
        tool_concurrency: int = DEFAULT_TOOL_CONCURRENCY,
        meter: TurnMeter | None = None,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        """`run_turns=False` makes a runtime that only queues (a web process leaving turns to
        workers, which find them through their recovery sweep). `max_concurrent_sessions` caps
        the sessions whose turns run at once in this process, so a burst waits its turn instead
        of exhausting the database pool. `secrets`: values (API keys, tokens, passwords) scrubbed
        from every tool error and failure before it is stored or shown to the model; well-known
        token shapes are scrubbed without being listed. `context_messages`: how much of a
        session's history the model is shown, at least that many of the latest messages, from
        the opening of the turn the earliest belongs to; also all a worker reads to resume a
        session, so resuming costs the same after ten messages or ten thousand. Not under a
        model whose API compacts long threads (`Model.compacts_context`): it is shown the
        thread from the turn holding the newest compaction, or from the start, whatever its
        length, since the API bounds and summarises it (`agent._transcript_window`).
        `tool_concurrency`: how many calls of one model reply run at once (`agent._tool_batch`).
        `meter` hears what the turns did (`agent.seams.TurnMeter`); spans go to
        `tracer_provider`, by default OpenTelemetry's global one (a no-op unless the host set
        up the SDK), with messages and tool arguments only if `capture_content`, scrubbed."""
        self.store = store
        self.model = model
        self.default_agent = agent
        self.hub = EventHub(sink)
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.lease_ttl = lease_ttl
        self.heartbeat_interval = heartbeat_interval or lease_ttl / 3
        self.recovery_interval = recovery_interval
        self.poll_interval = poll_interval
        self.clock = clock
        self._agents: dict[str, Agent] = {}
        self._running: dict[str, TurnRunner] = {}
        self._unclaimed: dict[str, list[CancelNews]] = {}
        """Cancel news for a session whose next turn is being read: the read may predate the
        durable cancel, and no runner is registered yet to hear the signal."""
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._rekick: set[str] = set()
        self._waits = TurnWaits()
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False
        self.run_turns = run_turns
        self._slots = asyncio.Semaphore(max_concurrent_sessions)
        self._dispatcher: Dispatcher | None = None
        self._telling: set[asyncio.Task[None]] = set()
        self.redact = Redactor(secrets)
        tracing = Tracing(tracer_provider, capture_content=capture_content, redact=self.redact)
        self.telemetry = Telemetry(meter, tracing)
        self._sweeping: set[str] = set()
        """Sessions the sweep found with a lapsed lease: a claim of one is a takeover if an
        owner still holds it on paper (a released lease names none)."""
        if context_messages < 1 or tool_concurrency < 1:
            raise ValueError("context_messages and tool_concurrency must be at least 1")
        self.context_messages, self.tool_concurrency = context_messages, tool_concurrency
        self._replays: OrderedDict[tuple[str, str], None] = OrderedDict()
        """(session, turn id) pairs `start()` found already committed. Bounded: a clock that
        re-fires its slots would otherwise grow it for the life of the process."""
        self.outage = OutageLog()
        """Whether the store was last seen unreachable: the runtime's loops, and the host's
        (a renderer's), report to it so an outage is logged once when it starts and once when
        it ends, not at every retry."""

    # lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        self.start_recovery()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def start_recovery(self) -> None:
        """Start the sweeper that resumes turns whose worker died (and, in a worker process,
        picks up turns other processes queued) and expires requests nobody answered in time."""
        if self._sweeper is None and self.run_turns:
            self._sweeper = asyncio.create_task(self._sweep_loop(), name="turn-recovery")

    async def close(self, grace: float = 2.0) -> None:
        """Stop taking work; let drains finish what they hold for `grace` seconds so leases are
        released (another worker can then continue at once), then cancel what is left: a turn
        cut off mid-step resumes elsewhere once its lease expires, like after a crash."""
        self._closed = True
        if self._telling:
            await asyncio.wait(set(self._telling), timeout=grace)
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sweeper
        pending = [t for t in self._drains.values() if not t.done()]
        if pending:
            _, stragglers = await asyncio.wait(pending, timeout=grace)
            for task in stragglers:
                task.cancel()
            for task in stragglers:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._drains.clear()

    # sessions -----------------------------------------------------------------------------

    def session(self, agent: Agent | None, key: str) -> AgentSession:
        chosen = agent or self.default_agent
        if chosen is None:
            raise ValueError("no agent given and the runtime has no default agent")
        if chosen is self.default_agent:
            self._agents.pop(key, None)  # remembered only where it differs: no entry per session
        else:
            self._agents[key] = chosen
        return AgentSession(self, chosen, key)

    def agent_for(self, key: str) -> Agent | None:
        return self._agents.get(key, self.default_agent)

    def attach(self, dispatcher: Dispatcher) -> None:
        """Let other processes hear at once what this one queued or cancelled (the database
        stays the record: without a dispatcher, or when it is down, workers still find the work
        through their recovery sweep and the lease heartbeat)."""
        self._dispatcher = dispatcher

    def _tell(self, what: Awaitable[None]) -> None:
        async def send() -> None:
            try:
                await what
            except Exception:
                log.warning("dispatcher unavailable; workers fall back to polling", exc_info=True)

        task = asyncio.create_task(send())
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    def kick(self, key: str) -> None:
        """Make sure a drain runs for `key`; cheap and idempotent. A runtime that does not run
        turns passes the news to the workers through its dispatcher, if it has one."""
        if self._closed:
            return
        if not self.run_turns:
            if self._dispatcher is not None:
                self._tell(self._dispatcher.queued(key))
            return
        task = self._drains.get(key)
        if task is not None and not task.done():
            self._rekick.add(key)
            return
        drain = asyncio.create_task(self._drain(key), name=f"drain:{key}")
        self._drains[key] = drain
        drain.add_done_callback(lambda done: self._forget_drain(key, done))

    def _forget_drain(self, key: str, done: asyncio.Task[None]) -> None:
        # A long-running worker sees every session once; keeping their finished tasks grew the
        # heap without bound, and with it the pauses of the garbage collector's full passes.
        if self._drains.get(key) is done:
            del self._drains[key]

    async def recover_once(self) -> list[str]:
        """Kick every session with unfinished turns and no live lease; returns their keys."""
        keys = await self.store.recoverable_sessions(self.clock())
        picked = [k for k in keys if self.agent_for(k) is not None]
        for key in picked:
            self._sweeping.add(key)
            self.kick(key)
        return picked

    async def expire_due(self, now: float | None = None) -> int:
        """Expire every request whose time limit passed by `now` (default: the runtime's clock):
        a park resumes with the expiry for the model to read, a proposed write is resolved
        `expired`; due reminders and escalations fire. Returns how many this call expired. The
        recovery sweep of a runtime that runs turns calls this, a clock process (`bot clock`) on
        its own schedule; safe in any number of processes at once: each timer applies once."""
        return await _hitl_expiry.expire_due(self, self.clock() if now is None else now)

    async def answerable(self, principal: Principal) -> list[PendingApproval]:
        """Every pending request across sessions that `principal` may answer, newest first:
        parks and proposed writes, with what `resume` / `confirm` need (see `agent._hitl_inbox`
        for the rules; they are the ones an answer is checked by)."""
        return await _hitl_inbox.answerable(self, principal)

    async def pending_approvals(self) -> list[PendingApproval]:
        """Every pending request across sessions, newest first, each with its answerers and
        the workspace an answer must come from: the operator's view (`bot approvals`), which
        `answerable` narrows to what one person may answer."""
        return await _hitl_inbox.pending_approvals(self.store)

    async def recent_turns(self, principal: Principal, limit: int = 10) -> list[RecentTurn]:
        """The principal's own recent turns across sessions (they spoke them, in that
        workspace), newest first."""
        return await _hitl_inbox.recent_turns(self, principal, limit)

    def note_replay(self, key: str, turn_id: str) -> None:
        """Remember that this committed turn id was delivered again, so that `wait_turn` (and
        with it `result()`, which only gets the id) reports its stored result as `replayed`.

        Kept in memory, not in the store: `replayed` describes a delivery, and a delivery and
        the `result()` that follows it happen in one process. Forgetting (a restart, the bound)
        costs only the flag, never a second run."""
        self._replays[(key, turn_id)] = None
        self._replays.move_to_end((key, turn_id))
        while len(self._replays) > REMEMBERED_REPLAYS:
            self._replays.popitem(last=False)

    async def wait_turn(self, key: str, turn_id: str) -> TurnResult:
        """Wait for the turn to end or park (`agent._turn_waits`)."""
        return await self._waits.wait(
            self.store,
            key,
            turn_id,
            poll=self.poll_interval,
            replayed=lambda k, t: (k, t) in self._replays,
        )

    def signal_cancel(
        self, key: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Tell this process's runner of the session to stop at its next checkpoint (and, through
        the dispatcher, other processes' runners). The durable request was stored first; this only
        makes it take effect without waiting for the next heartbeat."""
        if self._dispatcher is not None:
            self._tell(self._dispatcher.cancel(key, reason, keep=keep, only=only))
        self.signal_cancel_here(key, reason, keep=keep, only=only)

    def signal_cancel_here(
        self, key: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """The in-process half of `signal_cancel`: what a dispatcher calls on a worker."""
        news = CancelNews(reason=reason, keep=keep, only=only)
        runner = self._running.get(key)
        if runner is None:
            unclaimed = self._unclaimed.get(key)
            if unclaimed is not None:
                unclaimed.append(news)
            return
        news.apply(runner)

    def notify(self, key: str) -> None:
        """Wake the `wait_turn` callers of session `key` to read its turn again."""
        self._waits.notify(key)

    # workers ------------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self.recover_once()
                await self.expire_due()
            except StoreUnavailableError as err:
                self.outage.failed(err, writing=False)
            except Exception:
                log.exception("turn recovery sweep failed; retrying")
            else:
                self.outage.reached(writing=False)
            await asyncio.sleep(self.recovery_interval)

    async def _heartbeat(self, lease: Lease) -> None:
        """Keep the lease, and notice a cancellation asked for by another process."""
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                renewed = await self.store.renew_lease(lease, self.lease_ttl, self.clock())
                self.outage.reached(writing=True)
                if not renewed:
                    log.warning("lease on %s was taken over", lease.session)
                    return
                runner = self._running.get(lease.session)
                if runner is not None and not runner.cancellation.cancelled:
                    record = await self.store.get_turn(lease.session, runner.turn_id)
                    if record is not None and record.cancel_reason:
                        runner.cancellation.cancel(record.cancel_reason)
            except StoreUnavailableError as err:
                self.outage.failed(err, writing=True)
            except Exception:
                log.exception("lease heartbeat failed for %s", lease.session)

    async def _drain(self, key: str) -> None:
        async with self._slots:
            await self._drain_holding_slot(key)

    async def _drain_holding_slot(self, key: str) -> None:
        while True:
            self._rekick.discard(key)
            agent = self.agent_for(key)
            if agent is None:
                return
            try:
                lapsed = await self._lapsed_owner(key)
                lease = await self.store.acquire_lease(
                    key, self.owner, self.lease_ttl, self.clock()
                )
            except StoreUnavailableError as err:
                # Nothing is held: the sweep kicks the session again once the database is back.
                self.outage.failed(err, writing=True)
                return
            if lease is None:
                return
            if lapsed:
                self.telemetry.lease_taken_over(key)
            try:
                await self._run_holding(agent, lease)
            except LeaseLostError:
                log.warning("lost the lease on %s; its new holder continues", key)
                self._rekick.discard(key)
            except StoreUnavailableError:
                log.warning("stopped waiting for the database to go on with %s: closing", key)
                self._rekick.discard(key)
            except Exception:
                log.exception("turn on %s stopped; it resumes when its lease is picked up", key)
                self._rekick.discard(key)
            finally:
                with contextlib.suppress(Exception):
                    await self.store.release_lease(lease)
                    self.outage.reached(writing=True)
                self.notify(key)
            if key not in self._rekick:
                return

    async def _lapsed_owner(self, key: str) -> bool:
        if key not in self._sweeping:
            return False
        self._sweeping.discard(key)
        record = await self.store.get_session(key)
        return record is not None and record.lease_owner not in (None, self.owner)

    async def _run_holding(self, agent: Agent, lease: Lease) -> None:
        """Drain the session's queue under `lease`, through database outages.

        A store call that cannot reach the database interrupts the turn between checkpoints
        (what it was committing either committed or not; the transcript, reloaded, says which).
        Leaving the drain then would leave the turn to wait out this worker's own lease, which
        nobody can release while the database is away. So the drain waits for the database and
        goes on, from the turn's last checkpoint, as soon as its lease is renewed: still its
        own, or lapsed with nobody taking it. If another worker took it meanwhile, the renewal
        fails on the epoch and `LeaseLostError` ends this drain; the fence never moved.
        """
        while True:
            try:
                await self._run_queue(agent, lease)
                return
            except StoreUnavailableError as err:
                self.outage.failed(err, writing=True)
                await renew_when_reachable(self, lease, err, closed=lambda: self._closed)

    async def _run_queue(self, agent: Agent, lease: Lease) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(lease))
        conflicts = StepConflicts()
        # The API compacting the thread bounds it; the window bounds one nothing else does.
        window = self.context_messages
        since_compaction = model_compacts(self.model, agent.model)
        try:
            tail = await self.store.load_transcript_tail(
                lease.session, window, since_compaction=since_compaction
            )
            transcript, base = tail.messages, tail.base
            while not self._closed:
                # A cancel committed after this read began is only known by its signal, which
                # may arrive before the runner exists: keep it for the runner.
                heard: list[CancelNews] = []
                self._unclaimed[lease.session] = heard
                try:
                    turn = await self.store.next_turn(lease.session)
                finally:
                    if self._unclaimed.get(lease.session) is heard:
                        del self._unclaimed[lease.session]
                if turn is None:
                    return
                if turn.kind == TurnKind.RESET:
                    _, events = await self.store.apply_reset(
                        lease, turn.turn_id, [], self.lease_ttl, self.clock()
                    )
                    for event in events:
                        await self.hub.emit(event)
                    transcript, base = [], 0
                    self.notify(lease.session)
                    continue
                # The turns a drain runs back to back see what a worker resuming at each would.
                transcript, base = recent_end(
                    transcript, base, window, since_compaction=since_compaction
                )
                env = TurnEnv(
                    agent=agent,
                    store=self.store,
                    model=self.model,
                    sink=self.hub,
                    lease=lease,
                    ttl=self.lease_ttl,
                    clock=self.clock,
                    redact=self.redact,
                    tool_concurrency=self.tool_concurrency,
                    watch=self.telemetry.watch(agent.name, lease.session, turn.turn_id),
                )
                runner = TurnRunner(env, turn, transcript, base)
                self._running[lease.session] = runner
                for news in heard:
                    news.apply(runner)
                try:
                    with env.watch.running():
                        env.watch.run_ended(await runner.run())
                except StepConflictError as err:
                    tail = await conflicts.settle(env, turn, err, window, since_compaction)
                    transcript, base = tail.messages, tail.base
                finally:
                    self._running.pop(lease.session, None)
                self.notify(lease.session)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
