"""Many workers under chaos: the bot's real processes (one `bot serve` with `RUN_TURNS=false`,
several `bot worker`s) on a PostgreSQL and a Redis of their own, people talking to it through
the Slack stand-in, and a conductor that kills workers, restarts Redis and restarts PostgreSQL
while they do.

Each session is a thread of three turns, one after the other (`CHAOS_REPLIES`): "refund" parks
for the requester, who clicks Approve; "hold" proposes a write the requester confirms (its
provider call, a turn of its own, is counted in an fsynced file); "note" writes a row in the
step's own transaction. A person sends the next turn once the thread shows the previous one
complete, clicks what asks for their answer (sometimes twice), clicks again when an answer got
"try again" (the database was away), and Slack retries what was not acknowledged, sometimes
a delivered event too.

The conductor's phases: SIGKILL a random worker every `kill_every` seconds for `killing`
seconds, each restarted at once as a supervisor would; then Redis stopped and started again
(empty) while new sessions arrive; then PostgreSQL stopped (immediate: as if it crashed) and
started again while more arrive. Then everything must settle within `settle` seconds.

`check` then holds the run to: every thread shows exactly the replies of its turns, in order,
each in one message, and every approval once, answered; every turn completed exactly once and
none left queued, running or parked; each turn's messages in the log once; every provider call
once (or its receipt left uncertain for an operator, never retried blindly); every local write
exactly once. Used by `tests/integration/test_many_workers.py` (CI size) and
`python -m bench.many_workers` (the issue's full size).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from agent import ReceiptStatus
from bot.slack.inbound import session_key
from bot.slack.rendering.parts import TASK_MARKS
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message, is_request
from storage import SqlStore, upgrade_database
from tests.bot.agents import CHAOS_REPLIES, EFFECTS_FILE, NOTES_DDL, NOTES_TABLE
from tests.bot.harness import SECRET, buttons, rendered_out
from tests.bot.processes import Process, spawn
from tests.support.private_services import PrivatePostgres, PrivateRedis, free_port
from tests.support.slack_story import Moment, thread_calls, thread_record

TEAM = "T0DEMO"
TURNS = ("refund", "hold", "note")
TURN_ROWS = {"refund": 1, "hold": 2, "note": 1}
"""Turn rows per kind of message: a confirmed hold runs as a turn of its own."""
LOG_ROLES: dict[str, Counter[str]] = {
    "refund": Counter(user=1, assistant=2, tool=2),
    "hold": Counter(user=1, assistant=2, tool=1),
    "confirm": Counter(trigger=1, assistant=2, tool=1),
    "note": Counter(user=1, assistant=2, tool=1),
}
"""What each turn leaves in the message log; a message appended twice shows here."""


class ChaosFailure(AssertionError):
    """The run broke a promise; the message tells the story of the first threads it broke."""


@dataclass(frozen=True, kw_only=True)
class ChaosPlan:
    sessions: int = 40
    workers: int = 3
    killing: float = 20.0
    """Seconds during which, every `kill_every` seconds, a random worker that is up (done
    starting) is SIGKILLed and started again at once. A worker takes a few seconds to start on
    a busy machine, so when all are starting a tick kills nothing."""
    kill_every: float = 1.0
    outage: float = 2.0
    """Seconds Redis, then PostgreSQL, stay down."""
    waves: tuple[float, float, float] = (0.6, 0.2, 0.2)
    """Shares of the sessions that start during the killing, the Redis restart and the
    PostgreSQL restart."""
    settle: float = 120.0
    """Bound, after the PostgreSQL restart, for every session to finish."""
    lease_ttl: float = 2.0
    seed: int = 0

    def wave(self, index: int) -> range:
        bounds = [0]
        for share in self.waves:
            bounds.append(min(self.sessions, bounds[-1] + round(share * self.sessions)))
        bounds[-1] = self.sessions
        return range(bounds[index], bounds[index + 1])


@dataclass
class Outcome:
    kills: int = 0
    restarts: dict[str, float] = field(default_factory=dict)
    """What was restarted and how long it took, in seconds."""
    seconds: float = 0.0
    settled_after: float = 0.0
    """Seconds from the PostgreSQL restart until every session was done."""
    turns: int = 0
    provider_calls: int = 0
    uncertain: int = 0
    notes: int = 0
    clicks: int = 0


async def like_slack(send: Callable[[], Awaitable[httpx.Response]], within: float = 120) -> None:
    """Slack retries what was not acknowledged (a refused connection, a 5xx); a person clicks
    again. Both are the same request again."""
    deadline = time.monotonic() + within
    while True:
        try:
            response = await send()
            if response.status_code == 200:
                return
            if response.status_code < 500:
                raise ChaosFailure(f"the bot refused a request: {response.status_code}")
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise ChaosFailure("the bot never acknowledged a request")
        await asyncio.sleep(0.3)


def said(messages: list[Message]) -> list[str]:
    """What each reply message says, its tool timeline left out (an edited message lists the
    timeline in its text; a streamed one keeps it apart)."""
    marks = tuple(TASK_MARKS.values())
    return [
        "\n".join(line for line in m.text.splitlines() if not line.startswith(marks)).strip()
        for m in messages
        if not is_request(m)
    ]


def approvals(messages: list[Message]) -> list[Message]:
    return [m for m in messages if is_request(m)]


def has_buttons(message: Message) -> bool:
    return any(b.get("type") == "actions" for b in message.blocks or [])


def expected_replies(kinds: tuple[str, ...]) -> list[str]:
    return [text for kind in kinds for text in CHAOS_REPLIES[kind]]


class Workforce:
    """One web process and `workers` worker processes; a worker can be killed and restarted.
    `start_workers=False`: only the web process at first (`start_workers()` later)."""

    def __init__(
        self,
        db_url: str,
        api_url: str,
        *,
        workers: int,
        env: dict[str, str],
        lease_ttl: float,
        script: str = "chaos_model",
        agent: str = "CHAOS_AGENT",
        timing: str = "fast",
        start_workers: bool = True,
        log: Path | None = None,
    ) -> None:
        """`log`: the file the processes' logs go to (else this process's stderr)."""
        self.db_url, self.api_url, self.env = db_url, api_url, env
        self.log = log
        self.lease_ttl = lease_ttl
        self.script, self.agent, self.timing = script, agent, timing
        self.starts_workers = start_workers
        self.port = free_port()
        self.moments: list[Moment] = []
        self.kills = 0
        self._stack = contextlib.AsyncExitStack()
        self._workers: list[tuple[Process, contextlib.AsyncExitStack] | None] = [None] * workers
        self._starting: set[asyncio.Task[None]] = set()

    def _spawn(self, role: str) -> contextlib.AbstractAsyncContextManager[tuple[Process, int]]:
        return spawn(
            role,
            self.db_url,
            self.api_url,
            self.script,
            port=self.port if role == "web" else 0,
            agent=self.agent,
            lease_ttl=self.lease_ttl,
            timing=self.timing,
            env=self.env,
            started_within=120,
            log=self.log,
        )

    async def __aenter__(self) -> Workforce:
        try:
            await self._stack.enter_async_context(self._spawn("web"))
            if self.starts_workers:
                await self.start_workers()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def start_workers(self) -> None:
        await asyncio.gather(*(self._start(i) for i in range(len(self._workers))))

    async def __aexit__(self, *exc: object) -> None:
        for task in self._starting:
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        for index in range(len(self._workers)):
            await self._stop(index)
        await self._stack.aclose()

    @property
    def app_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _start(self, index: int) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            proc, _ = await stack.enter_async_context(self._spawn("worker"))
        except BaseException:
            await stack.aclose()
            raise
        self._workers[index] = (proc, stack)

    async def _stop(self, index: int) -> None:
        running = self._workers[index]
        self._workers[index] = None
        if running is not None:
            await running[1].aclose()

    def running(self) -> list[int]:
        return [i for i, w in enumerate(self._workers) if w is not None]

    async def kill(self, index: int) -> None:
        """SIGKILL worker `index` and start it again in the background (a supervisor)."""
        running = self._workers[index]
        if running is None:
            return
        proc, stack = running
        self._workers[index] = None
        proc.send_signal(signal.SIGKILL)
        self.moments.append((time.time(), f"SIGKILL worker {index} (pid {proc.pid})"))
        self.kills += 1
        await proc.wait()
        await stack.aclose()
        task = asyncio.create_task(self._start(index))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def all_running(self, within: float = 120) -> None:
        async with asyncio.timeout(within):
            while self._starting:
                await asyncio.gather(*self._starting)

    def note(self, what: str) -> None:
        self.moments.append((time.time(), what))


class People:
    """The people of every session: each mentions the bot, answers what it asks, and goes on to
    the next turn once the thread shows the last one complete."""

    def __init__(
        self, standin: SlackStandIn, slack: SlackDriver, rng: random.Random, within: float
    ) -> None:
        self.standin, self.slack, self.rng = standin, slack, rng
        self.within = within
        self.threads: dict[int, tuple[str, str, str]] = {}
        """session index -> (channel, root ts, user)."""
        self.done: dict[int, float] = {}
        self.clicks = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.failures: list[BaseException] = []

    def channel(self, i: int) -> str:
        return f"C0MW{i:04d}"

    def thread(self, i: int) -> list[Message]:
        channel, root, _ = self.threads[i]
        return [m for m in self.standin.bot_messages(channel) if m.thread_ts == root]

    def start(self, sessions: range, over: float = 1.0) -> None:
        """Start `sessions`, their first messages spread over `over` seconds."""
        for i in sessions:
            delay = self.rng.uniform(0.0, over)
            task = asyncio.create_task(self._session(i, delay), name=f"person:{i}")
            self._tasks.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.failures.append(task.exception())  # type: ignore[arg-type]

    async def wait(self, within: float) -> bool:
        """Until every started session is done (True) or `within` passes (False)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=within)
        return not self._tasks

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _session(self, i: int, delay: float) -> None:
        await asyncio.sleep(delay)
        user, channel = f"U0P{i:04d}", self.channel(i)
        root = self.slack.new_ts()
        self.threads[i] = (channel, root, user)
        for n, kind in enumerate(TURNS):
            ts = root if n == 0 else self.slack.new_ts()
            thread_ts = None if n == 0 else root
            event = self.slack.mention_event(
                user, f"{kind} order {i}", channel=channel, ts=ts, thread_ts=thread_ts
            )
            self.standin.add_user_message(channel, ts, user, event["text"], thread_ts)
            await like_slack(lambda event=event: self.slack.post_event(event))  # type: ignore[misc]
            if self.rng.random() < 0.2:  # Slack's own retry of a delivered event
                await like_slack(
                    lambda event=event: self.slack.post_event(event, retry_num=1)  # type: ignore[misc]
                )
            await self._until_shown(i, TURNS[: n + 1])
        self.done[i] = time.monotonic()

    async def _until_shown(self, i: int, kinds: tuple[str, ...]) -> None:
        """Answer what asks for an answer until the thread shows `kinds` complete."""
        channel, root, user = self.threads[i]
        want = expected_replies(kinds)
        clicked: dict[str, float] = {}
        deadline = time.monotonic() + self.within
        while True:
            messages = self.thread(i)
            shown = said(messages)
            if (
                shown == want
                and not any(m.streaming for m in messages)
                and not any(has_buttons(m) for m in approvals(messages))
            ):
                return
            for message in approvals(messages):
                last = clicked.get(message.ts)
                if not has_buttons(message) or (last is not None and time.monotonic() < last):
                    continue
                # People take a moment; one who clicked and still sees the buttons (the answer
                # got "try again") clicks again a while later. They click the button they saw,
                # even if the request was answered while they paused (`message` is the stand-in's
                # own record, updated in place: read its buttons before the pause).
                approve, _ = buttons(message)
                clicked[message.ts] = time.monotonic() + 6.0
                await asyncio.sleep(self.rng.uniform(0.1, 1.5))
                for _ in range(2 if self.rng.random() < 0.15 else 1):
                    self.clicks += 1
                    await like_slack(
                        lambda m=message, a=approve: self.slack.click(  # type: ignore[misc]
                            user, a, channel=channel, message_ts=m.ts, thread_ts=root
                        )
                    )
            if time.monotonic() > deadline:
                raise ChaosFailure(f"session {i}: {kinds[-1]} never completed; shows {shown}")
            await asyncio.sleep(0.25)


