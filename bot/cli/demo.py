"""`bot demo`: the offline demo, one ops assistant two ways. Nothing here needs a token.

The agent looks an order up, places a replacement (a local write, exactly-once with its step)
and refunds it (a remote call that parks until the requester approves); the scripted model
stands in for Anthropic.

- `bot demo` plays the whole Slack path: a local stand-in plays the Slack Web API and a driver
  plays Slack's side, sending signed events and clicks over HTTP to the bot served by uvicorn,
  exactly as in production: a mention → a reply streamed with its tool timeline (the agent
  session `processing`) → an approval → the requester's App Home inbox lists it → a click by
  someone not allowed (refused, ephemeral) → a click by the requester → the final reply with its
  feedback buttons, and a 👍 recorded; then a second thread where a long tool call is ended with
  Slack's Stop button; each printed as Slack would show it.
- `bot demo --engine` runs the same turn through the engine alone on SQLite, printing the
  events as a subscriber sees them, and answers the approval as host code.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

from pydantic import SecretStr
from sqlalchemy import Connection, text

from agent import (
    Agent,
    Model,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    TurnEvent,
    tool,
)
from bot.app import SlackBot, open_bot
from bot.core.asgi_server import BackgroundServer
from bot.core.settings import Settings
from bot.slack.rendering import RenderSettings
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message
from storage import SqlStore, upgrade_database

OPENING = "order 42 arrived broken, can you sort it out?"
TRACKING = "where is the replacement for order 42?"


@tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    """Read an order (remote, at-least-once, so it only reads)."""
    return {"order_id": order_id, "item": "blue mug", "paid": 18.5, "status": "delivered, broken"}


@tool
def create_order(item: str, quantity: int, ctx: ToolContext) -> dict[str, Any]:
    """Place an order; the row commits in the same transaction as the step."""
    conn: Connection = ctx.store.unwrap()
    conn.execute(text("create table if not exists demo_orders (item text, quantity integer)"))
    conn.execute(
        text("insert into demo_orders (item, quantity) values (:item, :q)"),
        {"item": item, "q": quantity},
    )
    return {"item": item, "quantity": quantity, "status": "placed"}


@tool
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once the requester approves it."""
    approved = await ctx.request_input(
        id="approve-refund",
        prompt=f"Approve a ${amount:.2f} refund on order {order_id}?",
        schema={"type": "boolean"},
    )
    if approved is not True:
        return {"refunded": False, "reason": ctx.answer_reason("approve-refund")}
    return {"refunded": True, "order_id": order_id, "amount": amount}


