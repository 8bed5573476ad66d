"""Retention end to end on SQLite and PostgreSQL: after a real prune, a re-delivered turn id is
replayed (no model call, no tool call, nothing appended), an effect key used again still calls
nothing, the next turn still sees the whole conversation, and a prune racing a new turn on the
same session takes nothing from it. `bot prune` is run as an operator runs it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from sqlalchemy import update

from agent import (
    Agent,
    ModelError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from bot.core.retention import Retention, run_prune
from storage import SqlStore
from storage.delivery.bodies import PostBody
from storage.delivery.store import DeliveryStore, Post, PostUpdate
from storage.sql.schema import turns
from tests.support import children
from tests.support.confirmations import turn_and_approve

KEY = "slack:T1:C1:500.0"
DAY = 86400.0
MONTH = Retention(older_than=30 * DAY)
LOOKUPS: list[str] = []
CHARGES: list[str] = []


@tool
async def lookup(order: str) -> dict[str, Any]:
    """What an order cost."""
    LOOKUPS.append(order)
    return {"order": order, "paid": 12.5}


@tool(effect="write", confirmation="required")
async def pay_back(order: str, ctx: ToolContext) -> Any:
    """Refund an order (once per order, whatever turn asks)."""

    async def refund(authority: Any) -> Any:
        CHARGES.append(authority.idempotency_key)
        return {"refund": f"R-{order}"}

    done = await ctx.run_effect(f"refund:{order}", refund)
    return done.value


class Script:
    """Replies by opening text; `closed` makes any further model call an error (the turn would
    fail), so a replay that called the model could not pass."""

    def __init__(self) -> None:
        self.closed = False
        self.model = ScriptedModel(responder=self.respond)

    def respond(self, request: Any, step: int) -> ScriptedReply:
        if self.closed:
            raise ModelError("the model was called after the prune")
        opening = next(m.text for m in reversed(request.messages) if m.role in ("user", "trigger"))
        last = request.messages[-1]
        if opening.startswith("look up"):
            if step == 0:
                return ScriptedReply(
                    tool_calls=[ToolCall(id="l", name="lookup", input={"order": "o1"})]
                )
            return ScriptedReply(text="o1 was paid 12.5")
        if opening.startswith("refund"):
            if step == 0:
                return ScriptedReply(
                    tool_calls=[ToolCall(id="p", name="pay_back", input={"order": "o1"})]
                )
            if (
                isinstance(last, ToolMessage)
                and last.result.get("status") == "confirmation_pending"
            ):
                return ScriptedReply(text="awaiting approval")
            return ScriptedReply(text="refunded")
        if opening == "slow":
            if step == 0:
                return ScriptedReply(tool_calls=[ToolCall(id="s", name="slow", input={})])
            return ScriptedReply(text="slow finished")
        return ScriptedReply(text="refunded")  # the turn acting on the approval


def _runtime(store: SqlStore, agent: Agent, script: Script) -> Runtime:
    return Runtime(store, script.model, agent=agent, recovery_interval=0.05, poll_interval=0.02)


AGENT = Agent(name="retention", instructions="x", tools=[lookup, pay_back])


async def test_after_a_prune_a_redelivered_turn_replays_and_a_reused_effect_key_calls_nothing(
    sql_store: SqlStore,
) -> None:
    store = sql_store
    LOOKUPS.clear()
    CHARGES.clear()
    script = Script()
    async with _runtime(store, AGENT, script) as rt:
        session = rt.session(AGENT, KEY)
        first = await session.turn("look up o1", turn_id="T1")
        refunded = await turn_and_approve(session, "refund o1", turn_id="T2")
        assert (first.text, refunded.text) == ("o1 was paid 12.5", "refunded")
        assert (LOOKUPS, CHARGES) == (["o1"], ["pay_back:refund:o1"])
        finished = [t.turn_id for t in await session.turns()]
        transcript = await store.load_transcript(KEY)

        report = await run_prune(store, None, MONTH, now=time.time() + 31 * DAY)

        assert report.counts.turns == len(finished) == 3  # T1, T2 and the approved follow-up
        assert report.counts.steps > 0
        assert report.counts.events > 0
        assert report.counts.receipts == 0
        for turn_id in finished:
            assert await session.steps(turn_id) == {}
        assert await store.read_events(KEY) == []
        assert await store.load_transcript(KEY) == transcript

        # Slack retries the first message after the prune: the tombstone answers.
        requests = len(script.model.requests)
        script.closed = True
        again = await session.turn("look up o1", turn_id="T1")
        restarted = await session.start("look up o1", turn_id="T1")
        replayed = await session.result(restarted)
        assert (again.replayed, replayed.replayed) == (True, True)
        assert again.text == replayed.text == first.text
        assert again.status is TurnStatus.COMPLETED
        assert len(script.model.requests) == requests
        assert LOOKUPS == ["o1"]
        assert await store.load_transcript(KEY) == transcript  # no second opening
        assert await store.read_events(KEY) == []

        # The same refund asked for again, approved again: the receipt (kept) answers it.
        script.closed = False
        reused = await turn_and_approve(session, "refund o1", turn_id="T3")
        assert reused.text == "refunded"
        assert CHARGES == ["pay_back:refund:o1"]
        results = [m.result for m in await store.load_transcript(KEY) if isinstance(m, ToolMessage)]
        assert results[-1] == {"refund": "R-o1"}
        # That turn's model saw the conversation from before the prune.
        seen = script.model.requests[requests].messages
        assert [m.model_dump() for m in seen[: len(transcript)]] == [
            m.model_dump() for m in transcript
        ]


async def test_a_prune_never_takes_anything_from_a_turn_running_on_the_same_session(
    sql_store: SqlStore,
) -> None:
    store = sql_store
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait until the test lets go."""
        entered.set()
        await release.wait()
        return "slow done"

    agent = Agent(name="retention", instructions="x", tools=[lookup, slow])
    script = Script()
    async with _runtime(store, agent, script) as rt:
        session = rt.session(agent, KEY)
        await session.turn("look up o1", turn_id="T1")
        before = time.time()  # T1 ended before this; what follows ends after it

        await session.start("slow", turn_id="T2")
        await asyncio.wait_for(entered.wait(), 30)
        counts, _ = await store.prune_history(before=before)
        assert (counts.turns, counts.held) == (0, 1)  # the session is live: T1 waits too
        assert len(await session.steps("T1")) > 0

        # Prunes racing every commit of T2 and the queueing of T3 on the same session.
        release.set()
        racing = [store.prune_history(before=before) for _ in range(5)]
        queued = session.start("look up o1", turn_id="T3")
        outcome = await asyncio.gather(*racing, queued)
        assert sum(c.turns for c, _ in outcome[:-1]) <= 1  # T1 at most once
        for turn_id in ("T2", "T3"):
            result = await session.result(turn_id)
            assert result.status is TurnStatus.COMPLETED, result
            assert len(await session.steps(turn_id)) >= 2  # its memo whole

        counts, _ = await store.prune_history(before=before)
        assert await session.steps("T1") == {}
        kept = {event.turn_id for event in await store.read_events(KEY)}
        assert kept == {"T2", "T3"}
        texts = [m.role for m in await store.load_transcript(KEY)]
        assert texts.count("user") == 3  # every opening is still in the transcript


