"""One renderer task per session with something to show, in whichever process holds its lease.

`kick(key)` subscribes to the session's live events at once (before the turn is started, so no
early token is missed) and starts the task; the task takes the session's delivery lease or leaves
the work to the process that has it. A sweep re-kicks sessions still flagged active, which is how
rendering resumes after a crash and how work started by another process (the clock) gets shown.

A renderer that stopped on an error is tried again only after a wait that doubles with each
failure in a row (`bot.slack.rendering.backoff`), during which this process keeps the session's
lease, so no other worker tries it either. A thread Slack cannot reach (`Unreachable`) is not tried
again until something new happens in it; its turns go on (the API and the CLI show them). A
dead token (`TokenGone`: Slack refused it, or the workspace removed the app in this process)
stops the session's turns, as an uninstall does, and nothing more is sent with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent import Runtime, StoreUnavailableError, TurnEvent
from bot.slack.calls import SlackCallError, TokenGone, Unreachable
from bot.slack.clients import UNINSTALLED, NotInstalled, SlackClients
from bot.slack.rendering.backoff import Backoff
from bot.slack.rendering.lease import LeaseLost, RenderSettings
from bot.slack.rendering.parts import Target
from bot.slack.rendering.renderer import SessionRenderer
from bot.slack.rendering.thread import RETIRED
from storage.delivery.bodies import PostBody
from storage.delivery.store import DeliveryStore, Post
from storage.delivery.store import Target as DeliveryTarget

if TYPE_CHECKING:
    from bot.slack.home import HomeTab

log = logging.getLogger(__name__)


class RendererPool:
    def __init__(
        self,
        *,
        runtime: Runtime,
        delivery: DeliveryStore,
        clients: SlackClients,
        settings: RenderSettings,
        owner: str,
        clock: Callable[[], float] = time.time,
        sweep_interval: float = 2.0,
        enabled: bool = True,
        concurrency: int = 32,
        home: HomeTab | None = None,
    ) -> None:
        """`clients`: each workspace's client (`bot.slack.clients`); `home`: the Home tabs its
        renderers refresh when a request appears or goes."""
        self.runtime = runtime
        self.delivery = delivery
        self.clients = clients
        self.settings = settings
        self.owner = owner
        self.clock = clock
        self.sweep_interval = sweep_interval
        self.enabled = enabled
        """False in a web process that leaves rendering to `bot worker`."""
        self.home = home
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False
        self._backoff = Backoff(base=settings.backoff_base, cap=settings.backoff_cap)
        self._timers: dict[str, asyncio.TimerHandle] = {}
        """Sessions waiting out a backoff: the call that kicks each one again."""
        self._dead_tokens: set[str] = set()
        """Workspaces whose token Slack refused, logged once."""
        # Bounded so a burst of sessions cannot take every database connection from the turns.
        self._slots = asyncio.Semaphore(concurrency)

    def start(self) -> None:
        if self._sweeper is None and self.enabled:
            self._sweeper = asyncio.create_task(self._sweep(), name="render-sweep")

    async def close(self, grace: float = 2.0) -> None:
        """Stop rendering within `grace` seconds, whatever the renderers were doing (mid-call,
        waiting out a rate limit, or between tries after an error): each is cancelled and
        waited for that long at most. One that has not ended by then (a task that swallowed its
        cancellation) is logged and left; a shutdown never waits on it."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = [t for t in [self._sweeper, *self._tasks.values(), *self._background] if t]
        for task in tasks:
            task.cancel()
        if tasks:
            done, late = await asyncio.wait(tasks, timeout=grace)
            for task in done:
                if not task.cancelled():
                    task.exception()  # retrieved: it was logged where it happened
            if late:
                log.error(
                    "renderers did not stop within the grace period; shutting down without them",
                    extra={"tasks": sorted(t.get_name() for t in late)},
                )
        self._tasks.clear()

    async def _stop_uninstalled(self, key: str) -> None:
        try:
            session = self.runtime.session(self.runtime.agent_for(key), key)
            stopped = await session.stop(reason=UNINSTALLED)
        except Exception:
            log.exception("could not stop the turns of a removed workspace", extra={"session": key})
            return
        if stopped:
            log.info("stopped the turns of a removed workspace", extra={"session": key})

    @property
    def running(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    def kick(self, key: str) -> None:
        """Make sure this session is being rendered; cheap and idempotent. A session waiting
        out a backoff is rendered when its wait is over, not before."""
        if self._closed or not self.enabled:
            return
        left = self._backoff.left(key)
        if left > 0:
            self._retry_later(key, left)
            return
        task = self._tasks.get(key)
        if task is not None and not task.done():
            self._again.add(key)
            return
        queue: asyncio.Queue[tuple[TurnEvent, int | None]] = asyncio.Queue()
        horizon: list[int | None] = [None]

        def on_event(event: TurnEvent) -> None:
            # Each live event carries the newest durable seq before it, so the renderer can tell
            # a delta that a committed event has already covered. For a local delta that is the
            # newest seq this subscription saw (a process emits in order). A delta relayed from
            # the process running the turn carries its own (`after`), and only that one places
            # it: the subscription may have begun after that event went by, or heard newer
            # events first from another process (pub/sub orders each publisher's messages, not
            # several publishers'), which must not make a finished turn's delta look current.
            # (The relay passes on only deltas that leave no hole in their step.)
            place = horizon[0]
            if event.seq > 0:
                place = horizon[0] = max(horizon[0] or 0, event.seq)
            elif event.type in ("message.delta", "progress.updated") and event.after > 0:
                place = event.after
                horizon[0] = max(horizon[0] or 0, event.after)
            queue.put_nowait((event, place))

        unsubscribe = self.runtime.hub.subscribe(on_event, session=key)
        self._tasks[key] = asyncio.create_task(
            self._render(key, queue, unsubscribe), name=f"render:{key}"
        )

    def _retry_later(self, key: str, delay: float) -> None:
        if key in self._timers or self._closed:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._retry, key)

    def _retry(self, key: str) -> None:
        self._timers.pop(key, None)
        self.kick(key)

    def _failed(self, key: str, err: BaseException, code: str, method: str | None) -> float:
        """Count a failed render and log it (once per session and error); returns how long
        the session waits before it is tried again."""
        delay = self._backoff.failed(key, code)
        level = logging.WARNING if self._backoff.first_time(key, code) else logging.DEBUG
        extra = {"session": key, "method": method, "code": code, "retry_in": round(delay, 1)}
        if isinstance(err, Unreachable):
            log.log(
                level,
                "Slack cannot reach this thread: rendering it stops until something new happens "
                "there (its turns go on)",
                extra=extra,
            )
        elif isinstance(err, SlackCallError):
            log.log(level, "rendering stopped on a Slack error; retrying later", extra=extra)
        else:
            log.log(
                level,
                "rendering stopped; retrying later",
                extra=extra,
                exc_info=level == logging.WARNING,
            )
        return delay

    async def _token_gone(self, key: str, team: str, err: TokenGone) -> bool:
        """The renderer's token is dead. Retired here (an uninstall this process took, or a
        token since replaced): the workspace's turns stop if it has no installation left, and
        rendering goes on with the new token otherwise. Refused by Slack: it is dropped from
        the cache and the session's turns stop, as for an uninstall, since nothing of theirs
        can be shown. Returns whether rendering is over for the session."""
        if err.code == RETIRED:
            try:
                await self.clients.for_team(team)
            except NotInstalled:
                pass
            else:
                return False
        else:
            self.clients.forget(team)
            if team not in self._dead_tokens:
                self._dead_tokens.add(team)
                log.error(
                    "Slack refused the workspace's token: its turns are stopped and nothing more "
                    "is sent with it",
                    extra={"team": team, "method": err.method, "code": err.code},
                )
        await self._stop_uninstalled(key)
        return True

    async def _render(
        self,
        key: str,
        queue: asyncio.Queue[tuple[TurnEvent, int | None]],
        unsubscribe: Callable[[], None],
    ) -> None:
        held = False
        wait = 0.0
        """After a failure: how long this process keeps the lease before the next try."""
        retry = True
        """Whether the session is tried again once `wait` is over (not for a thread Slack
        cannot reach: only something new happening there kicks it again)."""
        target: DeliveryTarget | None = None
        try:
            await self._slots.acquire()
        except asyncio.CancelledError:
            unsubscribe()
            self._tasks.pop(key, None)
            raise
        try:
            leased_at = time.monotonic()
            held = await self.delivery.acquire(
                key, self.owner, self.settings.lease_ttl, time.time()
            )
            self.runtime.outage.reached(writing=True)
            if not held:
                return
            target = await self.delivery.get_target(key)
            if target is None:
                return
            team = target.team
            try:
                client = await self.clients.for_team(team)
            except NotInstalled:
                # The workspace removed the app: nothing can be shown there, so the session
                # stops asking to be rendered until it is registered again (a new event, after
                # a new install). Its turns were stopped when the uninstall came, unless that
                # process died right after its ack (Slack sends it once): stopped here then,
                # so none goes on calling the model unseen.
                await self._stop_uninstalled(key)
                await self.delivery.go_idle(key, target.activity)
                return
            renderer = SessionRenderer(
                key=key,
                target=Target(
                    team=target.team,
                    channel=target.channel,
                    thread_ts=target.thread_ts,
                    user_id=target.user_id,
                ),
                client=client,
                store=self.runtime.store,
                delivery=self.delivery,
                queue=queue,
                settings=self.settings,
                owner=self.owner,
                cursor=target.cursor,
                clock=self.clock,
                leased_at=leased_at,
                home=self.home,
                usable=lambda: self.clients.usable(team, client),
            )
            await renderer.run(target.activity)
            self._backoff.succeeded(key)
        except LeaseLost:
            log.warning("another process took over rendering", extra={"session": key})
        except TokenGone as err:
            if target is not None and await self._token_gone(key, target.team, err):
                await self.delivery.go_idle(key, target.activity)
            else:
                self._again.add(key)
        except SlackCallError as err:
            wait = self._failed(key, err, err.code, err.method)
            if isinstance(err, Unreachable) and target is not None:
                retry = False
                await self.delivery.go_idle(key, target.activity)
        except StoreUnavailableError as err:
            # The delivery lease is this process's to take again: the next sweep resumes it.
            self.runtime.outage.failed(err, writing=True)
        except Exception as err:
            wait = self._failed(key, err, type(err).__name__, None)
        finally:
            self._slots.release()
            unsubscribe()
            if held:
                with contextlib.suppress(Exception):
                    if wait > 0:
                        # Kept through the wait and a lease's length past it: no other worker
                        # tries meanwhile, and this one, counting, is the one that tries next.
                        hold = wait + self.settings.lease_ttl
                        await self.delivery.acquire(key, self.owner, hold, time.time())
                    else:
                        await self.delivery.release(key, self.owner)
            self._tasks.pop(key, None)
            if wait > 0:
                self._again.discard(key)
                if retry:
                    self._retry_later(key, wait)
            elif key in self._again and not self._closed:
                self._again.discard(key)
                self.kick(key)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                for key in await self.delivery.active_sessions():
                    if key not in self._tasks and key not in self._timers:
                        self.kick(key)
            except StoreUnavailableError as err:
                self.runtime.outage.failed(err, writing=False)
            except Exception:
                log.exception("render sweep failed; retrying")
            else:
                self.runtime.outage.reached(writing=False)

    def notice(self, key: str, turn_id: str, name: str, text: str) -> None:
        """Post a one-off note in a session's thread (once per key, even across retries and
        when two deliveries of one event race: only the one whose row was stored posts; if it
        dies first, the session's renderer finds the row unposted and posts it)."""
        task = asyncio.create_task(self._notice(key, turn_id, name, text))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _notice(self, key: str, turn_id: str, name: str, text: str) -> None:
        claim = uuid.uuid4().hex
        try:
            target = await self.delivery.get_target(key)
            if target is None:
                return
            post = Post(
                post_key=f"{key}|{turn_id}|notice|{name}",
                session_key=key,
                turn_id=turn_id,
                kind="notice",
                channel=target.channel,
                thread_ts=target.thread_ts,
                body=PostBody(prompt=text, claim=claim),
            )
            stored = await self.delivery.begin_post(post, time.time())
            if stored.body.claim != claim or stored.state != "posting" or stored.ts:
                return
            team = target.team
            client = await self.clients.for_team(team)
            renderer = SessionRenderer(
                key=key,
                target=Target(team=team, channel=target.channel, thread_ts=target.thread_ts),
                client=client,
                usable=lambda: self.clients.usable(team, client),
                store=self.runtime.store,
                delivery=self.delivery,
                queue=asyncio.Queue(),
                settings=self.settings,
                owner=self.owner,
            )
            await renderer.send_post(stored)
        except NotInstalled:
            return  # logged once for the workspace (`bot.slack.clients`)
        except Exception:
            log.exception("could not post a notice", extra={"session": key})
