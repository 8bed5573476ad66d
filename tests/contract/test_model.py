"""The `Model` contract, run against every implementation: `ScriptedModel`, `AnthropicModel`
(the real SDK against the Messages API stand-in) and a model written only to the Protocol.

The contract is what the turn loop relies on:
- text deltas, then exactly one `ModelReply`, last; the deltas after the last restart spell the
  reply's text (a renderer shows them, then the committed text);
- the stop reason is passed through, `tool_use` with tool calls, each with an id, a name and an
  input; an abnormal stop reaches the loop (as a reply or an `AbnormalStopError`), which refuses
  it;
- every failure surfaces as `ModelError`, whatever the adapter's own errors are;
- `StreamRestart` only before the reply (the adapter retried; what streamed is void);
- a consumer may stop reading at any point (a cancel between deltas): the stream is then closed
  the way the loop closes it (`model_stream`) without error, and the model keeps working.
The last group runs whole turns through the engine on each model, a refusal and a paused turn
among them (`agent._stops`): a refusal, even empty, ends the turn as declined, never as a
failure; a pause is continued by the next step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import (
    AbnormalStopError,
    Agent,
    AssistantMessage,
    ModelError,
    Runtime,
    TextBlock,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnEvent,
    TurnStatus,
    UserMessage,
    tool,
)
from agent._signals import CancelTurn
from agent._stops import DECLINED
from agent._turn_loop import model_stream
from agent.seams import (
    ModelEvent,
    ModelReply,
    ModelRequest,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
)
from storage import MemoryStore
from tests.support.anthropic_standin import AnthropicStandin
from tests.support.model_harnesses import (
    AnthropicHarness,
    DeferredHarness,
    ModelHarness,
    PlainHarness,
    RestartingHarness,
    Say,
    ScriptedHarness,
)

T = "turn-1"
LOOKUP = ToolSpec(name="lookup", description="Look a thing up.", input_schema={"type": "object"})
WEATHER = ToolSpec(name="weather", description="The weather.", input_schema={"type": "object"})
MODELS = ["scripted", "anthropic", "anthropic-legacy", "deferred", "plain"]
RESTARTING = ["anthropic", "anthropic-legacy", "deferred", "plain"]
"""`ScriptedModel` never retries, so it never restarts a stream."""
LEGACY_MODEL = "claude-sonnet-4-6"
"""The adapter on the old family's rules (thinking off unless asked, a budget, forced tools)."""


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


@pytest.fixture
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[ModelHarness]:
    match request.param:
        case "scripted":
            yield ScriptedHarness()
        case "plain":
            yield PlainHarness()
        case "anthropic" | "anthropic-legacy" | "deferred":
            api: AnthropicStandin = request.getfixturevalue("anthropic_server")
            api.reset()
            client = AsyncAnthropic(base_url=api.base_url, api_key="sk-ant-contract", max_retries=2)
            made = DeferredHarness if request.param == "deferred" else AnthropicHarness
            legacy = request.param == "anthropic-legacy"
            try:
                yield made(api, client, model_id=LEGACY_MODEL if legacy else "claude-test")
            finally:
                await client.close()
        case other:
            raise AssertionError(f"no harness {other!r}")


every_model = pytest.mark.parametrize("harness", MODELS, indirect=True)
restarting_model = pytest.mark.parametrize("harness", RESTARTING, indirect=True)


def ask(*messages: Any) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=messages or (UserMessage(turn_id=T, text="hi"),),
        tools=(LOOKUP, WEATHER),
    )


async def collect(harness: ModelHarness, request: ModelRequest | None = None) -> list[ModelEvent]:
    async with model_stream(harness.model, request or ask()) as stream:
        events = [event async for event in stream]
    well_formed(events)
    return events


async def collect_until_error(harness: ModelHarness) -> tuple[list[ModelEvent], BaseException]:
    events: list[ModelEvent] = []

    async def consume() -> None:
        async with model_stream(harness.model, ask()) as stream:
            async for event in stream:
                events.append(event)

    with pytest.raises(ModelError) as info:
        await consume()
    return events, info.value