async def _backdate(store: SqlStore, seconds: float) -> None:
    statement = update(turns).values(finished_at=turns.c.finished_at - seconds)
    await store.run_sync(lambda c: c.execute(statement), write=True)


async def test_bot_prune_as_an_operator_runs_it(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)
    try:
        async with _runtime(store, AGENT, Script()) as rt:
            session = rt.session(AGENT, KEY)
            await session.turn("look up o1", turn_id="T1")
            await session.turn("look up o1 again", turn_id="T2")
        await _backdate(store, 31 * DAY)
        steps_before = len(await store.load_steps(KEY, "T1"))

        base = ("prune", "--database-url", sql_url)
        dry = await children.run(
            "bot.cli.main", *base, "--older-than", "30d", "--dry-run", "--json"
        )
        assert dry.returncode == 0, dry.stderr
        counted = json.loads(dry.stdout)
        assert counted["dry_run"] is True
        assert (counted["turns"], counted["held"]) == (2, 0)
        assert counted["steps"] == 2 * steps_before
        assert len(await store.load_steps(KEY, "T1")) == steps_before  # a dry run changes nothing

        kept = await children.run("bot.cli.main", *base, "--older-than", "32d", "--json")
        assert json.loads(kept.stdout)["turns"] == 0  # they are 31 days old, not 32

        pruned = await children.run("bot.cli.main", *base, "--older-than", "30d", "--batch", "1")
        assert pruned.returncode == 0, pruned.stderr
        assert pruned.stdout.startswith("pruned 2 finished turn(s)")
        assert f"({counted['steps']} steps, {counted['events']} events)" in pruned.stdout
        assert await store.load_steps(KEY, "T1") == {}
        again = await children.run("bot.cli.main", *base, "--older-than", "30d", "--json")
        assert json.loads(again.stdout)["turns"] == 0
    finally:
        await store.close()


