"""What `/slack/events` answers to input Slack never sends, or sends rarely: never a 5xx.

Slack retries a 5xx, so a request that crashes the app is a request that crashes it again and
again. Unsigned junk is a 4xx (401: no valid signature or timestamp; 400: a body that cannot be
parsed); a signed request that makes no sense is a 200 that does nothing. Either way nothing is
stored, no traceback is logged at ERROR, and the answer does not echo what was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import func, select

from agent.models import opening_text
from bot.slack.inbound import session_key
from bot.testing import SlackStandIn
from bot.testing.workspace import Message
from storage.delivery.schema import DELIVERY_TABLES
from storage.sql.dialects import dialect_for
from storage.sql.schema import STORE_TABLES
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import SECRET, Running, eventually, idle, replies, settled

CHANNEL = "C0BAD"
MARK = "ECHO-MARK"
"""Put in every bad input; the response must not contain it."""

APPROVAL = json.dumps({"k": "input", "s": f"slack:T0DEMO:{CHANNEL}:{MARK}", "t": "t", "i": "i"})
"""A button value that decodes, so a malformed click gets as far as the fields read after it."""

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


# helpers -----------------------------------------------------------------------------------


def signed_headers(body: bytes, *, content_type: str = JSON) -> dict[str, str]:
    """Slack signs the raw bytes (`v0:<timestamp>:<body>`), whatever they hold."""
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
    }


async def post(app: Running, body: bytes, headers: Mapping[str, str | bytes]) -> httpx.Response:
    return await app.slack.http.post(app.slack.url, content=body, headers=headers)


async def post_signed(app: Running, body: bytes | str, content_type: str = JSON) -> httpx.Response:
    raw = body.encode() if isinstance(body, str) else body
    return await post(app, raw, signed_headers(raw, content_type=content_type))


def form(payload: Any) -> str:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return urlencode({"payload": text})


async def row_counts(url: str) -> dict[str, int]:
    """Every row the engine and the delivery tables hold, table by table."""
    engine = dialect_for(url).create_engine()
    try:
        async with engine.connect() as conn:
            return {
                table.name: (
                    await conn.execute(select(func.count()).select_from(table))
                ).scalar_one()
                for table in (*STORE_TABLES, *DELIVERY_TABLES)
            }
    finally:
        await engine.dispose()


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def errors(self) -> list[str]:
        """ERROR records and any record carrying a traceback."""
        return [
            f"{r.name}: {r.getMessage()}"
            for r in self.records
            if r.levelno >= logging.ERROR or r.exc_info or r.exc_text
        ]


@pytest.fixture
def logged() -> Iterator[Collected]:
    """Every record of the app and Bolt, and of uvicorn (which logs a request's traceback)."""
    handler = Collected()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        logging.getLogger("uvicorn").removeHandler(handler)


async def start(
    launch: Callable[..., Awaitable[Running]], url: str, logged: Collected, **settings: Any
) -> Running:
    app = await launch(url, AGENT, model(SIMPLE), **settings)
    # uvicorn's loggers do not propagate, and its logging config, applied as a server starts,
    # drops any handler added to them before
    logging.getLogger("uvicorn").addHandler(logged)
    return app


async def assert_harmless(url: str, before: dict[str, int], logged: Collected) -> None:
    """Nothing stored (no turn, no delivery target, no post) and nothing logged at ERROR."""
    assert await row_counts(url) == before
    assert logged.errors() == []


def envelope(app: Running, event: Any) -> dict[str, Any]:
    body = app.slack.envelope({})
    body["event"] = event
    return body


def click_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U0ALICE", "username": "alice", "team_id": "T0DEMO"},
        "api_app_id": "A0DEMO",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": "1.2", "channel_id": CHANNEL},
        "trigger_id": "1.trigger",
        "team": {"id": "T0DEMO", "domain": "demo"},
        "channel": {"id": CHANNEL, "name": "demo"},
        "message": {"type": "message", "ts": "1.2"},
        "response_url": "https://hooks.slack.invalid/actions/1",
        "actions": [
            {
                "type": "button",
                "action_id": "agent_approve",
                "block_id": "approval",
                "value": APPROVAL,
            }
        ],
    }
    payload.update(overrides)
    return payload


# unsigned junk: 4xx ------------------------------------------------------------------------


