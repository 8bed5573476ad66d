"""The `clock` process: fires the agent's schedules as proactive turns, and expires the requests
nobody answered in time.

Each fire's turn id is `cron:<name>:<scheduled time ISO>`, so however many clocks run and however
often one restarts, a scheduled time becomes one turn (the store's unique key decides, durably).
After downtime, the latest fire missed within the grace window runs once; older ones are skipped.
The turn is rendered to the schedule's channel by the same renderer a reply uses.

Expiry: every `expiry_interval` the clock runs `Runtime.expire_due(now)`, the engine's durable
timers (a park then resumes with the expiry for the model to read, a proposed write is resolved
`expired`); each timer applies once whichever process sweeps first (a worker's recovery sweep
does the same), and the thread's renderer shows the request as expired.

Retention: with `PRUNE_OLDER_THAN` set, the clock runs the prune job (`bot.core.retention`) once at
start and then at every multiple of `PRUNE_EVERY` (UTC), in a task of its own, so a long prune
never delays a schedule or an expiry. Two clocks may prune at the same moment: harmless, each
batch re-checks its rows under the session locks and nothing is removed twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from agent import Agent, Runtime, Schedule, SessionSuspendedError
from bot.core.cron import Cron
from bot.core.retention import PruneReport, Retention, run_prune
from bot.slack.rendering.pool import RendererPool
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)


def cron_session(team: str, schedule: Schedule) -> str:
    return schedule.session or f"slack:{team}:{schedule.channel}:cron:{schedule.name}"


def cron_turn_id(schedule: Schedule, at: datetime) -> str:
    return f"cron:{schedule.name}:{at.astimezone(UTC).isoformat()}"


class Clock:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        renderers: RendererPool,
        team: str | None,
        grace: float = 3600.0,
        now: Callable[[], float] = time.time,
        expiry_interval: float = 15.0,
        retention: Retention | None = None,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.renderers = renderers
        self.team = team
        self.grace = grace
        self.now = now
        self.expiry_interval = expiry_interval
        self.crons = {s.name: Cron.parse(s.cron) for s in agent.schedules}
        self.retention = retention
        self._pruning: asyncio.Task[PruneReport | None] | None = None

    async def tick(self) -> list[str]:
        """Fire every schedule whose latest due time has no turn yet; returns the new turn ids.
        With no workspace to post in (`team` None), none fires."""
        now = datetime.fromtimestamp(self.now(), UTC)
        fired: list[str] = []
        for schedule in self.agent.schedules if self.team is not None else ():
            due = self.crons[schedule.name].latest_between(now - timedelta(seconds=self.grace), now)
            if due is None:
                continue
            turn_id = await self.fire(schedule, due)
            if turn_id is not None:
                fired.append(turn_id)
        return fired

    async def fire(self, schedule: Schedule, at: datetime) -> str | None:
        if self.team is None:
            return None
        team = self.team
        key = cron_session(team, schedule)
        turn_id = cron_turn_id(schedule, at)
        if await self.runtime.store.get_turn(key, turn_id) is not None:
            return None
        # Registered before the turn is queued, so a crash in between leaves the next tick the
        # whole fire to do again (it finds no turn); marked active once more after, so a
        # renderer that looked in between, saw no turn and went idle is woken again.
        await self.delivery.register(
            key,
            team=team,
            channel=schedule.channel,
            thread_ts=None,
            user_id=None,
            now=time.time(),
        )
        self.renderers.kick(key)
        session = self.runtime.session(self.agent, key)
        try:
            await session.receive(
                schedule.seed,
                by=f"cron:{schedule.name}",
                answerers=schedule.answerers,
                workspace={"team": team},
                turn_id=turn_id,
            )
        except SessionSuspendedError:
            log.warning(
                "schedule skipped: its session waits on an approval",
                extra={"schedule": schedule.name},
            )
            return None
        await self.delivery.mark_active(key, time.time())
        self.renderers.kick(key)
        log.info("schedule fired", extra={"schedule": schedule.name, "turn": turn_id})
        return turn_id

    async def expire(self) -> int:
        """Expire every request whose time is up; returns how many this call expired."""
        expired = await self.runtime.expire_due(self.now())
        if expired:
            log.info("requests expired", extra={"count": expired})
        return expired

    async def prune(self) -> PruneReport | None:
        """Run the retention job now; None when none is configured or it failed (logged)."""
        if self.retention is None:
            return None
        try:
            report = await run_prune(
                self.runtime.store, self.delivery, self.retention, now=self.now()
            )
        except Exception:
            log.exception("pruning failed; retrying at the next prune time")
            return None
        log.info("pruned", extra=report.as_json())
        return report

    def _prune_if_due(self, due: float) -> float:
        """Start the job in its own task if it is due and not still running; the next due time."""
        if self.retention is None or self.now() < due:
            return due
        if self._pruning is None or self._pruning.done():
            self._pruning = asyncio.create_task(self.prune())
        every = self.retention.every
        return (self.now() // every + 1) * every

    async def run(self, stop: asyncio.Event) -> None:
        """Tick at the top of every minute, expire due requests every `expiry_interval` and
        prune when due, until `stop` is set."""
        next_tick = self.now()
        next_prune = self.now()
        try:
            await self._run(stop, next_tick, next_prune)
        finally:
            if self._pruning is not None and not self._pruning.done():
                self._pruning.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._pruning

    async def _run(self, stop: asyncio.Event, next_tick: float, next_prune: float) -> None:
        while not stop.is_set():
            next_prune = self._prune_if_due(next_prune)
            if self.now() >= next_tick:
                try:
                    await self.tick()
                except Exception:
                    log.exception("clock tick failed; retrying next minute")
                next_tick = self.now() + 60.5 - (self.now() % 60)
            try:
                await self.expire()
            except Exception:
                log.exception("expiring requests failed; retrying")
            wait = min(self.expiry_interval, max(0.0, next_tick - self.now()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):  # wait_for may swallow a cancel on 3.11
                    await stop.wait()
