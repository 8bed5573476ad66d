"""Cron: each scheduled time is one turn and one post, however many clocks run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from agent import Agent, Schedule, ScriptedModel, ScriptedReply
from bot.app import open_bot
from bot.core.asgi_server import BackgroundServer
from bot.core.clock import Clock, cron_session
from bot.core.cron import Cron, CronError
from bot.testing import SlackDriver
from tests.bot.agents import BOSS, REFUND, issue_refund, model
from tests.bot.harness import (
    FAST,
    SECRET,
    approval,
    buttons,
    eventually,
    rendered_out,
    replies,
    settings_for,
)

CHANNEL = "C0CRON"
SEED = "Morning summary, please."
AGENT = Agent(
    name="cron-test",
    instructions="Summarize.",
    schedules=[Schedule(name="daily", cron="0 9 * * *", seed=SEED, channel=CHANNEL)],
)


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


async def test_two_clocks_fire_a_schedule_once_and_post_once(db_url, standin):
    model = ScriptedModel(by_opening={SEED: [ScriptedReply(text="Morning! All quiet.")]})
    bots = [
        await open_bot(
            settings_for(db_url, standin), agent=AGENT, model=model, render_settings=FAST
        )
        for _ in range(2)
    ]
    try:
        for bot in bots:
            await bot.start()
        now = [at("2026-11-30T09:00:30")]
        clocks = [
            Clock(
                runtime=b.runtime,
                agent=AGENT,
                delivery=b.delivery,
                renderers=b.renderers,
                team="T0DEMO",
                now=lambda: now[0],
            )
            for b in bots
        ]
        fired = await asyncio.gather(*(c.tick() for c in clocks))
        key = cron_session("T0DEMO", AGENT.schedules[0])
        turns = await bots[0].runtime.store.list_turns(key)
        assert [t.turn_id for t in turns] == ["cron:daily:2026-11-30T09:00:00+00:00"]
        assert sum(len(f) for f in fired) >= 1
        assert turns[0].input.trigger.by == "cron:daily"

        def posts():
            return [m for m in standin.bot_messages(CHANNEL) if "All quiet" in m.text]

        await eventually(posts)
        # a restarted clock, twenty minutes on, finds the fire done
        now[0] = at("2026-11-30T09:20:00")
        assert await clocks[1].tick() == []
        # down over the next 9:00: the missed fire runs once when the clock is back in grace
        now[0] = at("2026-12-01T09:40:00")
        assert await clocks[0].tick() == ["cron:daily:2026-12-01T09:00:00+00:00"]
        assert await clocks[1].tick() == []
        await eventually(lambda: len(posts()) == 2)
        await rendered_out(db_url)  # a third post, if there were one, has come by now
        assert len(posts()) == 2
        assert all(m.thread_ts is None for m in posts())  # proactive: top of the channel
    finally:
        for bot in bots:
            await bot.close()


def test_cron_expressions():
    weekdays = Cron.parse("0 9 * * 1-5")
    assert weekdays.matches(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))  # a Monday
    assert not weekdays.matches(datetime(2026, 11, 29, 9, 0, tzinfo=UTC))  # a Sunday
    every = Cron.parse("*/15 8-10 * jan,dec *")
    assert every.matches(datetime(2026, 12, 1, 10, 45, tzinfo=UTC))
    assert not every.matches(datetime(2026, 11, 1, 10, 45, tzinfo=UTC))
    start = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    assert every.next_after(start) == datetime(2026, 12, 1, 8, 15, tzinfo=UTC)
    for bad in ("* * *", "61 * * * *", "a b c d e"):
        with pytest.raises(CronError):
            Cron.parse(bad)


def _cron_agent(answerers):
    return Agent(
        name="cron-approvals",
        instructions="Refund what is due.",
        tools=[issue_refund],
        schedules=[
            Schedule(
                name="refunds",
                cron="0 9 * * *",
                seed="Refund order 42.",
                channel=CHANNEL,
                answerers=answerers,
            )
        ],
    )


async def _fire(bot, agent):
    clock = Clock(
        runtime=bot.runtime,
        agent=agent,
        delivery=bot.delivery,
        renderers=bot.renderers,
        team="T0DEMO",
        now=lambda: at("2026-11-30T09:00:30"),
    )
    assert await clock.tick() == ["cron:refunds:2026-11-30T09:00:00+00:00"]


async def test_a_scheduled_turn_asks_only_the_answerers_its_schedule_names(db_url, standin):
    agent = _cron_agent({"user": BOSS})
    bot = await open_bot(
        settings_for(db_url, standin), agent=agent, model=model(REFUND), render_settings=FAST
    )
    server = await BackgroundServer(bot.http_app()).start()
    slack = SlackDriver(server.url, SECRET, standin=standin)
    try:
        await _fire(bot, agent)
        message = await eventually(lambda: approval(standin, CHANNEL))
        context = [
            e["text"] for b in message.blocks if b["type"] == "context" for e in b["elements"]
        ]
        assert f"Only <@{BOSS}> can answer." in context
        approve, _ = buttons(message)
        for who, team in (("U0ALICE", None), (BOSS, "T0OTHER")):
            await slack.click(who, approve, channel=CHANNEL, message_ts=message.ts, team_id=team)
        await eventually(lambda: len(standin.ephemerals) == 2)
        assert any(b["type"] == "actions" for b in message.blocks)

        await slack.click(BOSS, approve, channel=CHANNEL, message_ts=message.ts)
        await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
        assert f"Approved by <@{BOSS}>" in message.text
    finally:
        await slack.aclose()
        await server.stop()


async def test_a_scheduled_turn_that_names_nobody_cannot_ask(db_url, standin):
    """Nobody spoke, so nobody can answer as the speaker; anyone in the channel is no answer."""
    agent = _cron_agent(None)
    bot = await open_bot(
        settings_for(db_url, standin), agent=agent, model=model(REFUND), render_settings=FAST
    )
    await bot.start()
    try:
        await _fire(bot, agent)
        await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
        assert approval(standin, CHANNEL) is None
        key = cron_session("T0DEMO", agent.schedules[0])
        results = [
            m.result
            for m in await bot.runtime.store.load_transcript(key)
            if getattr(m, "role", "") == "tool" and m.name == "issue_refund"
        ]
        assert "not by a person" in results[0]["error"]
    finally:
        await bot.close()
