"""The offline demo: one real turn through the engine on SQLite, with the scripted model standing
in for Anthropic, printing the events as a subscriber sees them. Nothing here needs a token."""

from __future__ import annotations

import sys
from typing import Any, assert_never

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    TurnEvent,
    tool,
)
from bot.demo_agent import create_order
from storage import SqlStore, upgrade_database


@tool
async def check_stock(item: str) -> dict[str, Any]:
    """Look up stock for an item. Remote tool: at-least-once, so it only reads."""
    return {"item": item, "in_stock": 12}


DEMO_AGENT = Agent(
    name="demo",
    instructions="You place orders for the team. Check stock before ordering.",
    tools=[create_order, check_stock],
)

DEMO_SCRIPT = [
    ScriptedReply(
        text=["Checking stock ", "and placing the order."],
        tool_calls=[
            ToolCall(id="call_stock", name="check_stock", input={"item": "blue mug"}),
            ToolCall(
                id="call_order", name="create_order", input={"item": "blue mug", "quantity": 2}
            ),
        ],
    ),
    ScriptedReply(text=["Done: ", "2 blue mugs ordered ", "(12 were in stock)."]),
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
        case (
            "turn.started"
            | "input.requested"
            | "confirmation.requested"
            | "confirmation.resolved"
            | "turn.completed"
            | "turn.failed"
            | "turn.cancelled"
        ):
            sys.stdout.write(f"[{event.seq:>3}] {event.type}\n")
        case _:
            assert_never(event.type)
    sys.stdout.flush()


async def run_demo(database_url: str) -> int:
    await upgrade_database(database_url)  # on SQLite, its directory is made as the file is
    store = await SqlStore.open(database_url)
    try:
        async with Runtime(store, ScriptedModel(DEMO_SCRIPT), agent=DEMO_AGENT) as runtime:
            session = runtime.session(DEMO_AGENT, "demo:thread")
            await session.observe(_show)
            print(f"demo on {database_url.split('://')[0]} — session demo:thread\n")
            result = await session.turn("Order two blue mugs, please.")
            print(f"\nturn {result.turn_id[:8]}… {result.status.value}: {result.text}")
            print(f"usage: {result.usage.input_tokens} in / {result.usage.output_tokens} out")
            return 0 if result.status.value == "completed" else 1
    finally:
        await store.close()