DATABASE = "bot_chaos"


async def prepare_database(postgres: PrivatePostgres) -> str:
    """The bot's database on the private server: migrated, with the notes table."""
    url = await asyncio.to_thread(postgres.create_database, DATABASE)
    await upgrade_database(url)
    await asyncio.to_thread(_create_notes, postgres.conninfo(DATABASE))
    return url


def _create_notes(conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(NOTES_DDL)


async def run_chaos(
    plan: ChaosPlan,
    postgres: PrivatePostgres,
    redis: PrivateRedis,
    workdir: Path,
    *,
    say: Callable[[str], None] = print,
) -> Outcome:
    """The whole run, then `check`; raises `ChaosFailure` with the story of what broke."""
    rng = random.Random(plan.seed)
    db_url = await prepare_database(postgres)
    effects = workdir / "effects.log"
    effects.touch()
    env = {"REDIS_URL": redis.url, EFFECTS_FILE: str(effects)}
    outcome = Outcome()
    began = time.monotonic()
    async with (
        SlackStandIn() as standin,
        Workforce(
            db_url,
            standin.api_url,
            workers=plan.workers,
            env=env,
            lease_ttl=plan.lease_ttl,
            log=workdir / "processes.log",
        ) as fleet,
        SlackDriver(fleet.app_url, SECRET, standin=standin) as slack,
    ):
        people = People(standin, slack, rng, within=plan.killing + plan.settle + 60)
        try:
            say(f"chaos: {plan.sessions} sessions x {len(TURNS)} turns, {plan.workers} workers")
            people.start(plan.wave(0), over=plan.killing * 0.6)
            stop_at = time.monotonic() + plan.killing
            while time.monotonic() < stop_at:
                await asyncio.sleep(plan.kill_every)
                choices = fleet.running()
                if choices:
                    await fleet.kill(rng.choice(choices))
                _raise_first(people)
            await fleet.all_running()
            say(f"chaos: {fleet.kills} kills; restarting Redis")

            people.start(plan.wave(1))
            await asyncio.sleep(1.0)
            outcome.restarts["redis"] = await _outage(fleet, "Redis", redis.stop, redis.start, plan)
            await asyncio.sleep(1.0)
            say("chaos: restarting PostgreSQL")
            people.start(plan.wave(2))
            await asyncio.sleep(1.0)
            outcome.restarts["postgres"] = await _outage(
                fleet, "PostgreSQL", lambda: postgres.stop("immediate"), postgres.start, plan
            )
            restarted = time.monotonic()
            if not await people.wait(plan.settle):
                _raise_first(people)
                waiting = sorted(set(people.threads) - set(people.done))
                raise ChaosFailure(
                    f"not settled within {plan.settle:.0f} s: {len(waiting)} sessions, "
                    f"e.g. {waiting[:10]}"
                )
            _raise_first(people)
            outcome.settled_after = time.monotonic() - restarted
            await rendered_out(db_url)  # a doubled post, if there were one, has landed by now
        except ChaosFailure as failure:
            broken = [i for i in people.threads if not _right(people, i)][:3]
            raise ChaosFailure(
                f"{failure}\n{await _story(people, db_url, fleet, broken)}"
            ) from None
        finally:
            await people.close()
        outcome.kills = fleet.kills
        outcome.clicks = people.clicks
        problems = [i for i in sorted(people.threads) if not _right(people, i)]
        if problems:
            raise ChaosFailure(
                f"{len(problems)} threads not as they should be\n"
                + await _story(people, db_url, fleet, problems[:3])
            )
        await check(outcome, people, db_url, postgres, effects, plan)
    outcome.seconds = time.monotonic() - began
    return outcome


async def _outage(
    fleet: Workforce,
    name: str,
    stop: Callable[[], None],
    start: Callable[[], Any],
    plan: ChaosPlan,
) -> float:
    began = time.monotonic()
    fleet.note(f"{name} stopped")
    await asyncio.to_thread(stop)
    await asyncio.sleep(plan.outage)
    await asyncio.to_thread(start)
    fleet.note(f"{name} started")
    return time.monotonic() - began


def _raise_first(people: People) -> None:
    if people.failures:
        raise people.failures[0]


def _right(people: People, i: int) -> bool:
    """The thread shows every turn's replies, in order, and two approvals, both answered."""
    if i not in people.done:
        return False
    messages = people.thread(i)
    _, _, user = people.threads[i]
    shown = approvals(messages)
    return (
        said(messages) == expected_replies(TURNS)
        and not any(m.streaming for m in messages)
        and len(shown) == 2
        and all(f"Approved by <@{user}>" in m.text and not has_buttons(m) for m in shown)
    )


async def _story(people: People, db_url: str, fleet: Workforce, sessions: list[int]) -> str:
    told: list[str] = []
    for i in sessions:
        channel, root, _ = people.threads[i]
        told.append(f"--- session {i} ({channel}): {[m.text for m in people.thread(i)]}")
        told += thread_calls(people.standin, channel, root, fleet.moments)
        with contextlib.suppress(Exception):
            told += await thread_record(db_url, session_key(TEAM, channel, root))
    if fleet.log is not None:
        told.append(f"(the processes' logs: {fleet.log})")
    return "\n".join(told)


async def check(
    outcome: Outcome,
    people: People,
    db_url: str,
    postgres: PrivatePostgres,
    effects: Path,
    plan: ChaosPlan,
) -> None:
    """The database's side: turns, message log, effects, local writes."""
    keys = {session_key(TEAM, channel, root) for channel, root, _ in people.threads.values()}
    assert len(keys) == plan.sessions
    rows = await asyncio.to_thread(_read_database, postgres)
    statuses = Counter(status for _, _, status, _ in rows["turns"])
    if set(statuses) != {"completed"}:
        raise ChaosFailure(f"turns not all completed: {dict(statuses)}")
    per_session = Counter(key for key, _, _, _ in rows["turns"])
    want = sum(TURN_ROWS.values())
    wrong = {k: n for k, n in per_session.items() if k in keys and n != want}
    if wrong or set(per_session) != keys:
        raise ChaosFailure(f"turn rows per session (want {want}): {wrong or per_session}")
    outcome.turns = len(rows["turns"])

    roles: dict[tuple[str, str], Counter[str]] = {}
    call_ids: Counter[tuple[str, str, str]] = Counter()
    for key, turn_id, role, body in rows["messages"]:
        roles.setdefault((key, turn_id), Counter())[role] += 1
        if role == "tool":
            call_ids[(key, turn_id, str(json.loads(body).get("call_id")))] += 1
    kinds = {(key, turn_id): _kind(turn_id, text) for key, turn_id, _, text in rows["turns"]}
    for turn, counted in roles.items():
        if counted != LOG_ROLES[kinds[turn]]:
            raise ChaosFailure(f"turn {turn} logged {dict(counted)}, want {LOG_ROLES[kinds[turn]]}")
    doubled = [c for c, n in call_ids.items() if n > 1]
    if doubled or len(roles) != outcome.turns:
        raise ChaosFailure(f"tool results twice: {doubled[:5]}; turns logged {len(roles)}")

    notes = Counter(session for session, _ in rows["notes"])
    if set(notes) != keys or set(notes.values()) != {1}:
        raise ChaosFailure(f"local writes per session (want 1 each): {notes}")
    outcome.notes = len(rows["notes"])

    calls = (await asyncio.to_thread(effects.read_text)).splitlines()
    if len(calls) != len(set(calls)):
        twice = [c for c, n in Counter(calls).items() if n > 1]
        raise ChaosFailure(f"a provider call ran twice: {twice[:5]}")
    store = await SqlStore.open(db_url)
    try:
        done = {r.session for r in await store.list_receipts(status=ReceiptStatus.COMPLETED)}
        uncertain = {r.session for r in await store.list_receipts(status=ReceiptStatus.UNCERTAIN)}
    finally:
        await store.close()
    if (done | uncertain) != keys or done & uncertain:
        raise ChaosFailure(
            f"receipts: {len(done)} completed + {len(uncertain)} uncertain for {len(keys)} holds"
        )
    called = {line.split(" ", 1)[0] for line in calls}
    if not done <= called:
        raise ChaosFailure(f"completed receipts without a provider call: {done - called}")
    outcome.provider_calls, outcome.uncertain = len(calls), len(uncertain)


def _kind(turn_id: str, opening: str) -> str:
    if turn_id.startswith("confirm:"):
        return "confirm"
    return next(kind for kind in TURNS if f"{kind} order" in opening)


def _read_database(postgres: PrivatePostgres) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(postgres.conninfo(DATABASE)) as conn:
        turns = conn.execute(
            "SELECT session_key, turn_id, status, input FROM turns ORDER BY id"
        ).fetchall()
        messages = conn.execute(
            "SELECT session_key, turn_id, role, body FROM messages ORDER BY session_key, idx"
        ).fetchall()
        notes = conn.execute(f"SELECT session, turn_id FROM {NOTES_TABLE}").fetchall()
    return {"turns": turns, "messages": messages, "notes": notes}
