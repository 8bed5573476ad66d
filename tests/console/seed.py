"""A real database holding what the operator console shows, made by running real turns through
the engine with the scripted model (no rows written by hand): for each of two workspaces, T1 and
T2, a finished conversation with a model step and a tool step (whose arguments and result carry
a Slack token, which the console must scrub), a turn parked on a person's approval, a write whose
receipt is uncertain (the gateway timed out), a failed turn, and a turn queued with no worker to
run it (a stuck turn).

`await seed(url)` on a migrated, empty database; it returns the keys and ids it made. The browser
tests reuse it, so its names stay stable. The queued turn stays queued only while no worker runs
turns on that database: serve the console with `RUN_TURNS=false` (a web-only process), or the
bot's recovery sweep runs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent import (
    Agent,
    InboundEvent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    ToolContext,
    Usage,
    tool,
)
from storage import SqlStore
from tests.support.confirmations import turn_and_approve

TEAMS = ("T1", "T2")
SECRET = "xoxb-112233445566-secret0console0token"
"""A Slack bot token in a tool's arguments and result: the console shows `[redacted]`."""

ADMIN_TOKEN = "console-admin-token-0123456789"
T1_TOKEN = "console-ana-t1-token-0123456789"
T2_TOKEN = "console-bob-t2-token-0123456789"
TOKENS: dict[str, dict[str, Any]] = {
    ADMIN_TOKEN: {"name": "root", "teams": None},
    T1_TOKEN: {"name": "ana", "teams": ["T1"]},
    T2_TOKEN: {"name": "bob", "teams": ["T2"]},
}
CONSOLE_TOKENS = json.dumps(TOKENS)
"""`CONSOLE_TOKENS` for a bot serving the seeded database: an operator of every workspace, one
of T1 only (ana) and one of T2 only (bob)."""


@dataclass(frozen=True, kw_only=True)
class TeamSeed:
    """What was made in one workspace: session keys (`slack:<team>:<channel>:<ts>`) and ids."""

    team: str
    speaker: str
    """The Slack user id who spoke every turn here."""
    done: str
    done_turn: str
    """Completed: a model step calling `lookup_order`, the tool step, the model's reply."""
    parked: str
    parked_turn: str
    """Suspended on `refund_order`'s `request_input` (id `approve`)."""
    paying: str
    receipt_key: str
    """The session and key (`charge:<order>`) of the uncertain receipt."""
    paying_turn_ids: tuple[str, str]
    """The turn that proposed the charge, then the one that ran it once approved."""
    failed: str
    failed_turn: str
    stuck: str
    stuck_turn: str
    """Queued, never started."""

    @property
    def sessions(self) -> list[str]:
        return [self.done, self.parked, self.paying, self.failed, self.stuck]


@dataclass(frozen=True, kw_only=True)
class Seeded:
    t1: TeamSeed
    t2: TeamSeed
    secret: str = SECRET

    def team(self, name: str) -> TeamSeed:
        return self.t1 if name == "T1" else self.t2


@tool
async def lookup_order(order: str, api_key: str) -> dict[str, Any]:
    """Look an order up (the model passes a credential it should not have: scrubbed on show)."""
    return {"order": order, "status": "shipped", "echo": f"used {api_key}"}


