"""A bounded soak of the approval path as users run it: real processes, real HTTP, signed
requests, the process running the turns SIGKILLed at random moments while people mention the
bot and approve. From the Slack stand-in's record: every mention gets exactly one complete
reply, no post is doubled, and no effect runs twice.

Half the mentions park for the requester's answer ("refund order N"); the other half propose a
write the requester confirms ("hold order N"), whose provider call is counted in a file the
bot appends to (fsynced) before it answers.

CI size: 12 mentions, the process killed for 10 s and at least 3 times (the killing goes on past
10 s until it has been). `BOT_TEST_SOAK_MENTIONS` and `BOT_TEST_SOAK_SECONDS` set the size; the
size it ran at before (`BOT_TEST_SOAK_MENTIONS=30 BOT_TEST_SOAK_SECONDS=30`) took 35 s a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from agent import ReceiptStatus
from bot.slack.inbound import session_key
from bot.slack.rendering.parts import TASK_MARKS
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message, is_request
from storage import SqlStore
from tests.bot.agents import EFFECTS_FILE
from tests.bot.harness import ONE_PROCESS, SECRET, WEB_AND_WORKER, buttons, rendered_out
from tests.bot.processes import Process, spawn
from tests.support.slack_story import Moment, thread_calls, thread_record

CHANNEL = "C0SOAK"
MENTIONS = int(os.environ.get("BOT_TEST_SOAK_MENTIONS", "12"))
KILLING = float(os.environ.get("BOT_TEST_SOAK_SECONDS", "10"))
"""Seconds during which the process running the turns is SIGKILLed at random moments."""
KILLS = 3
"""Kills at the least: the killing goes on past `KILLING` until there were as many (a busy
machine restarts the process slowly, and fewer kills would prove too little)."""
SETTLE = 60.0
"""Bound after the killing stops: everything must be delivered by then (a restarted process
takes about a second to start, a dead one's leases expire after one)."""

EXPECTED = {
    "refund": ["Looking it up.", "Refund done."],
    "hold": ["Proposing a hold.", "The hold waits for your confirmation.", "Hold placed."],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Fleet:
    """The bot's processes: the one running the turns can be killed and restarted; in
    one-process mode that is also the web server, restarted on the same port."""

    def __init__(self, serving: str, db_url: str, api_url: str, effects: Path) -> None:
        self.serving = serving
        self.db_url = db_url
        self.api_url = api_url
        self.port = _free_port()
        self.kills = 0
        self.moments: list[Moment] = []
        """When the runner was killed, for a failure's story of a thread."""
        self._stack = contextlib.AsyncExitStack()
        self._runner: Process | None = None
        self._runner_exit: contextlib.AsyncExitStack | None = None
        os.environ[EFFECTS_FILE] = str(effects)

    async def __aenter__(self) -> Fleet:
        if self.serving == WEB_AND_WORKER:
            await self._stack.enter_async_context(self._spawn("web"))
        await self._start_runner()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner_exit is not None:
            await self._runner_exit.aclose()
        await self._stack.aclose()
        os.environ.pop(EFFECTS_FILE, None)

    @contextlib.asynccontextmanager
    async def _spawn(self, role: str) -> AsyncIterator[Process]:
        port = self.port if role != "worker" else 0
        async with spawn(role, self.db_url, self.api_url, "soak_model", port=port) as (proc, _):
            yield proc

    async def _start_runner(self) -> None:
        role = "worker" if self.serving == WEB_AND_WORKER else "one"
        exit_stack = contextlib.AsyncExitStack()
        self._runner = await exit_stack.enter_async_context(self._spawn(role))
        self._runner_exit = exit_stack

    async def kill_and_restart(self) -> None:
        assert self._runner is not None
        assert self._runner_exit is not None
        self._runner.send_signal(signal.SIGKILL)
        self.moments.append((time.time(), f"SIGKILL {self._runner.pid}"))
        await self._runner.wait()
        self.kills += 1
        await self._runner_exit.aclose()
        await self._start_runner()


async def _until(
    check: Callable[[], bool],
    within: float,
    what: str,
    detail: Callable[[], Awaitable[object]],
) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:.0f} s: {what}; missing:\n{await detail()}")
        await asyncio.sleep(0.1)


async def _story(
    standin: SlackStandIn, db_url: str, fleet: Fleet, threads: dict[str, tuple[str, str]]
) -> str:
    """Each thread not as it should be, as Slack shows it, the calls that made it and what the
    database remembers of it (the first few: one usually tells all)."""
    told: list[str] = []
    shown = 0
    for ts, (kind, user) in threads.items():
        if _right(standin, ts, kind, user):
            continue
        shown += 1
        if shown > 3:
            told.append("(more threads incomplete)")
            break
        record = await thread_record(db_url, session_key("T0DEMO", CHANNEL, ts))
        told += [
            f"--- thread {ts} ({kind}): {[m.text for m in _thread(standin, ts)]}",
            *thread_calls(standin, CHANNEL, ts, fleet.moments),
            *record,
        ]
    return "\n".join(told)


async def _like_slack(send: Callable[[], Awaitable[httpx.Response]]) -> None:
    """Slack retries what was not acknowledged (a refused connection while the bot restarts, a
    5xx); a person clicks again. Both are the same request again."""
    deadline = time.monotonic() + 60
    while True:
        try:
            response = await send()
            if response.status_code == 200:
                return
            assert response.status_code >= 500, response.status_code
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail("the bot never acknowledged a request")
        await asyncio.sleep(0.3)


def _thread(standin: SlackStandIn, ts: str) -> list[Message]:
    return [m for m in standin.bot_messages(CHANNEL) if m.thread_ts == ts]


def _approval(messages: list[Message]) -> list[Message]:
    return [m for m in messages if is_request(m)]


def _said(messages: list[Message]) -> list[str]:
    """What each reply message says, its tool timeline left out: a message that was edited
    rather than streamed (after a restart) lists the timeline in its text."""
    marks = tuple(TASK_MARKS.values())
    return [
        "\n".join(line for line in m.text.splitlines() if not line.startswith(marks)).strip()
        for m in messages
        if not is_request(m)
    ]


def _complete(standin: SlackStandIn, ts: str, kind: str) -> bool:
    messages = _thread(standin, ts)
    return _said(messages) == EXPECTED[kind] and not any(m.streaming for m in messages)


def _right(standin: SlackStandIn, ts: str, kind: str, user: str) -> bool:
    """Complete, with one approval message showing who approved it and no buttons left."""
    messages = _thread(standin, ts)
    approvals = _approval(messages)
    return (
        _complete(standin, ts, kind)
        and len(approvals) == 1
        and f"Approved by <@{user}>" in approvals[0].text
        and not buttons_of(approvals[0])
    )


@pytest.fixture
def soak_db_url(request: pytest.FixtureRequest, database: str) -> str:
    """Picked lazily by a sync fixture, so the database's setup runs off the test's loop."""
    url: str = request.getfixturevalue(f"{database}_url")
    return url


@pytest.mark.long
@pytest.mark.timeout(KILLING + SETTLE + 120)
@pytest.mark.parametrize(
    ("database", "serving"),
    [("postgres", WEB_AND_WORKER), ("postgres", ONE_PROCESS), ("sqlite", ONE_PROCESS)],
    ids=["postgres-web+worker", "postgres-one-process", "sqlite-one-process"],
)
async def test_approvals_survive_a_process_killed_at_random(
    soak_db_url: str, tmp_path: Path, database: str, serving: str
) -> None:
    db_url = soak_db_url
    seed = int(os.environ.get("BOT_TEST_SOAK_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    effects = tmp_path / "effects.log"
    effects.touch()
    print(f"soak seed {seed} ({serving}, {database})")  # rerun with BOT_TEST_SOAK_SEED

    async with SlackStandIn() as standin, Fleet(serving, db_url, standin.api_url, effects) as fleet:
        slack = SlackDriver(f"http://127.0.0.1:{fleet.port}", SECRET, standin=standin)
        threads: dict[str, tuple[str, str]] = {}  # ts -> (kind, requester)
        answered: set[str] = set()
        killing = asyncio.Event()

        async def mention(i: int) -> None:
            kind = "hold" if i % 2 else "refund"
            user = f"U0P{i:03d}"
            ts = slack.new_ts()
            threads[ts] = (kind, user)
            event = slack.mention_event(user, f"{kind} order {i}", channel=CHANNEL, ts=ts)
            standin.add_user_message(CHANNEL, ts, user, event["text"], None)
            await _like_slack(lambda: slack.post_event(event))
            if rng.random() < 0.3:  # Slack's own retry of a delivered event
                await _like_slack(lambda: slack.post_event(event, retry_num=1))

        async def answer(ts: str, user: str, message: Message) -> None:
            # People take a while: by then the thread's renderer has usually gone idle.
            await asyncio.sleep(rng.uniform(0.0, 4.0))
            approve, _ = buttons(message)
            clicks = 2 if rng.random() < 0.2 else 1  # an impatient double click
            for _ in range(clicks):
                await _like_slack(
                    lambda: slack.click(
                        user, approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
                    )
                )

        async def approve_what_appears() -> None:
            async with asyncio.TaskGroup() as people:
                while True:
                    for ts, (_, user) in list(threads.items()):
                        found = _approval(_thread(standin, ts))
                        if ts in answered or not found or not buttons_of(found[0]):
                            continue
                        answered.add(ts)
                        people.create_task(answer(ts, user, found[0]))
                    await asyncio.sleep(0.1)

        async def kill_at_random() -> None:
            await killing.wait()
            stop_at = time.monotonic() + KILLING
            while time.monotonic() < stop_at or fleet.kills < KILLS:
                await asyncio.sleep(rng.uniform(0.5, 3.0))
                await fleet.kill_and_restart()

        story = (standin, db_url, fleet, threads)
        approver = asyncio.create_task(approve_what_appears())
        killer = asyncio.create_task(kill_at_random())
        try:
            killing.set()
            for i in range(MENTIONS):
                await mention(i)
                await asyncio.sleep(rng.uniform(0.1, 0.6))
            await killer
            await _until(
                lambda: all(_complete(standin, ts, k) for ts, (k, _) in threads.items()),
                SETTLE,
                "every mention gets its complete reply",
                lambda: _story(*story),
            )
            await rendered_out(db_url)  # a doubled post, if there were one, has landed by now
        finally:
            approver.cancel()
            killer.cancel()
            for task in (approver, killer):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await slack.aclose()

        assert fleet.kills >= KILLS, "the soak killed too little to prove anything"
        if not all(_right(standin, ts, kind, user) for ts, (kind, user) in threads.items()):
            pytest.fail(f"a thread is not as it should be:\n{await _story(*story)}")
        posted = standin.calls_to("chat.postMessage") + standin.calls_to("chat.startStream")
        assert len(posted) >= sum(len(EXPECTED[k]) + 1 for k, _ in threads.values())

    calls = effects.read_text().splitlines()
    assert len(calls) == len(set(calls)), "a provider call ran twice"
    store = await SqlStore.open(db_url)
    try:
        uncertain = await store.list_receipts(status=ReceiptStatus.UNCERTAIN)
        holds = [ts for ts, (kind, _) in threads.items() if kind == "hold"]
        keys = {
            r.session
            for r in await store.list_receipts(status=ReceiptStatus.COMPLETED)
            if r.session in {session_key("T0DEMO", CHANNEL, ts) for ts in holds}
        }
    finally:
        await store.close()
    assert len(keys) + len(uncertain) == len(holds)
    assert len(calls) >= len(keys)
    print(f"soak: {fleet.kills} kills, {len(calls)} provider calls, {len(uncertain)} uncertain")


def buttons_of(message: Message) -> bool:
    return any(b.get("type") == "actions" for b in message.blocks or [])
