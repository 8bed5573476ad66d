"""`bot socket` end to end: a real Socket Mode process (`tests.bot.app_child --role socket`)
connected to the Socket Mode stand-in, which plays Slack's side of the websocket
(`bot.testing.socket_mode`) beside the Web API stand-in.

What holds over HTTP holds here: a mention is one turn and one streamed reply; clicks and the
reset command are answered with the same authorization; an envelope is acknowledged only once
its turn is queued durably, so a process killed before its ack loses nothing (Slack delivers the
event again, and it is the same turn); a redelivery, or the same message over HTTP and over the
socket, is one turn; and the connection comes back by itself after Slack refreshes it or it
drops, losing and doubling nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent import TurnStatus
from bot.slack.inbound import session_key
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.socket_mode import APP_TOKEN, Envelope, SocketModeStandIn
from storage import SqlStore
from tests.bot.agents import BOSS
from tests.bot.harness import (
    SECRET,
    TOKEN,
    approval,
    buttons,
    eventually,
    idle,
    rendered_out,
    replies,
)
from tests.bot.processes import Process, spawn, wait_line
from tests.support.children import run

CHANNEL = "C0SOCK"
TEAM = "T0DEMO"
HELLO = "Hello from the agent."


@pytest.fixture
async def slack(standin: SlackStandIn) -> AsyncIterator[SlackDriver]:
    """Builds Slack's payloads (and signs them, for the HTTP bot where there is one)."""
    async with SlackDriver("http://127.0.0.1:1", SECRET, standin=standin) as driver:
        yield driver


@contextlib.asynccontextmanager
async def socket_bot(
    db_url: str, standin: SlackStandIn, script: str = "SIMPLE", crash: str | None = None
) -> AsyncIterator[Process]:
    """`bot socket`, connected (it says so once its first connection is open)."""
    async with spawn(
        "socket", db_url, standin.api_url, script, crash, env={"SLACK_APP_TOKEN": APP_TOKEN}
    ) as (proc, _):
        yield proc


async def mention(
    slack: SlackDriver, socket: SocketModeStandIn, text: str, *, user: str = "U0ALICE"
) -> tuple[str, Envelope]:
    """A person mentions the bot: Slack's `app_mention` event, over the socket."""
    ts = slack.new_ts()
    slack.standin.add_user_message(CHANNEL, ts, user, f"<@U0BOT> {text}")  # type: ignore[union-attr]
    event = slack.mention_event(user, text, channel=CHANNEL, ts=ts)
    return ts, await socket.events_api(slack.envelope(event))


async def turns_of(db_url: str, ts: str) -> list[Any]:
    store = await SqlStore.open(db_url)
    try:
        return list(await store.list_turns(session_key(TEAM, CHANNEL, ts)))
    finally:
        await store.close()


async def test_a_mention_is_one_turn_and_one_streamed_reply(db_url, standin, socket, slack):
    async with socket_bot(db_url, standin):
        ts, envelope = await mention(slack, socket, "hello")
        # Slack also sends the `message` event of the same message: the same turn
        twin = slack.message_event("U0ALICE", "<@U0BOT> hello", channel=CHANNEL, ts=ts)
        second = await socket.events_api(slack.envelope(twin))
        await envelope.wait_acked()
        await second.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    [reply] = replies(standin, CHANNEL)
    assert reply.text == HELLO
    assert reply.thread_ts == ts
    assert reply.streamed  # chat.startStream / appendStream / stopStream, as over HTTP
    assert [t.status for t in await turns_of(db_url, ts)] == [TurnStatus.COMPLETED]
    assert standin.calls_to("apps.connections.open")[0].response["ok"]
    assert socket.problems == []
    assert envelope.ack is not None
    assert envelope.ack.payload is None