async def test_a_missing_or_malformed_timestamp_is_401(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    body = json.dumps(app.slack.mention_event("U0ALICE", MARK, channel=CHANNEL, ts="1.2")).encode()
    good = signed_headers(body)
    cases: list[dict[str, str | bytes]] = [
        {k: v for k, v in good.items() if k != "X-Slack-Request-Timestamp"},
        {**good, "X-Slack-Request-Timestamp": "not-a-number"},
        {**good, "X-Slack-Request-Timestamp": ""},
        {**good, "X-Slack-Request-Timestamp": "9" * 5000},
        {**good, "X-Slack-Request-Timestamp": f"{time.time():.3f}"},
        {k: v for k, v in good.items() if k != "X-Slack-Signature"},
        # a header is bytes: Starlette reads them as Latin-1, and `hmac.compare_digest` refuses
        # a str that is not ASCII
        {**good, "X-Slack-Signature": ("v0=\u00e9" + "0" * 63).encode("latin-1")},
    ]
    for headers in cases:
        response = await post(app, body, headers)
        assert response.status_code == 401, headers
        assert MARK not in response.text
    await assert_harmless(db_url, before, logged)


async def test_a_huge_body_without_headers_is_refused(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    body = (MARK * (5 * 1024 * 1024 // len(MARK))).encode()
    response = await post(app, body, {})
    assert response.status_code in (401, 413)
    assert MARK not in response.text
    await assert_harmless(db_url, before, logged)


async def test_a_body_that_is_not_utf8_is_a_4xx(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    body = b'{"type": "event_callback", "x": "' + MARK.encode() + b'\xff\xfe"}'
    signed = await post(app, body, signed_headers(body))
    assert signed.status_code == 400
    forged = await post(app, body, {**signed_headers(body), "X-Slack-Signature": "v0=" + "0" * 64})
    assert forged.status_code in (400, 401)
    for response in (signed, forged):
        assert MARK not in response.text
    await assert_harmless(db_url, before, logged)


# signed but unparsable: 400 -----------------------------------------------------------------


async def test_deeply_nested_json_is_400(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    deep = '{"a":' * 100_000 + f'"{MARK}"' + "}" * 100_000
    responses = [
        await post_signed(app, deep),
        await post_signed(app, "[" * 100_000 + "]" * 100_000),
        await post_signed(app, form("[" * 100_000 + "]" * 100_000), FORM),
    ]
    for response in responses:
        assert response.status_code == 400
        assert MARK not in response.text
    await assert_harmless(db_url, before, logged)


async def test_interactivity_payloads_that_are_not_a_json_object_are_400(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    for payload in (f"{{{MARK}", f"[1, {json.dumps(MARK)}]", json.dumps(MARK), "null", ""):
        response = await post_signed(app, form(payload), FORM)
        assert response.status_code == 400, payload
        assert MARK not in response.text
    await assert_harmless(db_url, before, logged)


# signed but meaningless: 200 and nothing happens --------------------------------------------


async def assert_ignored(
    app: Running, url: str, logged: Collected, bodies: list[tuple[str, str]]
) -> None:
    """Each (content type, body), signed, is a 200 that stores, logs and posts nothing, also
    once the work Bolt does after the response is over."""
    before = await row_counts(url)
    tasks = asyncio.all_tasks()
    for content_type, body in bodies:
        response = await post_signed(app, body, content_type)
        assert response.status_code == 200, body[:300]
        assert MARK not in response.text
    await settled(tasks)
    await assert_harmless(url, before, logged)
    assert app.standin.calls_to("chat.postEphemeral") == []
    assert app.standin.calls_to("chat.postMessage") == []


async def test_events_of_a_shape_slack_never_sends_are_200_and_do_nothing(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    mention = app.slack.mention_event("U0ALICE", MARK, channel=CHANNEL, ts=app.slack.new_ts())
    envelopes = [envelope(app, event) for event in (f"type {MARK}", [MARK], None, 5, {"type": 5})]
    # ids Bolt reads from the envelope before any listener runs
    envelopes += [
        {**envelope(app, mention), "authorizations": MARK},
        {**envelope(app, mention), "team": 5},
    ]
    await assert_ignored(app, db_url, logged, [(JSON, json.dumps(body)) for body in envelopes])


async def test_malformed_button_clicks_are_200_and_do_nothing(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    clicks = [
        click_payload(actions=[]),
        click_payload(actions=MARK),
        click_payload(actions=[MARK]),
        click_payload(actions=[{"type": "button", "value": APPROVAL}]),
        click_payload(actions=[{"action_id": 5, "value": APPROVAL}]),
        click_payload(actions=[{"action_id": "agent_approve", "value": 5}]),
        click_payload(actions={"0": {"action_id": "agent_approve", "value": APPROVAL}}),
        click_payload(user=MARK),
        click_payload(team=MARK),
        click_payload(enterprise=MARK),
        click_payload(container=[MARK]),
        click_payload(container=None, message=MARK),
    ]
    await assert_ignored(app, db_url, logged, [(FORM, form(click)) for click in clicks])


async def test_other_interactivity_of_a_shape_slack_never_sends_is_200(db_url, launch, logged):
    app = await start(launch, db_url, logged)
    payloads: list[dict[str, Any]] = [
        {"type": "view_submission", "view": MARK},
        {"type": "view_submission", "view": {"callback_id": MARK}},
        {"type": "view_submission", "view": {"callback_id": MARK, "type": "workflow_step"}},
        {"type": "workflow_step_edit", "callback_id": MARK},
        {"type": "interactive_message", "callback_id": MARK},
        {"type": "interactive_message", "callback_id": MARK, "actions": []},
        {"type": "dialog_submission", "callback_id": 5},
        {"type": "dialog_cancellation", "callback_id": [MARK]},
    ]
    reset = {
        "command": "/agent-reset",
        "text": MARK,
        "team_id": "T0DEMO",
        "channel_id": CHANNEL,
        "user_id": "U0ALICE",
    }  # no response_url, which the reply to a slash command needs
    bodies = [(FORM, form(payload)) for payload in payloads]
    bodies += [(FORM, urlencode(reset)), (JSON, json.dumps(reset))]
    await assert_ignored(app, db_url, logged, bodies)


async def test_agent_payloads_of_a_shape_slack_never_sends_are_200_and_do_nothing(
    db_url, launch, logged
):
    """Stop, a new assistant thread, the App Home, a Home tab click, a feedback click and the
    Deny modal's submission, each with fields Slack always sends of the right type missing or
    wrong: a 200, nothing stored, nothing logged at ERROR."""
    app = await start(launch, db_url, logged)
    ts = app.slack.new_ts()
    stop = {"type": "agent_session_stopped", "channel": CHANNEL, "user": "U0ALICE"}
    events = [
        {**stop, "thread_ts": [ts]},
        {**stop, "thread_ts": ts, "user": 5},
        {**stop, "thread_ts": MARK},
        {"type": "assistant_thread_started", "assistant_thread": [MARK]},
        {"type": "assistant_thread_started", "assistant_thread": {"user_id": MARK}},
        {"type": "app_home_opened", "user": ["U0ALICE"], "tab": "home"},
        {"type": "app_home_opened", "user": "U0ALICE", "tab": 5},
        {"type": "app_home_opened", "user": MARK, "tab": "messages", "channel": 5},
    ]
    bodies = [(JSON, json.dumps(envelope(app, event))) for event in events]
    feedback = {"action_id": "agent_feedback", "type": "feedback_buttons"}
    clicks = [
        click_payload(container={"type": "view", "view_id": MARK}),
        click_payload(actions=[{**feedback, "value": MARK}]),
        click_payload(actions=[{**feedback, "value": json.dumps({"v": "positive"})}]),
        click_payload(actions=[{**feedback, "value": json.dumps({"v": 5, "s": 5, "t": 5})}]),
    ]
    submission = {
        "type": "view_submission",
        "user": {"id": "U0ALICE", "team_id": "T0DEMO"},
        "team": {"id": "T0DEMO"},
        "view": {"type": "modal", "callback_id": "agent_deny_reason", "private_metadata": MARK},
    }
    submissions = [
        submission,
        {**submission, "view": {**submission["view"], "private_metadata": 5}},
        {**submission, "view": {**submission["view"], "state": [MARK]}},
        {**submission, "user": MARK},
    ]
    bodies += [(FORM, form(payload)) for payload in (*clicks, *submissions)]
    await assert_ignored(app, db_url, logged, bodies)


# inbound text ------------------------------------------------------------------------------


async def test_a_lone_surrogate_in_the_text_is_stored_and_answered(db_url, launch, standin, logged):
    """JSON escapes can carry half a surrogate pair, which no database can store; refusing it
    would fail every retry and lose the message, so it is replaced, and the rest is answered."""
    app = await start(launch, db_url, logged)
    ts = app.slack.new_ts()
    event = app.slack.mention_event("U0ALICE", "hi \ud800 there \udfff", channel=CHANNEL, ts=ts)
    assert (await app.slack.post_event(event)).status_code == 200

    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]
    [turn] = await app.turns(session_key("T0DEMO", CHANNEL, ts))
    assert turn.status.value == "completed"
    assert turn.input.inbound.text == "hi \ufffd there \ufffd"
    assert logged.errors() == []


async def test_ids_that_slack_never_sends_start_nothing(db_url, launch, standin, logged):
    """A user, channel, team or timestamp is an address: replacing a character in it would
    address someone else, so an event whose ids are not Slack's is ignored (and never stored)."""
    app = await start(launch, db_url, logged)
    before = await row_counts(db_url)
    ts = app.slack.new_ts()
    good = app.slack.mention_event("U0ALICE", "hi", channel=CHANNEL, ts=ts)
    bad_events = [
        {**good, "user": "U0\ud800"},
        {**good, "channel": "C0\ud800"},
        {**good, "channel": "C0:BAD"},
        {**good, "ts": "1700000000.\ud800"},
        {**good, "ts": f"{ts} {MARK}"},
        {**good, "thread_ts": "\udfff"},
        {**good, "team": "T0\ud800"},
        {**good, "user": ["U0ALICE"]},
        {**good, "text": {"not": "text"}},
        {**good, "subtype": ["unhashable"]},
    ]
    for event in bad_events:
        body = app.slack.envelope(event)
        if "team" in event and event["team"] != "T0DEMO":
            body["team_id"] = event["team"]
        response = await post_signed(app, json.dumps(body))
        assert response.status_code == 200, event
        assert MARK not in response.text
    await assert_harmless(db_url, before, logged)
    assert standin.bot_messages(CHANNEL) == []


LIMIT = 60


async def test_a_message_over_the_limit_gets_one_note_and_runs_nothing(db_url, launch, standin):
    scripted = model(SIMPLE)
    app = await launch(db_url, AGENT, scripted, MAX_INBOUND_CHARS=LIMIT)
    ts = app.slack.new_ts()
    mention = app.slack.mention_event("U0ALICE", "x" * (LIMIT + 1), channel=CHANNEL, ts=ts)
    twin = app.slack.message_event("U0ALICE", mention["text"], channel=CHANNEL, ts=ts)
    first = await asyncio.gather(app.slack.post_event(mention), app.slack.post_event(twin))
    assert [r.status_code for r in first] == [200, 200]
    await eventually(lambda: too_long_notes(standin, ts), what="the note")
    tasks = asyncio.all_tasks()
    retry = await app.slack.post_event(mention, retry_num=1)
    assert retry.status_code == 200
    await settled(tasks)
    [note] = too_long_notes(standin, ts)
    assert f"{LIMIT:,}" in note.text
    assert await app.turns(session_key("T0DEMO", CHANNEL, ts)) == []

    # a message at the limit is answered; the model only ever saw that one
    at_limit = await app.slack.mention("U0ALICE", "y" * LIMIT, channel=CHANNEL)
    await eventually(lambda: any(m.thread_ts == at_limit for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert [opening_text(r.messages) for r in scripted.requests] == ["y" * LIMIT]
    assert too_long_notes(standin, ts) == [note]


async def test_a_huge_message_gets_the_note_from_a_web_process_that_runs_no_turns(
    db_url, launch, standin
):
    """A web process that runs no turns renders nothing either, but it posts the note itself:
    with no turn queued, no worker would have a reason to look at the thread."""
    app = await launch(db_url, AGENT, model(SIMPLE), RUN_TURNS=False)
    assert not app.bot.renderers.enabled
    limit = app.bot.settings.max_inbound_chars
    ts = app.slack.new_ts()
    event = app.slack.mention_event("U0ALICE", "z" * (5 * 1024 * 1024), channel=CHANNEL, ts=ts)
    tasks = asyncio.all_tasks()
    for retry in (None, 1, 2):
        assert (await app.slack.post_event(event, retry_num=retry)).status_code == 200
    await eventually(lambda: too_long_notes(standin, ts), what="the note")
    await settled(tasks)
    [note] = too_long_notes(standin, ts)
    assert f"{limit:,}" in note.text
    assert await app.turns(session_key("T0DEMO", CHANNEL, ts)) == []


def too_long_notes(standin: SlackStandIn, thread_ts: str) -> list[Message]:
    return [
        m
        for m in standin.bot_messages(CHANNEL)
        if m.thread_ts == thread_ts and "too long" in m.text
    ]