def well_formed(events: Sequence[ModelEvent]) -> ModelReply:
    """Deltas (and restarts, and progress) then exactly one reply, last; the text deltas after
    the last restart spell its text, progress (`ThinkingDelta`) none of it."""
    assert events, "the stream ended without a reply"
    *before, last = events
    assert isinstance(last, ModelReply), f"the last event is {type(last).__name__}"
    assert all(isinstance(e, TextDelta | ThinkingDelta | StreamRestart) for e in before), before
    streamed = ""
    for event in before:
        if isinstance(event, StreamRestart):
            streamed = ""
        elif isinstance(event, TextDelta):
            streamed += event.text
    assert streamed == "".join(b.text for b in last.content if isinstance(b, TextBlock))
    return last


def deltas(events: Sequence[ModelEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


# -- one call ---------------------------------------------------------------------------------


@every_model
async def test_text_streams_as_deltas_then_one_reply(harness: ModelHarness) -> None:
    harness.say(Say(["Hello ", "there, ", "friend"]))

    events = await collect(harness)

    assert deltas(events) == ["Hello ", "there, ", "friend"]
    reply = well_formed(events)
    assert reply.content == (TextBlock(text="Hello there, friend"),)
    assert reply.stop_reason == "end_turn"


@every_model
async def test_tool_calls_carry_their_ids_names_and_inputs(harness: ModelHarness) -> None:
    nested = {"query": "mugs", "filters": {"colours": ["blue", "red"], "max": 3}}
    calls = [
        ToolCall(id="tu_a", name="lookup", input=nested),
        ToolCall(id="tu_b", name="weather", input={}),
    ]
    harness.say(Say(["Checking."], calls=calls))

    reply = well_formed(await collect(harness))

    assert reply.stop_reason == "tool_use"
    assert reply.content == (TextBlock(text="Checking."), *calls)


@every_model
@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence", "max_tokens", "refusal"])
async def test_the_stop_reason_is_passed_through(harness: ModelHarness, stop_reason: str) -> None:
    harness.say(Say(["Partial answer"], stop_reason=stop_reason))

    reply = well_formed(await collect(harness))

    assert reply.stop_reason == stop_reason
    assert reply.content == (TextBlock(text="Partial answer"),)


@every_model
async def test_an_empty_abnormal_stop_never_passes_as_a_normal_reply(
    harness: ModelHarness,
) -> None:
    harness.say(Say(stop_reason="max_tokens"))

    try:
        events = await collect(harness)
    except AbnormalStopError:
        return  # the adapter refused it itself (and could say which limit to raise)
    assert well_formed(events).stop_reason == "max_tokens"  # the loop refuses it then


@every_model
@pytest.mark.parametrize("after", [0, 1])
async def test_a_failure_surfaces_as_model_error_and_no_reply(
    harness: ModelHarness, after: int
) -> None:
    harness.fail(Say(["one ", "two ", "three"]), after=after)

    events, error = await collect_until_error(harness)

    assert harness.failure in str(error)
    assert not any(isinstance(e, ModelReply) for e in events)
    assert deltas(events) in ([], ["one "][:after])


@restarting_model
async def test_a_restart_comes_only_before_the_reply(harness: RestartingHarness) -> None:
    harness.restart(Say(["Hello ", "again, ", "friend"]), after=2)

    events = await collect(harness)

    kinds = [type(e).__name__ for e in events]
    assert kinds == ["TextDelta"] * 2 + ["StreamRestart"] + ["TextDelta"] * 3 + ["ModelReply"]
    assert well_formed(events).content == (TextBlock(text="Hello again, friend"),)


@every_model
async def test_a_stream_left_early_is_closed_and_the_model_goes_on(harness: ModelHarness) -> None:
    harness.say(Say([f"word{i} " for i in range(40)]), Say(["next"]))

    async with model_stream(harness.model, ask()) as stream:
        async for event in stream:
            assert isinstance(event, TextDelta)
            break
    if hasattr(stream, "aclose"):  # closed, not merely abandoned
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    assert deltas(await collect(harness)) == ["next"]


@every_model
async def test_a_stream_cut_by_a_cancel_is_closed_and_the_cancel_goes_through(
    harness: ModelHarness,
) -> None:
    harness.say(Say([f"word{i} " for i in range(40)]), Say(["next"]))

    async def cancelled_at_the_first_delta() -> None:
        async with model_stream(harness.model, ask()) as stream:
            async for _ in stream:
                raise CancelTurn("stop")

    with pytest.raises(CancelTurn):
        await cancelled_at_the_first_delta()

    assert deltas(await collect(harness)) == ["next"]


# -- whole turns ------------------------------------------------------------------------------


def looked_up(seen: list[dict[str, Any]]) -> Agent:
    @tool
    async def lookup(query: str, ctx: ToolContext) -> dict[str, Any]:
        """Look a thing up."""
        seen.append({"query": query, "call_id": ctx.call_id})
        return {"found": 2}

    return Agent(name="a", instructions="Look things up.", tools=[lookup])


def runtime(store: MemoryStore, harness: ModelHarness, agent: Agent) -> Runtime:
    return Runtime(store, harness.model, agent=agent, poll_interval=0.02)


@every_model
async def test_a_turn_with_a_tool_call_completes(harness: ModelHarness) -> None:
    seen: list[dict[str, Any]] = []
    agent = looked_up(seen)
    call = ToolCall(id="tu_1", name="lookup", input={"query": "mugs"})
    harness.say(Say(["Let me ", "look."], calls=[call]), Say(["Found ", "two."]))
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        result = await rt.session(agent, "s1").turn("How many mugs?")

    assert (result.status, result.text, result.error) == (TurnStatus.COMPLETED, "Found two.", None)
    assert seen == [{"query": "mugs", "call_id": "tu_1"}]
    transcript = await store.load_transcript("s1")
    assert [type(m).__name__ for m in transcript] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]
    assert isinstance(transcript[1], AssistantMessage)
    assert transcript[1].tool_calls == (call,)
    assert isinstance(transcript[2], ToolMessage)
    assert transcript[2].call_id == "tu_1"


@every_model
async def test_a_failing_model_fails_the_turn_and_commits_no_reply(harness: ModelHarness) -> None:
    agent = Agent(name="a", instructions="x")
    harness.fail(Say(["one ", "two"]), after=1)
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        result = await rt.session(agent, "s1").turn("hi")

    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("ModelError: ")
    assert harness.failure in result.error
    assert [type(m).__name__ for m in await store.load_transcript("s1")] == ["UserMessage"]


@every_model
async def test_an_empty_abnormal_stop_fails_the_turn(harness: ModelHarness) -> None:
    agent = Agent(name="a", instructions="x")
    harness.say(Say(stop_reason="max_tokens"))
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        result = await rt.session(agent, "s1").turn("hi")

    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("AbnormalStopError: ")
    assert "max_tokens" in result.error
    assert [type(m).__name__ for m in await store.load_transcript("s1")] == ["UserMessage"]


@every_model
async def test_an_empty_refusal_completes_the_turn_as_declined(harness: ModelHarness) -> None:
    agent = Agent(name="a", instructions="x")
    harness.say(Say(stop_reason="refusal"))
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        result = await rt.session(agent, "s1").turn("hi")

    assert (result.status, result.text) == (TurnStatus.COMPLETED, "")
    assert (result.note or "").startswith(DECLINED)
    transcript = await store.load_transcript("s1")
    assert [getattr(m, "stop_reason", None) for m in transcript] == [None, "refusal"]


@every_model
async def test_a_paused_reply_is_continued_by_the_next_step(harness: ModelHarness) -> None:
    agent = Agent(name="a", instructions="x")
    harness.say(Say(["Part one."], stop_reason="pause_turn"), Say(["Part two."]))
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        result = await rt.session(agent, "s1").turn("hi")

    assert (result.status, result.text) == (TurnStatus.COMPLETED, "Part one.\n\nPart two.")
    transcript = await store.load_transcript("s1")
    assert [getattr(m, "stop_reason", None) for m in transcript] == [None, "pause_turn", "end_turn"]


@every_model
async def test_a_cancel_between_deltas_closes_the_stream_and_the_next_turn_runs(
    harness: ModelHarness,
) -> None:
    agent = Agent(name="a", instructions="x")
    harness.say(Say([f"word{i} " for i in range(40)]), Say(["next"]))
    store = MemoryStore()

    async with runtime(store, harness, agent) as rt:
        session = rt.session(agent, "s1")

        async def on_event(event: TurnEvent) -> None:
            if event.type == "message.delta" and event.turn_id == "first":
                await session.cancel("first", "stop")

        await session.observe(on_event)
        first = await session.turn("go", turn_id="first")
        second = await session.turn("again", turn_id="second")

    assert (first.status, first.reason) == (TurnStatus.CANCELLED, "stop")
    assert (second.status, second.text) == (TurnStatus.COMPLETED, "next")
    roles = [type(m).__name__ for m in await store.load_transcript("s1")]
    assert roles == ["UserMessage", "UserMessage", "AssistantMessage"]
