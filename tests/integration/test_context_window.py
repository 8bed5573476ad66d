"""A long session: the model sees the recent end of it (`context_messages`), cut where a turn
starts, and a worker resuming the session reads only that much; message indexes and the steps
keyed by them stay absolute, so a turn replayed from such a tail commits nothing twice."""

from __future__ import annotations

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    UserMessage,
    tool,
)

RUNS: list[str] = []


@tool
async def approve_thing(thing: str, ctx: ToolContext) -> str:
    """Ask the requester before doing the thing."""
    RUNS.append(f"asked:{thing}")
    answer = await ctx.request_input(id="go", prompt=f"Do {thing}?", answerers=None)
    RUNS.append(f"answered:{thing}:{answer}")
    return f"{thing}: {answer}"


def _model() -> ScriptedModel:
    chatter = {f"hello {n}": [ScriptedReply(text=f"hi {n}")] for n in range(1, 6)}
    return ScriptedModel(
        by_opening={
            **chatter,
            "do it": [
                ScriptedReply(
                    tool_calls=[ToolCall(id="a", name="approve_thing", input={"thing": "x"})]
                ),
                ScriptedReply(text="Done."),
            ],
        }
    )


async def test_the_model_sees_the_recent_end_and_a_resumed_turn_commits_once(
    store: SessionStore,
) -> None:
    RUNS.clear()
    agent = Agent(name="a", instructions="x", tools=[approve_thing])
    model = _model()
    options = {"recovery_interval": 0.05, "poll_interval": 0.02, "context_messages": 6}
    async with Runtime(store, model, agent=agent, **options) as rt:
        session = rt.session(agent, "s1")
        for n in range(1, 6):  # five turns of two messages: indexes 0-9
            await session.turn(f"hello {n}")
        parked = await session.result(await session.start("do it"))
    assert parked.status == TurnStatus.SUSPENDED
    # "do it" opened at 10: the six latest reach back to 5, inside the turn opened at 4
    [first] = [
        r
        for r in model.requests
        if r.messages[-1] == UserMessage(turn_id=parked.turn_id, text="do it")
    ]
    assert [m.text for m in first.messages if isinstance(m, UserMessage)] == [
        "hello 3",
        "hello 4",
        "hello 5",
        "do it",
    ]

    # A new process resumes it: it reads the tail, not the session, and the answer's replay
    # lands every message at the index after the last one.
    model = _model()
    async with Runtime(store, model, agent=agent, **options) as rt:
        session = rt.session(agent, "s1")
        await session.resume(parked.turn_id, "go", "yes")
        done = await session.result(parked.turn_id)
    assert (done.status, done.text) == (TurnStatus.COMPLETED, "Done.")
    assert RUNS == ["asked:x", "asked:x", "answered:x:yes"]
    [after] = model.requests
    assert isinstance(after.messages[0], UserMessage)
    assert len(after.messages) < 13
    transcript = await store.load_transcript("s1")
    assert [m.role for m in transcript[10:]] == ["user", "assistant", "tool", "assistant"]
    results = [m for m in transcript if isinstance(m, ToolMessage)]
    assert [m.result for m in results] == ["x: yes"]
    steps = await store.load_steps("s1", parked.turn_id)
    assert {"model:11", "tool:11:a", "model:13"} <= set(steps)


async def test_turns_run_back_to_back_by_one_worker_each_see_only_the_recent_end(
    store: SessionStore,
) -> None:
    """A worker that finds several turns queued runs them one after another on the transcript it
    loaded once: each still sees only the recent end, as a worker resuming there would. (Found
    under load: a turn queued before the worker looked again for one ran on everything since
    the worker began, more history each time.)"""
    agent = Agent(name="a", instructions="x")
    model = _model()
    async with Runtime(store, model, agent=agent, run_turns=False) as web:
        session = web.session(agent, "s1")
        ids = [await session.start(f"hello {n}") for n in range(1, 6)]
    options = {"recovery_interval": 0.05, "poll_interval": 0.02, "context_messages": 2}
    async with Runtime(store, model, agent=agent, **options) as worker:
        session = worker.session(agent, "s1")
        results = [await session.result(turn_id) for turn_id in ids]
    assert [r.status for r in results] == [TurnStatus.COMPLETED] * 5
    seen = [
        [m.text for m in request.messages if isinstance(m, UserMessage)]
        for request in model.requests
    ]
    # the two latest before each turn are the previous turn's two messages: from its opening
    assert seen == [["hello 1"], *[[f"hello {n - 1}", f"hello {n}"] for n in range(2, 6)]]
