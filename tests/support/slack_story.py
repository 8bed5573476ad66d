"""What happened in one Slack thread, for a failure message: every Web API call the stand-in saw
that touched the thread, in order, with the moments the test killed or restarted something, and
what the bot's database remembers of the thread (its delivery rows and its durable events).

A soak that fails once in a hundred runs is only worth its failure if the failure explains
itself; these are the lines to read first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from bot.testing import SlackStandIn
from storage import SqlStore
from storage.delivery.schema import delivery_posts
from storage.delivery.store import DeliveryStore

Moment = tuple[float, str]
"""(time.time(), what the test did then), e.g. a SIGKILL."""


def _short(value: Any, size: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "⏎")
    return text if len(text) <= size else text[: size - 1] + "…"


def _describe(args: dict[str, Any], response: dict[str, Any]) -> str:
    parts: list[str] = []
    for name in ("ts", "markdown_text", "text"):
        if args.get(name):
            parts.append(f"{name}={_short(args[name])}")
    chunks = args.get("chunks")
    if isinstance(chunks, str):
        chunks = json.loads(chunks)
    for chunk in chunks or []:
        if chunk.get("type") == "task_update":
            parts.append(f"task[{chunk.get('id')}]={chunk.get('status')}")
        else:
            parts.append(f"md={_short(chunk.get('text', ''), 40)}")
    if args.get("blocks"):
        parts.append("blocks")
    metadata = args.get("metadata")
    if metadata:
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        key = str((metadata.get("event_payload") or {}).get("post_key", ""))
        parts.append(f"key=…{key[-22:]}")
    outcome = "ok" if response.get("ok") else f"ERR {response.get('error')}"
    if response.get("ts") and not args.get("ts"):
        outcome += f" -> {response['ts']}"
    return " ".join(parts) + f" [{outcome}]"


def thread_calls(
    standin: SlackStandIn, channel: str, thread_ts: str, moments: Iterable[Moment] = ()
) -> list[str]:
    """The calls that touched the thread (posts into it, edits of its messages), one line each,
    merged with `moments`."""
    ours: set[str] = set()
    lines: list[tuple[float, str]] = [(at, f"==== {what}") for at, what in moments]
    for call in standin.calls:
        args, response = call.args, call.response or {}
        into = args.get("thread_ts") == thread_ts and args.get("channel") == channel
        on = args.get("ts") in ours
        if not (into or on):
            continue
        if into and response.get("ts"):
            ours.add(str(response["ts"]))
        status = "" if call.status == 200 else f" HTTP {call.status}"
        lines.append((call.at, f"{call.method}{status} {_describe(args, response)}"))
    lines.sort(key=lambda line: line[0])
    first = lines[0][0] if lines else 0.0
    return [f"+{at - first:7.3f} {text}" for at, text in lines]


async def thread_record(db_url: str, session: str) -> list[str]:
    """The session's delivery rows and durable events, one line each."""
    store = await SqlStore.open(db_url)
    delivery = await DeliveryStore.open(db_url)
    try:
        target = await delivery.get_target(session)
        lines = [f"target: {target}"]
        c = delivery_posts.c
        query = select(delivery_posts).where(c.session_key == session).order_by(c.opened_at)
        rows = await delivery._x.read(lambda conn: conn.execute(query).all())
        for row in rows:
            m = row._mapping
            key = str(m["post_key"]).split("|", 1)[-1]
            lines.append(
                f"post …{key[-40:]} state={m['state']} ts={m['ts']} mode={m['mode']} "
                f"body={_short(m['body'], 120)}"
            )
        for turn in await store.list_turns(session):
            lines.append(f"turn {turn.turn_id} {turn.status.value} kind={turn.kind.value}")
        for event in await store.read_events(session, 0, 500):
            data = event.model_dump(exclude={"session", "turn_id", "seq", "type"})
            lines.append(f"event {event.seq} {event.type} {event.turn_id[-12:]} {_short(data)}")
        return lines
    finally:
        await delivery.close()
        await store.close()
