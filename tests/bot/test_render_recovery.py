"""A renderer killed in the middle of a batch, at one precise Slack call, and the renderer that
takes the thread over after it.

A renderer applies a batch of durable events to Slack and then saves what it showed (the cursor
and the bodies of the messages it touched) in one transaction. A process killed between the two
leaves Slack ahead of the database. Each test here runs a turn to its end, renders part of its
log, then lets the first renderer go on until the stand-in holds one call open (a "hang" fault
that does its work first: Slack has the message, the bot never hears back) and cancels it there:
what SIGKILL does, nothing after that call runs. A second renderer then recovers the thread from
the database and the rest of the log. The thread must read as if nothing had happened: every
reply in one message, in order, and every approval once.

The last test is the other way a renderer can overlap with its successor: not killed, only slow
(a long batch, a rate limit, a starved machine) until its lease ran out and another process took
the thread over. It must make no Slack call after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent import Runtime, SessionStore, TurnEvent
from agent.seams import TurnRecord
from bot.slack.calls import make_render_client
from bot.slack.inbound import session_key
from bot.slack.rendering import LeaseLost, RenderSettings, SessionRenderer
from bot.slack.rendering.parts import Target
from bot.testing import SlackStandIn
from bot.testing.workspace import Message, is_request
from storage import SqlStore
from storage.delivery.store import DeliveryStore
from tests.bot.agents import AGENT, hold_model
from tests.bot.harness import FAST, TOKEN, eventually

TEAM = "T0DEMO"
CHANNEL = "C0RECOVER"
THREAD = "1700000000.000100"
KEY = session_key(TEAM, CHANNEL, THREAD)


class LogSoFar:
    """The store as a renderer saw it at one moment: the event log up to `upto` only (what had
    committed when it read). Everything else passes through."""

    def __init__(self, store: SessionStore, upto: int) -> None:
        self.store = store
        self.upto = upto

    async def read_events(self, session: str, after_seq: int, limit: int) -> list[TurnEvent]:
        events = await self.store.read_events(session, after_seq, limit)
        return [e for e in events if e.seq <= self.upto]

    async def list_turns(self, session: str) -> list[TurnRecord]:
        return await self.store.list_turns(session)


@dataclass
class Thread:
    store: SqlStore
    delivery: DeliveryStore
    standin: SlackStandIn

    def renderer(
        self,
        store: Any,
        cursor: int = 0,
        *,
        settings: RenderSettings = FAST,
        owner: str = "test-renderer",
        leased_at: float | None = None,
    ) -> SessionRenderer:
        return SessionRenderer(
            key=KEY,
            target=Target(team=TEAM, channel=CHANNEL, thread_ts=THREAD, user_id="U0ALICE"),
            client=make_render_client(TOKEN, self.standin.api_url),
            store=store,
            delivery=self.delivery,
            queue=asyncio.Queue(),
            settings=settings,
            owner=owner,
            cursor=cursor,
            leased_at=leased_at,
        )

    async def killed_at(self, renderer: SessionRenderer, method: str, calls: int) -> None:
        """Let `renderer` catch up until the stand-in has seen `calls` calls to `method` (the
        last one held open by a fault), then kill it there."""
        task = asyncio.create_task(renderer.catch_up())
        await eventually(
            lambda: len(self.standin.calls_to(method)) >= calls or task.done(), within=30
        )
        assert not task.done(), "the renderer finished before the call it should die in"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def take_over(self) -> None:
        """A new renderer recovers the thread and renders the rest, until it goes idle."""
        target = await self.delivery.get_target(KEY)
        assert target is not None
        await asyncio.wait_for(self.renderer(self.store, target.cursor).run(target.activity), 60)

    def messages(self) -> list[Message]:
        return [m for m in self.standin.bot_messages(CHANNEL) if m.thread_ts == THREAD]


@pytest.fixture
async def thread(db_url: str, standin: SlackStandIn) -> AsyncIterator[Thread]:
    """A hold proposed in a thread: the whole turn has run (7 events: turn.started,
    message.completed, action.requested, action.completed, confirmation.requested,
    message.completed, turn.completed); nothing is rendered yet."""
    store = await SqlStore.open(db_url)
    delivery = await DeliveryStore.open(db_url)
    try:
        async with Runtime(store, hold_model(), agent=AGENT) as runtime:
            await runtime.session(AGENT, KEY).turn("hold order 42")
        kinds = [e.type for e in await store.read_events(KEY, 0, 100)]
        assert kinds[3:5] == ["action.completed", "confirmation.requested"], kinds
        standin.add_user_message(CHANNEL, THREAD, "U0ALICE", "hold order 42")
        await delivery.register(
            KEY, team=TEAM, channel=CHANNEL, thread_ts=THREAD, user_id="U0ALICE", now=time.time()
        )
        yield Thread(store, delivery, standin)
    finally:
        await delivery.close()
        await store.close()


def _is_reply(text: str) -> Callable[[Message], bool]:
    return lambda m: not is_request(m) and text in m.text


def _shape(messages: list[Message]) -> list[str]:
    """The thread as a person reads it: each message's words (a reply's timeline included,
    wherever it is kept) or "approval"."""
    shown: list[str] = []
    for m in messages:
        if is_request(m):
            shown.append("approval")
            continue
        tasks = " ".join(f"{t.get('status')}:{t.get('title')}" for t in m.tasks.values())
        shown.append(f"{m.text} {tasks}".strip())
    return shown


async def test_a_reply_closed_after_the_last_save_is_finished_in_its_own_message(
    thread: Thread,
) -> None:
    """The first message of the reply was saved open (its tool still running); the renderer
    then closed it, posted the approval and opened the next message, and died before saving.
    The next renderer finishes the first message where it is, not in a new one."""
    first = thread.renderer(LogSoFar(thread.store, upto=3))
    await first.recover()
    await first.catch_up()  # saved: the first message open, showing the call as running
    assert [m.text for m in thread.messages()] == ["Proposing a hold."]

    thread.standin.fail("chat.startStream", "hang", applied=True)  # the second message
    first.store = LogSoFar(thread.store, upto=7)
    await thread.killed_at(first, "chat.startStream", calls=2)
    assert len(thread.messages()) == 3  # reply, approval, the second reply's start

    await thread.take_over()

    shape = _shape(thread.messages())
    assert len(shape) == 3, shape
    assert shape[0].startswith("Proposing a hold."), shape
    # The proposed write has not run: its card waits for the person (never "✓", never "…").
    assert shape[0].endswith("pending:Place hold"), shape
    assert "…" not in shape[0], shape
    assert shape[1:] == ["approval", "The hold waits for your confirmation."], shape


async def test_a_reply_shown_but_never_saved_keeps_its_place_above_the_approval(
    thread: Thread,
) -> None:
    """One batch opened and closed the first message and posted the approval; the renderer
    died before it saved anything. The next one re-applies the log into that same message, so
    the reply stays above the approval it led to instead of being posted again below it."""
    thread.standin.fail("chat.postMessage", "hang", applied=True)  # the approval
    first = thread.renderer(LogSoFar(thread.store, upto=5))
    await first.recover()
    await thread.killed_at(first, "chat.postMessage", calls=1)
    [reply, request] = thread.messages()
    assert request.blocks

    await thread.take_over()

    messages = thread.messages()
    shape = _shape(messages)
    assert len(shape) == 3, shape
    assert messages[0].ts == reply.ts, "the reply was posted again"
    assert shape[0].startswith("Proposing a hold."), shape
    assert shape[1:] == ["approval", "The hold waits for your confirmation."], shape
    assert messages[1].ts == request.ts


async def test_a_renderer_outlived_by_its_lease_makes_no_further_slack_call(
    thread: Thread,
) -> None:
    """A renderer waits out a rate limit longer than its lease; meanwhile another process takes
    the thread over. When the wait ends, the first one stops (`LeaseLost`) before calling Slack
    again, instead of rendering the thread alongside its successor."""
    settings = RenderSettings(flush_interval=0.1, poll_interval=0.1, lease_ttl=1.0)
    leased_at = time.monotonic()
    assert await thread.delivery.acquire(KEY, "slow-worker", 1.0, time.time())
    slow = thread.renderer(
        thread.store, settings=settings, owner="slow-worker", leased_at=leased_at
    )
    # The turn's first Slack call: its agent session's `processing`.
    thread.standin.fail("agents.sessions.setStatus", "ratelimited", retry_after=3)

    task = asyncio.create_task(slow.catch_up())
    await eventually(lambda: thread.standin.calls, within=30)  # the rate-limited call
    await asyncio.sleep(max(0.0, leased_at + 1.2 - time.monotonic()))
    assert await thread.delivery.acquire(KEY, "next-worker", 60.0, time.time())

    with pytest.raises(LeaseLost):
        await asyncio.wait_for(task, 30)
    assert [(c.method, c.status) for c in thread.standin.calls] == [
        ("agents.sessions.setStatus", 429)
    ]


async def test_a_request_answered_while_its_renderer_died_is_shown_answered_by_the_next(
    thread: Thread,
) -> None:
    """The proposed hold is denied (by host code: the API's path) after the thread was
    rendered; the renderer that applies the answer edits the first message's waiting card and
    dies before saving. The next one applies it again: the card says denied, for good (its
    saved body too)."""
    first = thread.renderer(thread.store)
    await first.recover()
    await first.catch_up()
    reply = next(m for m in thread.messages() if not is_request(m))
    assert reply.tasks["c_hold"]["status"] == "pending"

    [proposal] = await thread.store.list_confirmations(KEY)
    async with Runtime(thread.store, hold_model(), agent=AGENT) as runtime:
        session = runtime.session(AGENT, KEY)
        follow_up = await session.confirm(
            proposal.confirmation_id, False, by="U0ALICE", reason="not now"
        )
        await session.result(follow_up)

    target = await thread.delivery.get_target(KEY)
    assert target is not None
    thread.standin.fail("chat.update", "error:internal_error")  # the approval's (let be)
    thread.standin.fail("chat.update", "hang", applied=True)  # the reply's card, then death
    second = thread.renderer(thread.store, target.cursor)
    await thread.killed_at(second, "chat.update", calls=2)

    await thread.take_over()

    denied = ("error", "denied by <@U0ALICE>: not now")
    [reply, *_] = [m for m in thread.messages() if not is_request(m)]
    card = reply.tasks["c_hold"]
    assert (card["status"], card.get("output")) == denied
    saved, *_ = await thread.delivery.posts(KEY, turn_id=proposal.turn_id, kind="reply")
    [task] = [t for t in saved.body.tasks or [] if t["id"] == "c_hold"]
    assert (task["status"], task["output"]) == denied