@tool
async def track_shipment(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Follow a shipment with the carrier (slow: it polls until the parcel moves, or until the
    turn is stopped)."""
    try:
        async with asyncio.timeout(60):
            await ctx.cancellation.wait()
    except TimeoutError:
        return {"order_id": order_id, "status": "still at the depot"}
    return {"order_id": order_id, "status": "stopped before the carrier answered"}


DEMO_AGENT = Agent(
    name="ops-demo",
    instructions="You help the ops team with orders and refunds.",
    tools=[lookup_order, create_order, issue_refund, track_shipment],
)

DEMO_SCRIPT = [
    ScriptedReply(
        text=["Let me look up ", "order 42."],
        tool_calls=[ToolCall(id="call_lookup", name="lookup_order", input={"order_id": "42"})],
    ),
    ScriptedReply(
        text=["The mug arrived broken: ", "I'll send a replacement ", "and refund the order."],
        tool_calls=[
            ToolCall(
                id="call_order", name="create_order", input={"item": "blue mug", "quantity": 1}
            ),
            ToolCall(
                id="call_refund", name="issue_refund", input={"order_id": "42", "amount": 18.5}
            ),
        ],
    ),
    ScriptedReply(
        text=[
            "Done: a replacement blue mug ",
            "is on its way and $18.50 ",
            "was refunded on order 42.",
        ]
    ),
]


TRACK_SCRIPT = [
    ScriptedReply(
        text=["Let me ask ", "the carrier…"],
        tool_calls=[ToolCall(id="call_track", name="track_shipment", input={"order_id": "42"})],
    ),
    ScriptedReply(text="The replacement is on its way."),
]


def _show(event: TurnEvent) -> None:
    match event.type:
        case "message.delta":
            sys.stdout.write(event.text)
        case "action.requested":
            sys.stdout.write(f"\n  → {event.call.name}({event.call.input})")
        case "action.completed":
            outcome = f"error: {event.error}" if event.error else event.result
            sys.stdout.write(f"\n  ← {event.name}: {outcome}\n")
        case "message.completed":
            sys.stdout.write("\n")
        case "progress.updated":
            pass  # the scripted demo model shows no progress
        case (
            "turn.started"
            | "input.requested"
            | "input.resolved"
            | "confirmation.requested"
            | "confirmation.resolved"
            | "approval.voted"
            | "approval.automatic"
            | "approval.reminded"
            | "approval.escalated"
            | "turn.completed"
            | "turn.failed"
            | "turn.cancelled"
        ):
            sys.stdout.write(f"[{event.seq:>3}] {event.type}\n")
        case _:
            assert_never(event.type)
    sys.stdout.flush()


async def run_engine_demo(database_url: str | None = None) -> int:
    """One turn through the engine alone, its events printed; without a URL, on a fresh SQLite
    file in a temporary folder (never the bot's own database)."""
    if database_url is None:
        with tempfile.TemporaryDirectory() as tmp:
            return await run_engine_demo(f"sqlite+aiosqlite:///{Path(tmp) / 'demo.db'}")
    await upgrade_database(database_url)  # on SQLite, its directory is made as the file is
    store = await SqlStore.open(database_url)
    try:
        async with Runtime(store, ScriptedModel(DEMO_SCRIPT), agent=DEMO_AGENT) as runtime:
            session = runtime.session(DEMO_AGENT, "demo:thread")
            await session.observe(_show)
            print(f"demo on {database_url.split('://')[0]} — session demo:thread\n")
            turn_id = await session.start(OPENING)
            parked = await session.result(turn_id)
            pending = await session.pending()
            if not pending:
                print(f"\nturn {turn_id[:8]}… {parked.status.value}: expected an approval")
                return 1
            for request in pending:
                print(f"\n  ? {request.prompt}  (host code answers: yes)")
                await session.resume(turn_id, request.id, True, by="demo-host")
            result = await session.result(turn_id)
            print(f"\nturn {turn_id[:8]}… {result.status.value}: {result.text}")
            print(f"usage: {result.usage.input_tokens} in / {result.usage.output_tokens} out")
            return 0 if result.status.value == "completed" else 1
    finally:
        await store.close()


SECRET = "demo-signing-secret"
CHANNEL = "C0DEMO"
NAMES = {"U0ALICE": "alice", "U0BOB": "bob"}


async def wait_until(check: Callable[[], bool], within: float = 20.0) -> None:
    """Poll the stand-in's record (it changes from HTTP handlers, not from anything awaitable)."""
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _approval(standin: SlackStandIn) -> Message | None:
    for message in standin.bot_messages(CHANNEL):
        if any(b.get("type") == "actions" for b in message.blocks or []):
            return message
    return None


@dataclass(frozen=True, kw_only=True)
class OfflineSlack:
    """The whole Slack path, offline: the stand-in playing Slack's Web API, the bot served over
    HTTP by uvicorn, and a driver playing Slack's side (signed events and clicks)."""

    standin: SlackStandIn
    bot: SlackBot
    driver: SlackDriver


@asynccontextmanager
async def offline_slack(database_url: str, model: Model) -> AsyncIterator[OfflineSlack]:
    """The demo agent behind the stand-in on `database_url` (migrated here), answered by
    `model`; `bot demo` and `bot sandbox` both run on it, so the sandbox is the demo's Slack."""
    await upgrade_database(database_url)
    async with SlackStandIn() as standin:
        settings = Settings(
            DATABASE_URL=database_url,
            SLACK_BOT_TOKEN=SecretStr("xoxb-offline-demo"),
            SLACK_SIGNING_SECRET=SecretStr(SECRET),
            SLACK_API_URL=standin.api_url,
        )
        bot = await open_bot(
            settings,
            agent=DEMO_AGENT,
            model=model,
            render_settings=RenderSettings(flush_interval=0.2, poll_interval=0.2),
        )
        server = await BackgroundServer(bot.http_app()).start()
        try:
            async with SlackDriver(server.url, SECRET, standin=standin) as slack:
                yield OfflineSlack(standin=standin, bot=bot, driver=slack)
        finally:
            await server.stop()


async def run_slack_demo(database_url: str | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        url = database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'demo.db'}"
        model = ScriptedModel(DEMO_SCRIPT, by_opening={TRACKING: TRACK_SCRIPT}, delta_delay=0.05)
        async with offline_slack(url, model) as offline:
            return await _story(offline.bot, offline.standin, offline.driver)


async def _story(bot: SlackBot, standin: SlackStandIn, slack: SlackDriver) -> int:
    print("Offline Slack demo: a stand-in Slack API, signed events over HTTP, the real engine.\n")
    thread = await slack.mention("U0ALICE", OPENING, channel=CHANNEL, twin=True)
    print("alice mentions the bot (Slack sends the app_mention and its message twin)…")
    await wait_until(lambda: _approval(standin) is not None)
    approval = _approval(standin)
    assert approval is not None
    assert approval.blocks is not None
    approve = next(b for b in approval.blocks if b["type"] == "actions")["elements"][0]
    print("\n" + standin.render_thread(CHANNEL, thread, NAMES))
    print(f"  agent session: {_session(standin, thread)}\n")

    if bot.home is not None:
        print("alice opens the bot's Home tab (her approval inbox)…")
        await slack.open_home("U0ALICE")
        await wait_until(lambda: "U0ALICE" in standin.home_views)
        print(standin.render_view(standin.home_views["U0ALICE"], NAMES) + "\n")

    print("bob clicks Approve (only alice may answer)…")
    await slack.click("U0BOB", approve, channel=CHANNEL, message_ts=approval.ts, thread_ts=thread)
    await wait_until(lambda: bool(standin.ephemerals))
    print(f"  ephemeral to bob: {standin.ephemerals[-1]['text']}\n")

    print("alice clicks Approve…")
    await slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=approval.ts, thread_ts=thread)
    await wait_until(lambda: any("refunded" in m.text for m in standin.bot_messages(CHANNEL)))
    await wait_until(lambda: not any(m.streaming for m in standin.bot_messages(CHANNEL)))
    print("\n" + standin.render_thread(CHANNEL, thread, NAMES))
    print(f"  agent session: {_session(standin, thread)}\n")

    final = next(m for m in standin.bot_messages(CHANNEL) if "refunded" in m.text)
    feedback = _feedback_buttons(final)
    if feedback is not None:
        print("alice clicks 👍 under the answer…")
        await slack.feedback(
            "U0ALICE", feedback, True, channel=CHANNEL, message_ts=final.ts, thread_ts=thread
        )
        rows = await bot.delivery.feedback()
        for row in rows:
            print(
                f"  stored: {NAMES.get(row.user_id, row.user_id)} said {row.value} (bot feedback)"
            )
        print()

    print("alice asks about the shipment in a new thread; the carrier is slow…")
    second = await slack.mention("U0ALICE", TRACKING, channel=CHANNEL)
    await wait_until(lambda: _session(standin, second).endswith("processing"))
    await wait_until(lambda: any("carrier" in m.text for m in _thread(standin, second)))
    print("\n" + standin.render_thread(CHANNEL, second, NAMES))
    print(f"  agent session: {_session(standin, second)} (Slack shows its Stop button)\n")
    print("alice clicks Stop…")
    await slack.stop("U0ALICE", channel=CHANNEL, thread_ts=second)
    await wait_until(lambda: any("stopped" in m.text for m in _thread(standin, second)))
    await wait_until(lambda: _session(standin, second).endswith("active"))
    print("\n" + standin.render_thread(CHANNEL, second, NAMES))
    print(f"  agent session: {_session(standin, second)}\n")

    methods: dict[str, int] = {}
    for call in standin.calls:
        methods[call.method] = methods.get(call.method, 0) + 1
    print("Slack API calls: " + ", ".join(f"{m} x{n}" for m, n in methods.items()))
    return 0


def _thread(standin: SlackStandIn, thread: str) -> list[Message]:
    return [m for m in standin.bot_messages(CHANNEL) if m.thread_ts == thread]


def _session(standin: SlackStandIn, thread: str) -> str:
    session = standin.session_of(CHANNEL, thread)
    if session is None:
        return "none"
    return f"“{session.title}”, " + " → ".join(session.history)


def _feedback_buttons(message: Message) -> dict[str, Any] | None:
    for block in message.blocks or []:
        if block.get("type") == "context_actions":
            return dict(block["elements"][0])
    return None
