"""A tool error carrying the bot's own credentials never reaches Slack or the database, even when
the model repeats the error word for word."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from agent import Agent, ScriptedModel, ScriptedReply, ToolCall, ToolMessage, tool
from agent.seams import ModelRequest
from bot.app import engine_secrets
from bot.core.settings import Settings
from bot.testing import SlackStandIn
from storage.delivery.schema import DELIVERY_TABLES
from storage.sql.dialects import dialect_for
from storage.sql.schema import STORE_TABLES
from tests.bot.harness import SECRET, TOKEN, eventually, idle, replies

CHANNEL = "C0SECRET"


@tool
async def post_report(channel: str) -> dict[str, Any]:
    """A call whose client library puts the credentials it used in its error."""
    raise RuntimeError(f"chat.postMessage to {channel} failed: token {TOKEN}, signing {SECRET}")


AGENT = Agent(name="leaky-bot", instructions="Report.", tools=[post_report])


def echo_the_error(request: ModelRequest, step: int) -> ScriptedReply:
    """A model that repeats the tool's error to the user, as real ones do."""
    if step == 0:
        return ScriptedReply(
            text="Posting the report.",
            tool_calls=[ToolCall(id="c_post", name="post_report", input={"channel": "C1"})],
        )
    errors = [
        str(m.result["error"])
        for m in request.messages
        if isinstance(m, ToolMessage) and m.is_error
    ]
    return ScriptedReply(text=f"The report failed: {' '.join(errors)}")


def slack_record(standin: SlackStandIn) -> str:
    """Everything the bot sent to Slack and everything Slack now holds (the bearer header, where
    the token belongs, is not part of a call's arguments)."""
    calls = [
        {key: value for key, value in call.args.items() if key != "token"} for call in standin.calls
    ]
    messages = [
        {**m.to_json(), "tasks": m.tasks, "channel": m.channel}
        for channel in standin.messages.values()
        for m in channel
    ]
    return json.dumps([calls, messages], default=repr)


async def database_record(url: str) -> str:
    engine = dialect_for(url).create_engine()
    try:
        async with engine.connect() as conn:
            rows = [
                [tuple(row) for row in await conn.execute(select(table))]
                for table in (*STORE_TABLES, *DELIVERY_TABLES)
            ]
    finally:
        await engine.dispose()
    return json.dumps(rows, default=repr)


async def test_a_tool_error_with_the_bot_token_never_reaches_slack_or_the_database(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, ScriptedModel(responder=echo_the_error))
    await app.slack.mention("U0ALICE", "post the report", channel=CHANNEL)

    await eventually(lambda: any("report failed" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert "The report failed: RuntimeError: chat.postMessage to C1 failed: token [redacted]" in (
        reply.text
    )
    record = slack_record(standin)
    assert TOKEN not in record
    assert SECRET not in record
    stored = await database_record(db_url)
    assert "[redacted]" in stored
    assert TOKEN not in stored
    assert SECRET not in stored


def test_the_engine_is_told_every_credential_and_the_url_passwords() -> None:
    settings = Settings(
        DATABASE_URL="postgresql+psycopg://bot:db%2FPass-1234@db.internal/app",
        REDIS_URL="rediss://:r3dis-Pass-5678@cache:6380/0",
        SLACK_BOT_TOKEN=TOKEN,
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_APP_TOKEN="xapp-1-A0-1234567890-abcdef",
        ANTHROPIC_API_KEY="sk-ant-api03-testkey-abcdef",
    )
    assert sorted(engine_secrets(settings)) == sorted(
        [
            TOKEN,
            SECRET,
            "xapp-1-A0-1234567890-abcdef",
            "sk-ant-api03-testkey-abcdef",
            "db/Pass-1234",
            "r3dis-Pass-5678",
        ]
    )
