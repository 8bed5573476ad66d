"""Rendering under Slack's limits: rate limits, stream expiry, refused streaming."""

from __future__ import annotations

import pytest

from bot.slack.rendering import RenderSettings
from tests.bot.agents import AGENT, GATE, GATED, SIMPLE, model
from tests.bot.harness import eventually, idle, replies

CHANNEL = "C0REND"
pytestmark = pytest.mark.usefixtures("serving")


class FakeClock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_a_429_storm_still_delivers_the_final_text(db_url, launch, standin):
    standin.fail("chat.startStream", "ratelimited", times=3, retry_after=1)
    standin.fail("chat.stopStream", "ratelimited", times=2, retry_after=1)
    app = await launch(db_url, AGENT, model(SIMPLE))
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)

    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)), within=40)
    await eventually(lambda: idle(standin, CHANNEL), within=20)
    [reply] = replies(standin, CHANNEL)
    assert reply.text == "Hello from the agent."
    limited = [c for c in standin.calls if c.status == 429]
    assert len(limited) == 5
    started = [c for c in standin.calls_to("chat.startStream") if c.status == 200]
    assert len(started) == 1


async def test_a_long_turn_rolls_over_to_a_new_message(db_url, launch, standin):
    GATE.clear()
    clock = FakeClock()
    render = RenderSettings(
        flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0, stream_max_age=270
    )
    app = await launch(db_url, AGENT, model(GATED), render=render, clock=clock)
    await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    await eventually(lambda: any("First part" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: "slow" in GATE)

    clock.now += 301  # five minutes later, Slack would no longer take this stream
    GATE["slow"].set()
    await eventually(lambda: any("Second part" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    first, second = replies(standin, CHANNEL)
    assert "First part of the answer." in first.text
    assert "Second part" not in first.text
    assert second.text.startswith("Second part after the long call.")
    assert second.tasks["c_gate"]["status"] == "complete"
    assert len(standin.calls_to("chat.startStream")) == 2
    assert len(standin.calls_to("chat.stopStream")) == 2


async def test_a_stream_slack_stopped_accepting_continues_with_chat_update(db_url, launch, standin):
    standin.fail("chat.stopStream", "not_in_streaming_state")
    app = await launch(db_url, AGENT, model(SIMPLE))
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: standin.calls_to("chat.update"))
    await eventually(lambda: idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert reply.text.startswith("Hello from the agent.")


async def test_where_streaming_is_refused_the_reply_is_posted_and_edited(db_url, launch, standin):
    standin.fail("chat.startStream", "error:not_allowed_token_type")
    app = await launch(db_url, AGENT, model(SIMPLE))
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    [reply] = replies(standin, CHANNEL)
    assert reply.text.startswith("Hello from the agent.")
    assert len(standin.calls_to("chat.postMessage")) == 1
    assert reply.metadata["event_payload"]["post_key"].endswith("|reply|0")