async def test_an_envelope_is_acknowledged_only_once_its_turn_is_queued(
    db_url, standin, socket, slack
):
    """The stand-in looks at the database the moment each ack arrives: the turn is there."""
    seen: list[int] = []

    async def on_ack(envelope: Envelope) -> None:
        ts = envelope.payload["event"]["ts"]
        seen.append(len(await turns_of(db_url, ts)))

    socket.on_ack = on_ack
    async with socket_bot(db_url, standin):
        for text in ("one", "two", "three"):
            _, envelope = await mention(slack, socket, text)
            await envelope.wait_acked()
        await eventually(lambda: len(replies(standin, CHANNEL)) == 3, 30)
    assert seen == [1, 1, 1]


async def test_a_process_killed_before_its_ack_loses_nothing_and_doubles_nothing(
    db_url, standin, socket, slack
):
    """SIGKILL after the turn is queued, before the ack: Slack delivers the event again on the
    next process's connection (`retry_attempt` 1), and it is the same turn, replied to once."""
    async with socket_bot(db_url, standin, crash="before-ack") as proc:
        ts, envelope = await mention(slack, socket, "hello")
        await wait_line(proc, "AT before-ack")
        assert len(await turns_of(db_url, ts)) == 1  # queued durably, not yet acknowledged
        proc.kill()
        await proc.wait()
    assert not envelope.acked

    async with socket_bot(db_url, standin):
        ack = await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert ack.attempt == 1  # the redelivery was acknowledged
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert [t.status for t in await turns_of(db_url, ts)] == [TurnStatus.COMPLETED]
    assert socket.opened == 2


async def test_an_envelope_whose_turn_could_not_be_queued_is_not_acknowledged(
    db_url, standin, socket, slack
):
    """The database fails as the turn is queued: no ack (over HTTP, a 5xx), so Slack delivers
    the event again, and that delivery is the turn."""
    async with socket_bot(db_url, standin, crash="enqueue-fails") as proc:
        ts, envelope = await mention(slack, socket, "hello")
        await wait_line(proc, "AT enqueue-failed")
        assert await turns_of(db_url, ts) == []
        await socket.redeliver(envelope)
        ack = await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)  # an ack of the failed delivery, if one were sent, is in
    assert ack.attempt == 1
    assert len(envelope.acks) == 1
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert len(await turns_of(db_url, ts)) == 1


async def test_slacks_redelivery_of_an_envelope_is_the_same_turn(db_url, standin, socket, slack):
    async with socket_bot(db_url, standin):
        ts, envelope = await mention(slack, socket, "hello")
        await envelope.wait_acked()
        await socket.redeliver(envelope)  # Slack did not see the ack in time
        await eventually(lambda: len(envelope.acks) == 2, 30)
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert len(await turns_of(db_url, ts)) == 1


async def test_the_same_message_over_http_and_the_socket_is_one_turn(
    db_url, standin, socket, slack
):
    """An app switched between HTTP and Socket Mode (or a second process on the same database)
    can get one message both ways."""
    async with (
        socket_bot(db_url, standin),
        spawn("one", db_url, standin.api_url, "SIMPLE") as (_, port),
        SlackDriver(f"http://127.0.0.1:{port}", SECRET, standin=standin) as http,
    ):
        ts, envelope = await mention(slack, socket, "hello")
        event = slack.mention_event("U0ALICE", "hello", channel=CHANNEL, ts=ts)
        (await http.post_event(event)).raise_for_status()
        await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert len(await turns_of(db_url, ts)) == 1


async def parked(slack: SlackDriver, socket: SocketModeStandIn, standin: SlackStandIn) -> Any:
    ts, envelope = await mention(slack, socket, "refund order 42")
    await envelope.wait_acked()
    message = await eventually(lambda: approval(standin, CHANNEL), 30)
    await eventually(lambda: idle(standin, CHANNEL), 30)
    return ts, message


