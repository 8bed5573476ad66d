"""An envelope whose payload is not a JSON object (`null`, a list, a number, a string) is
one Slack never sends for a real event: like any payload of a shape Slack never sends, it is
acknowledged and does nothing, so Slack does not deliver it again and again, and it raises
nothing (slack_sdk's own parsing refuses it, which logged a traceback and left it unacknowledged).
The connection keeps working: the next mention is one turn and one reply."""

from __future__ import annotations

from pathlib import Path

from agent import TurnStatus
from bot.testing.socket_mode import APP_TOKEN
from tests.bot.harness import eventually, idle, rendered_out, replies
from tests.bot.processes import spawn
from tests.bot.test_socket_mode import CHANNEL, HELLO, mention, slack, turns_of  # noqa: F401

UNREADABLE = [None, [], 42, "text"]


async def test_an_envelope_without_an_object_payload_is_acknowledged_and_ignored(
    db_url,
    standin,
    socket,
    slack,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    log = tmp_path / "socket.log"
    env = {"SLACK_APP_TOKEN": APP_TOKEN}
    async with spawn("socket", db_url, standin.api_url, "SIMPLE", None, env=env, log=log):
        sent = [await socket.send("events_api", payload) for payload in UNREADABLE]
        for envelope in sent:
            ack = await envelope.wait_acked()
            assert ack.payload is None
        ts, envelope = await mention(slack, socket, "hello")
        await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    [reply] = replies(standin, CHANNEL)
    assert reply.text == HELLO
    assert [t.status for t in await turns_of(db_url, ts)] == [TurnStatus.COMPLETED]
    assert socket.problems == []
    assert all(len(e.acks) == 1 and e.attempts == 1 for e in sent), "acknowledged once, first time"
    output = log.read_text()
    assert "Traceback" not in output, output