@tool
async def refund_order(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once the requester approves."""
    approved = await ctx.request_input(
        id="approve", prompt=f"Refund order {order}?", schema={"type": "boolean"}
    )
    return {"refunded": approved is True}


@tool(effect="write", confirmation="required")
async def charge(order: str, ctx: ToolContext) -> Any:
    """Charge a card (the gateway times out: the receipt is left uncertain)."""

    async def call(authority: Any) -> Any:
        raise TimeoutError("gateway timeout")

    return (await ctx.run_effect(order, call)).value


AGENT = Agent(
    name="console-seed",
    instructions="Help with orders.",
    tools=[lookup_order, refund_order, charge],
)


def session_key(team: str, channel: str, ts: str) -> str:
    return f"slack:{team}:{channel}:{ts}"


def said(team: str, channel: str, ts: str, user: str, text: str) -> InboundEvent:
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=True),
        context={"team": team, "channel": channel, "thread_ts": ts},
    )


def _usage(i: int, o: int) -> Usage:
    return Usage(input_tokens=i, output_tokens=o)


def _run(store: SqlStore, replies: list[ScriptedReply]) -> Runtime:
    """A runtime that runs only the sessions it is asked to (no recovery sweep: the stuck turn
    of another session stays queued)."""
    return Runtime(store, ScriptedModel(replies), agent=AGENT, poll_interval=0.02)


async def _team(store: SqlStore, team: str, n: int) -> TeamSeed:
    speaker = f"U{n}SPEAKER"
    base = 1_700_000_000 + n * 1000
    ts = {
        name: f"{base + i}.000100"
        for i, name in enumerate(("done", "park", "pay", "fail", "stuck"))
    }
    ch = {name: f"C{n}{name.upper()}" for name in ts}
    keys = {name: session_key(team, ch[name], ts[name]) for name in ts}
    ids = {name: f"{team.lower()}-{name}-turn" for name in ts}

    def event(name: str, text: str) -> InboundEvent:
        return said(team, ch[name], ts[name], speaker, text)

    rt = _run(
        store,
        [
            ScriptedReply(
                text="Looking it up.",
                tool_calls=[
                    ToolCall(
                        id="c1", name="lookup_order", input={"order": "o-1", "api_key": SECRET}
                    )
                ],
                usage=_usage(120, 30),
            ),
            ScriptedReply(text="Order o-1 has shipped.", usage=_usage(200, 12)),
        ],
    )
    try:
        await rt.session(AGENT, keys["done"]).turn(
            event("done", "where is order o-1?"), turn_id=ids["done"]
        )
    finally:
        await rt.close()

    rt = _run(
        store,
        [
            ScriptedReply(
                tool_calls=[ToolCall(id="r1", name="refund_order", input={"order": "o-2"})]
            )
        ],
    )
    try:
        parking = rt.session(AGENT, keys["park"])
        await parking.start(event("park", "refund o-2 please"), turn_id=ids["park"])
        await parking.result(ids["park"])  # parked: it waits for the speaker's answer
    finally:
        await rt.close()

    rt = _run(
        store,
        [
            ScriptedReply(tool_calls=[ToolCall(id="p1", name="charge", input={"order": "o-3"})]),
            ScriptedReply(text="The charge is uncertain."),
        ],
    )
    try:
        await turn_and_approve(
            rt.session(AGENT, keys["pay"]),
            event("pay", "charge o-3"),
            turn_id=ids["pay"],
            by=speaker,
        )
    finally:
        await rt.close()

    rt = _run(store, [])  # no reply scripted: the model call fails, and the turn with it
    try:
        await rt.session(AGENT, keys["fail"]).start(event("fail", "hello?"), turn_id=ids["fail"])
        await rt.session(AGENT, keys["fail"]).result(ids["fail"])
    finally:
        await rt.close()

    queued = Runtime(store, ScriptedModel(), agent=AGENT, run_turns=False)
    try:
        await queued.session(AGENT, keys["stuck"]).start(
            event("stuck", "anyone there?"), turn_id=ids["stuck"]
        )
    finally:
        await queued.close()

    return TeamSeed(
        team=team,
        speaker=speaker,
        done=keys["done"],
        done_turn=ids["done"],
        parked=keys["park"],
        parked_turn=ids["park"],
        paying=keys["pay"],
        receipt_key="charge:o-3",
        paying_turn_ids=(ids["pay"], f"confirm:{ids['pay']}:p1"),
        failed=keys["fail"],
        failed_turn=ids["fail"],
        stuck=keys["stuck"],
        stuck_turn=ids["stuck"],
    )


async def seed(store_url: str) -> Seeded:
    """Fill the (migrated, empty) database at `store_url`; the keys and ids made."""
    store = await SqlStore.open(store_url)
    try:
        t1 = await _team(store, "T1", 1)
        t2 = await _team(store, "T2", 2)
    finally:
        await store.close()
    return Seeded(t1=t1, t2=t2)
