"""One renderer task per session with something to show, in whichever process holds its lease.

`kick(key)` subscribes to the session's live events at once (before the turn is started, so no
early token is missed) and starts the task; the task takes the session's delivery lease or leaves
the work to the process that has it. A sweep re-kicks sessions still flagged active, which is how
rendering resumes after a crash and how work started by another process (the clock) gets shown.
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
from bot.rendering.lease import LeaseLost, RenderSettings
from bot.rendering.parts import Target
from bot.rendering.renderer import SessionRenderer
from bot.slack_calls import SlackCallError
from bot.slack_clients import UNINSTALLED, NotInstalled, SlackClients
from storage.delivery.store import DeliveryStore, Post

if TYPE_CHECKING:
    from bot.home import HomeTab

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
        """`clients`: each workspace's client (`bot.slack_clients`); `home`: the Home tabs its
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
        # Bounded so a burst of sessions cannot take every database connection from the turns.
        self._slots = asyncio.Semaphore(concurrency)

    def start(self) -> None:
        if self._sweeper is None and self.enabled:
            self._sweeper = asyncio.create_task(self._sweep(), name="render-sweep")

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in [self._sweeper, *self._tasks.values(), *self._background] if t]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
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
        """Make sure this session is being rendered; cheap and idempotent."""
        if self._closed or not self.enabled:
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
            elif event.type == "message.delta" and event.after > 0:
                place = event.after
                horizon[0] = max(horizon[0] or 0, event.after)
            queue.put_nowait((event, place))

        unsubscribe = self.runtime.hub.subscribe(on_event, session=key)
        self._tasks[key] = asyncio.create_task(
            self._render(key, queue, unsubscribe), name=f"render:{key}"
        )

    async def _render(
        self,
        key: str,
        queue: asyncio.Queue[tuple[TurnEvent, int | None]],
        unsubscribe: Callable[[], None],
    ) -> None:
        held = False
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
            try:
                client = await self.clients.for_team(target.team)
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
            )
            await renderer.run(target.activity)
        except LeaseLost:
            log.warning("another process took over rendering", extra={"session": key})
        except SlackCallError as err:
            log.error(
                "rendering stopped on a Slack error; retrying later",
                extra={"session": key, "method": err.method, "code": err.code},
            )
        except StoreUnavailableError as err:
            # The delivery lease is this process's to take again: the next sweep resumes it.
            self.runtime.outage.failed(err, writing=True)
        except Exception:
            log.exception("rendering stopped; it resumes on the next sweep", extra={"session": key})
        finally:
            self._slots.release()
            unsubscribe()
            if held:
                with contextlib.suppress(Exception):
                    await self.delivery.release(key, self.owner)
            self._tasks.pop(key, None)
            if key in self._again and not self._closed:
                self._again.discard(key)
                self.kick(key)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                for key in await self.delivery.active_sessions():
                    if key not in self._tasks:
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
                body={"prompt": text, "claim": claim},
            )
            stored = await self.delivery.begin_post(post, time.time())
            if stored.body.get("claim") != claim or stored.state != "posting" or stored.ts:
                return
            client = await self.clients.for_team(target.team)
            renderer = SessionRenderer(
                key=key,
                target=Target(team=target.team, channel=target.channel, thread_ts=target.thread_ts),
                client=client,
                store=self.runtime.store,
                delivery=self.delivery,
                queue=asyncio.Queue(),
                settings=self.settings,
                owner=self.owner,
            )
            await renderer.send_post(stored)
        except NotInstalled:
            return  # logged once for the workspace (`bot.slack_clients`)
        except Exception:
            log.exception("could not post a notice", extra={"session": key})