async def test_bot_prune_refuses_what_it_cannot_read_in_one_line(sql_url: str) -> None:
    base = ("prune", "--database-url", sql_url)
    for args, says in [
        (("--older-than", "30x"), "--older-than '30x' is not an age"),
        (("--older-than", "0d"), "--older-than '0d' is not an age"),
        (("--older-than", "30d", "--receipts-older-than", "soon"), "'soon' is not an age"),
        (("--older-than", "30d", "--batch", "0"), "--batch '0'"),
        ((), "give --older-than"),
    ]:
        ran = await children.run("bot.cli.main", *base, *args, env={"PRUNE_OLDER_THAN": ""})
        assert ran.returncode == 2, (args, ran.stderr)
        assert ran.stdout == ""
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1, ran.stderr
        assert lines[0].startswith("bot prune: ")
        assert says in lines[0]


async def test_only_finished_reply_bodies_go_from_the_delivery_tables(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)
    delivery = await DeliveryStore.open(sql_url, store=store)
    try:
        made = [
            ("reply", "closed", 100.0),  # the one that goes
            ("reply", "open", 100.0),  # a restart puts it back from its body
            ("reply", "closed", 300.0),  # too recent
            ("notice", "closed", 100.0),  # its row is what makes it post once
            ("approval", "closed", 100.0),  # a late click is answered from it
        ]
        for n, (kind, state, at) in enumerate(made):
            post = Post(
                post_key=f"k{n}",
                session_key=KEY,
                turn_id="T1",
                kind=kind,
                channel="C1",
                thread_ts="1.0",
                body=PostBody(text=f"body {n}"),
            )
            await delivery.begin_post(post, at)
            await delivery.update_post(PostUpdate(post_key=f"k{n}", state=state, ts=f"{n}.5"), at)

        assert await delivery.prune_posts(before=200.0, dry_run=True) == (1, None)
        assert (await delivery.get_post("k0")).body == PostBody(text="body 0")
        assert await delivery.prune_posts(before=200.0, limit=1) == (1, "k0")
        assert await delivery.prune_posts(before=200.0, after="k0", limit=1) == (0, None)
        bodies = {p.post_key: p.body for p in await delivery.posts(KEY)}
        assert bodies == {
            "k0": PostBody(),
            **{f"k{n}": PostBody(text=f"body {n}") for n in range(1, 5)},
        }
        stripped = await delivery.get_post("k0")
        assert (stripped.state, stripped.ts) == ("closed", "0.5")  # its row and ts stay
        assert await delivery.prune_posts(before=200.0) == (0, None)
    finally:
        await delivery.close()
        await store.close()