async def test_approve_over_the_socket_answers_only_for_the_requester(
    db_url, standin, socket, slack
):
    async with socket_bot(db_url, standin, "REFUND"):
        ts, message = await parked(slack, socket, standin)
        approve, deny = buttons(message)
        for button in (approve, deny):
            click = slack.click_payload(
                "U0MALLORY", button, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
            )
            await (await socket.interactive(click)).wait_acked()
        await eventually(lambda: len(standin.ephemerals) == 2, 30)
        assert {e["user"] for e in standin.ephemerals} == {"U0MALLORY"}
        assert "can't answer" in standin.ephemerals[0]["text"]
        assert any(b["type"] == "actions" for b in message.blocks)

        click = slack.click_payload(
            "U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
        )
        await (await socket.interactive(click)).wait_acked()
        await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
        await eventually(lambda: idle(standin, CHANNEL), 30)
    assert "Approved by <@U0ALICE>" in message.text
    assert [t.status for t in await turns_of(db_url, ts)] == [TurnStatus.COMPLETED]
    assert socket.problems == []


async def test_deny_over_the_socket_asks_why_and_denies_with_the_reason(
    db_url, standin, socket, slack
):
    async with socket_bot(db_url, standin, "REFUND"):
        ts, message = await parked(slack, socket, standin)
        _, deny = buttons(message)
        click = slack.click_payload(
            "U0ALICE", deny, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
        )
        await (await socket.interactive(click)).wait_acked()
        (modal,) = await eventually(lambda: standin.modals, 30)
        assert modal.user == "U0ALICE"

        other = slack.submission_payload(BOSS, modal.id, {"reason": {"text": "x"}})
        await (await socket.interactive(other)).wait_acked()  # refused before its ack
        assert any(b["type"] == "actions" for b in message.blocks)
        submitted = slack.submission_payload("U0ALICE", modal.id, {"reason": {"text": "no"}})
        await (await socket.interactive(submitted)).wait_acked()
        await eventually(lambda: "Denied by <@U0ALICE>: no" in message.text, 30)
        await eventually(lambda: len(replies(standin, CHANNEL)) == 2 and idle(standin, CHANNEL))
    assert socket.problems == []


async def test_the_reset_command_over_the_socket(db_url, standin, socket, slack):
    async with socket_bot(db_url, standin):
        ts, envelope = await mention(slack, socket, "hello")
        await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        key = session_key(TEAM, CHANNEL, ts)
        form = slack.command_form(
            "U0ALICE", "/agent-reset", ts, channel=CHANNEL, response_url=standin.response_url("r1")
        )
        command = await socket.slash_command(form)
        ack = await command.wait_acked()
        assert ack.payload is not None
        assert "Resetting" in ack.payload["text"]
        said = await eventually(lambda: standin.responses, 30)
    assert said[0]["token"] == "r1"
    assert f"`{key}#g0`" in said[0]["text"]
    assert socket.problems == []


@pytest.mark.parametrize("how", ["refresh_requested", "warning", "closed", "cut"])
async def test_the_connection_comes_back_by_itself_losing_and_doubling_nothing(
    db_url, standin, socket, slack, how
):
    """Slack asks for a new connection (`disconnect`), closes one, or the network cuts it: the
    bot opens a new one with a new URL, and the envelopes sent meanwhile, and one that was in
    flight when the connection went, are each one turn and one reply."""
    async with socket_bot(db_url, standin):
        first_ts, first = await mention(slack, socket, "before")
        await first.wait_acked()
        if how in ("refresh_requested", "warning"):
            await socket.disconnect(how)
        else:
            await socket.drop(abrupt=how == "cut")
        during_ts, during = await mention(slack, socket, "during")  # queued, or sent on the new one
        await socket.connected(count=2, within=60)
        after_ts, after = await mention(slack, socket, "after")
        for envelope in (during, after):
            await envelope.wait_acked(within=60)
        await eventually(lambda: len(replies(standin, CHANNEL)) == 3 and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO] * 3
    for ts in (first_ts, during_ts, after_ts):
        assert len(await turns_of(db_url, ts)) == 1
    assert socket.issued >= 2  # every connection on a URL of its own
    assert socket.problems == []


