"""Agents, tools and store wrappers shared by the engine tests.

Tools record each invocation in a side file (not the engine's store), so a test can tell how many
times a step really ran, independently of what the engine believes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from agent import Agent, ScriptedReply, ToolCall, ToolContext, tool
from agent.seams import Lease, StepCommit, StoreHandle

RUN_LOG_ENV = "BOT_TEST_RUN_LOG"


def record_run(name: str) -> None:
    path = os.environ.get(RUN_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(name + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def read_runs(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@tool
def create_order(item: str, quantity: int, ctx: ToolContext) -> dict[str, Any]:
    """Place an order through the store handle (exactly once with the step)."""
    record_run("create_order")
    conn: Connection = ctx.store.unwrap()
    conn.execute(text("create table if not exists test_orders (item text, quantity integer)"))
    conn.execute(
        text("insert into test_orders (item, quantity) values (:i, :q)"), {"i": item, "q": quantity}
    )
    return {"item": item, "quantity": quantity}


@tool
async def lookup_stock(item: str) -> dict[str, Any]:
    """Read stock (remote, at-least-once)."""
    record_run("lookup_stock")
    return {"item": item, "stock": 7}


ORDER_AGENT = Agent(name="orders", instructions="Place orders.", tools=[lookup_stock, create_order])

ORDER_SCRIPT = [
    ScriptedReply(
        text=["Let me ", "check."],
        tool_calls=[
            ToolCall(id="a", name="lookup_stock", input={"item": "mug"}),
            ToolCall(id="b", name="create_order", input={"item": "mug", "quantity": 2}),
        ],
    ),
    ScriptedReply(text=["Ordered ", "2 mugs."]),
]


@tool
async def fetch_part(part: str, seconds: float) -> dict[str, Any]:
    """Fetch a part's record (remote, at-least-once); takes `seconds`."""
    record_run(f"fetch_part:{part}")
    await asyncio.sleep(seconds)
    return {"part": part}


PARTS_AGENT = Agent(name="parts", instructions="Fetch parts.", tools=[fetch_part])

PARTS_SCRIPT = [
    ScriptedReply(
        text=["Fetching ", "three."],
        tool_calls=[  # they finish y, z, x: out of call order
            ToolCall(id="x", name="fetch_part", input={"part": "x", "seconds": 0.6}),
            ToolCall(id="y", name="fetch_part", input={"part": "y", "seconds": 0.0}),
            ToolCall(id="z", name="fetch_part", input={"part": "z", "seconds": 0.3}),
        ],
    ),
    ScriptedReply(text=["Fetched ", "3 parts."]),
]
"""A three-call batch of one remote tool, for the concurrent engine's crash tests."""


@tool
async def ask_approval(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Ask host code to approve an order (remote: it parks the turn until answered)."""
    record_run(f"ask_approval:{order}")
    approved = await ctx.request_input(id="approve", prompt=f"Approve order {order}?")
    return {"order": order, "approved": approved}


ASKS_AGENT = Agent(name="asks", instructions="Ask.", tools=[fetch_part, ask_approval])

ASKS_SCRIPT = [
    ScriptedReply(
        text="Asking twice.",
        tool_calls=[
            ToolCall(id="a1", name="ask_approval", input={"order": "41"}),
            ToolCall(id="f", name="fetch_part", input={"part": "f", "seconds": 0.0}),
            ToolCall(id="a2", name="ask_approval", input={"order": "42"}),
        ],
    ),
    ScriptedReply(text="Both answered."),
]
"""Two calls that each ask a person beside one that does not: the turn parks on both."""


def count_orders(conn: Connection) -> int:
    exists = conn.execute(
        text(
            "select count(*) from information_schema.tables where table_name = 'test_orders'"
            if conn.dialect.name == "postgresql"
            else "select count(*) from sqlite_master where name = 'test_orders'"
        )
    ).scalar_one()
    if not exists:
        return 0
    return int(conn.execute(text("select count(*) from test_orders")).scalar_one())


class HookedStore:
    """Wraps a real store and calls `hook(stage, step_label)` around every commit.

    `stage` is "before" or "after"; the label is the step id, or "opening"/"final" for commits
    without one. A hook may raise to simulate the database going away at that exact point.
    """

    def __init__(self, inner: Any, hook: Callable[[str, str], None]) -> None:
        self._inner = inner
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @staticmethod
    def label(commit: StepCommit) -> str:
        if commit.step_id:
            return commit.step_id
        return "opening" if commit.turn_status == "running" else f"end:{commit.turn_status}"

    async def commit(self, lease: Lease, commit: StepCommit, ttl: float, now: float) -> Any:
        self._hook("before", self.label(commit))
        out = await self._inner.commit(lease, commit, ttl, now)
        self._hook("after", self.label(commit))
        return out

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], Any],
        build: Callable[[Any], StepCommit],
        ttl: float,
        now: float,
    ) -> Any:
        labels: list[str] = []

        def build_and_hook(value: Any) -> StepCommit:
            commit = build(value)
            labels.append(self.label(commit))
            self._hook("before", labels[0])
            return commit

        out = await self._inner.commit_local(lease, run, build_and_hook, ttl, now)
        self._hook("after", labels[0])
        return out