async def test_an_envelope_whose_connection_drops_before_its_ack_is_delivered_again(
    db_url, standin, socket, slack
):
    async with socket_bot(db_url, standin):
        await socket.connected()
        ts, envelope = await mention(slack, socket, "hello")
        await socket.drop(abrupt=True)  # at once: the ack, if sent, went nowhere
        ack = await envelope.wait_acked(within=60)
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert envelope.attempts >= 1
    assert ack is envelope.acks[0]
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert len(await turns_of(db_url, ts)) == 1


@pytest.mark.parametrize(
    ("token", "code"),
    [
        ("xapp-1-A0DEMO-1-not0the0apps0token", "invalid_auth"),
        ("xoxb-test-token-123456", "not_allowed_token_type"),  # the bot token, pasted twice
    ],
)
async def test_a_refused_app_token_ends_bot_socket_with_one_line_naming_it(
    db_url, standin, socket, token, code
):
    env = {
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_APP_TOKEN": token,
        "SLACK_API_URL": standin.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-key-not-used-0000",
    }
    ran = await run("bot", "socket", env=env, within=60)
    assert ran.returncode == 2
    lines = [line for line in ran.stderr.splitlines() if not _log_line(line)]
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("bot socket: ")
    assert "Traceback" not in ran.stderr
    assert "SLACK_APP_TOKEN" in lines[0]
    assert f"({code})" in lines[0]
    assert token not in ran.stderr + ran.stdout
    assert socket.opened == 0


def _log_line(line: str) -> bool:
    """A JSON log line (the bot logs as JSON by default), not something it prints."""
    with contextlib.suppress(ValueError):
        return isinstance(json.loads(line), dict)
    return False


async def test_envelopes_slack_never_sends_or_no_listener_takes_are_acknowledged_and_ignored(
    db_url, standin, socket, slack
):
    """As over HTTP (a 200 that does nothing): unacknowledged, Slack would only send them
    again; and the bot goes on answering."""
    async with socket_bot(db_url, standin):
        junk = await socket.interactive({"type": "block_actions", "actions": []})
        shortcut = await socket.interactive(
            {
                "type": "shortcut",
                "token": "legacy-verification-token",
                "action_ts": "1700000000.000001",
                "team": {"id": TEAM, "domain": "demo"},
                "user": {"id": "U0ALICE", "username": "u0alice", "team_id": TEAM},
                "is_enterprise_install": False,
                "enterprise": None,
                "callback_id": "no_such_shortcut",
                "trigger_id": slack.trigger("U0ALICE"),
            }
        )
        for envelope in (junk, shortcut):
            ack = await envelope.wait_acked()
            assert ack.payload is None
        _, envelope = await mention(slack, socket, "hello")
        await envelope.wait_acked()
        await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), 30)
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO]
    assert socket.problems == []


async def test_socket_mode_turned_off_in_slack_ends_bot_socket_saying_so(db_url, standin, socket):
    """`disconnect` with `link_disabled`: reconnecting cannot help, so the process ends with
    one line saying what to do, instead of retrying for ever."""
    async with socket_bot(db_url, standin) as proc:
        await socket.disconnect("link_disabled")
        line = await wait_line(proc, "ENDED ", within=60)
        assert "link_disabled" in line
        assert "bot serve" in line
        assert await proc.wait() == 2


async def test_two_socket_processes_share_the_envelopes_each_one_turn(
    db_url, standin, socket, slack
):
    """Each process is a connection of the app's; Slack hands every envelope to one of them."""
    socket.spread = True
    async with socket_bot(db_url, standin), socket_bot(db_url, standin):
        await socket.wait_for(lambda: socket.live == 2)
        sent = [await mention(slack, socket, f"hello {n}") for n in range(4)]
        for _, envelope in sent:
            await envelope.wait_acked()
        await eventually(lambda: len(replies(standin, CHANNEL)) == 4 and idle(standin, CHANNEL), 30)
        await rendered_out(db_url)
    assert {e.connections[0] for _, e in sent} == {1, 2}
    assert [m.text for m in replies(standin, CHANNEL)] == [HELLO] * 4
    for ts, _ in sent:
        assert [t.status for t in await turns_of(db_url, ts)] == [TurnStatus.COMPLETED]
