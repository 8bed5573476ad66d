"""One check per documented setting: the bot, model or command is built from the environment
with a value other than the default, and the check finds that value where it acts.

`CHECKS` maps every setting's environment name to its check, by hand: a setting added to the
code without one fails `test_every_setting_has_a_check`, so none can be documented and ignored
(as `ANTHROPIC_MAX_CONTEXT_TOKENS` and `ANTHROPIC_LONG_CACHE` once were). Where a value only
shows in behaviour, the check looks at the behaviour: the request the Anthropic stand-in
received, a Slack signature accepted, a Redis consumer group made, a token sent to Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import uvicorn
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from agent import (
    Escalation,
    PolicyAnswerer,
    ProposedWrite,
    Quorum,
    ScriptedModel,
    load_agent,
)
from bot.app import SlackBot
from bot.cli import commands
from bot.cli.offline import LOCAL
from bot.core.logs import JsonFormatter
from bot.core.settings import Settings
from bot.testing import sign_request
from bot.testing.socket_mode import SocketModeStandIn
from storage import SqlStore, upgrade_database
from tests.bot import console_setting_checks as console
from tests.bot import metrics_setting_checks as metrics
from tests.bot import model_setting_checks as model
from tests.bot import telemetry_setting_checks as telemetry
from tests.bot.setting_context import SECRET, TOKEN, Check, Ctx

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ops_agent"
API_TOKEN = "every-setting-api-token-0001"


# -- storage and processes --------------------------------------------------------------------


async def database_url(ctx: Ctx) -> None:
    """The turn a bot runs is stored there; the example agent's payments use it too."""
    bot = await ctx.bot()
    result = await bot.runtime.session(bot.agent, "check:db").turn("hello")
    assert result.text == "ok"
    store = await SqlStore.open(ctx.db_url)
    try:
        assert [t.turn_id for t in await store.list_turns("check:db")] == [result.turn_id]
    finally:
        await store.close()
    tool = next(t for t in bot.agent.tools if t.name == "issue_refund")
    assert sys.modules[tool.fn.__module__]._config.database_url == ctx.db_url


async def redis(ctx: Ctx) -> None:
    """`REDIS_URL` and `REDIS_PREFIX`: a started bot serves the turn stream's consumer group,
    named by the prefix, on that server."""
    from tests.support.redis_fixtures import DEFAULT_REDIS_URL, _ping, _unavailable

    url = os.environ.get("BOT_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if (reason := await _ping(url)) is not None:
        _unavailable(f"Redis is not reachable: {reason}")
    prefix = f"bot-test:setting-{secrets.token_hex(4)}"
    ctx.set(REDIS_URL=url, REDIS_PREFIX=prefix)
    bot = await ctx.bot()
    await bot.start()
    client = Redis.from_url(url)
    try:
        async with asyncio.timeout(30):
            while True:
                with contextlib.suppress(Exception):
                    groups = await client.xinfo_groups(f"{prefix}:turns")
                    if [g["name"] for g in groups] == [f"{prefix}:workers".encode()]:
                        break
                await asyncio.sleep(0.05)
    finally:
        await client.delete(f"{prefix}:turns")
        await client.aclose()


async def run_turns(ctx: Ctx) -> None:
    ctx.set(RUN_TURNS="false")
    bot = await ctx.bot(model=None)
    assert bot.runtime.run_turns is False
    assert type(bot.runtime.model).__name__ == "DeferredModel", "no model built for no turn"


async def worker_poll(ctx: Ctx) -> None:
    ctx.set(WORKER_POLL_SECONDS="0.7")
    bot = await ctx.bot(worker=True)
    assert bot.runtime.recovery_interval == 0.7
    assert bot.renderers.sweep_interval == 0.7


async def context_messages(ctx: Ctx) -> None:
    ctx.set(CONTEXT_MESSAGES="17")
    assert (await ctx.bot()).runtime.context_messages == 17


async def tool_concurrency(ctx: Ctx) -> None:
    ctx.set(TOOL_CONCURRENCY="2")
    assert (await ctx.bot()).runtime.tool_concurrency == 2


async def agent_dir(ctx: Ctx) -> None:
    where = ctx.tmp / "my_agent"
    where.mkdir()
    (where / "instructions.md").write_text("You are the check agent.")
    (where / "agent.py").write_text('name = "check-agent"\n')
    ctx.set(AGENT_DIR=str(where))
    assert (await ctx.bot()).agent.name == "check-agent"


async def serve(ctx: Ctx) -> None:
    """`HOST`, `PORT`, `WEB_CONCURRENCY`: what `bot serve` hands uvicorn."""
    await ctx.slack_env()
    ctx.set(HOST="127.0.0.2", PORT="3999", WEB_CONCURRENCY="3")
    ran: dict[str, Any] = {}
    ctx.env.setattr(uvicorn, "run", lambda app, **kwargs: ran.update(kwargs, app=app))
    assert await asyncio.to_thread(commands.serve, Settings()) == 0
    assert (ran["host"], ran["port"], ran["workers"]) == ("127.0.0.2", 3999, 3)


async def clock(ctx: Ctx) -> None:
    """`CRON_GRACE_SECONDS` and the `PRUNE_*` ages: the clock `bot clock` runs."""
    from bot.core.clock import Clock

    await ctx.slack_env()
    ctx.set(
        CRON_GRACE_SECONDS="120",
        PRUNE_OLDER_THAN="12h",
        PRUNE_RECEIPTS_OLDER_THAN="2w",
        PRUNE_EVERY="90m",
        PRUNE_BATCH="7",
    )
    built: list[Clock] = []

    class Recorded(Clock):
        async def run(self, stop: asyncio.Event) -> None:
            built.append(self)

    ctx.env.setattr(commands, "Clock", Recorded)
    ctx.env.setattr(commands, "freeze_startup_heap", lambda: None)
    ctx.env.setattr(commands, "_on_signals", lambda stop: None)
    assert await commands.clock(Settings()) == 0
    [ticker] = built
    assert ticker.grace == 120
    assert ticker.retention is not None
    assert (ticker.retention.older_than, ticker.retention.receipts_older_than) == (
        12 * 3600,
        14 * 86400,
    )
    assert (ticker.retention.every, ticker.retention.batch) == (90 * 60, 7)


async def logging_setup(ctx: Ctx) -> None:
    """`LOG_LEVEL`, `LOG_FORMAT`: the logging every web process sets up."""
    await ctx.slack_env()
    ctx.set(LOG_LEVEL="DEBUG", LOG_FORMAT="text")
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        commands.web_app()
        assert root.level == logging.DEBUG
        [handler] = root.handlers
        assert not isinstance(handler.formatter, JsonFormatter)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


# -- Slack --------------------------------------------------------------------------------------


async def bot_token(ctx: Ctx) -> None:
    bot = await ctx.bot()
    assert bot.client.token == TOKEN
    assert (await bot.client.auth_test())["ok"]


async def signing_secret(ctx: Ctx) -> None:
    bot = await ctx.bot()
    body = '{"type": "event_callback"}'
    signed = sign_request(SECRET, body)
    forged = sign_request("another-signing-secret", body)
    assert bot.verifier is not None
    for headers, valid in ((signed, True), (forged, False)):
        ts, signature = headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
        assert bot.verifier.is_valid(body, ts, signature) is valid


async def api_url(ctx: Ctx) -> None:
    bot = await ctx.bot()
    standin = await ctx.slack()
    assert bot.client.base_url == standin.api_url
    await bot.client.auth_test()
    assert [c.method for c in standin.calls] == ["auth.test"]


async def app_token(ctx: Ctx) -> None:
    """`bot socket` opens its connection with this token: Slack (the stand-in, expecting
    exactly this one) lets it in. The command runs here until it is connected, then is told to
    stop as a signal would tell it."""
    standin = await ctx.slack()
    await ctx.slack_env()
    token = f"xapp-1-A0DEMO-1-check{secrets.token_hex(6)}"
    socket = await ctx.stack.enter_async_context(SocketModeStandIn(app_token=token))
    standin.socket_mode = socket
    ctx.set(SLACK_APP_TOKEN=token)
    stops: list[asyncio.Event] = []
    ctx.env.setattr(commands, "_on_signals", stops.append)
    ctx.env.setattr(commands, "freeze_startup_heap", lambda: None)
    running = asyncio.create_task(commands.socket_mode(Settings()))
    try:
        await socket.connected(1, within=60)
    finally:
        for stop in stops:
            stop.set()
        assert await asyncio.wait_for(running, 30) == 0


TOKEN_KEY = Fernet.generate_key().decode()
"""`TOKEN_ENCRYPTION_KEYS`, which a bot installed in many workspaces requires."""


async def oauth(ctx: Ctx) -> None:
    """`SLACK_CLIENT_ID`, `SLACK_CLIENT_SECRET`, `SLACK_SCOPES`, `SLACK_INSTALL_REDIRECT_URI`:
    the install flow a bot installed in many workspaces serves."""
    await ctx.slack_env()
    ctx.env.delenv("SLACK_BOT_TOKEN")
    ctx.set(
        TOKEN_ENCRYPTION_KEYS=TOKEN_KEY,
        SLACK_CLIENT_ID="1234.5678",
        SLACK_CLIENT_SECRET="every-setting-client-secret",
        SLACK_SCOPES="chat:write, commands",
        SLACK_INSTALL_REDIRECT_URI="https://bot.example.org/slack/oauth_redirect",
    )
    bot = await ctx.bot()
    assert bot.installations is not None
    flow = bot.bolt.oauth_flow
    assert flow is not None
    assert (flow.settings.client_id, flow.settings.client_secret) == (
        "1234.5678",
        "every-setting-client-secret",
    )
    assert flow.settings.scopes == ["chat:write", "commands"]
    assert flow.settings.redirect_uri == "https://bot.example.org/slack/oauth_redirect"


async def clock_team(ctx: Ctx) -> None:
    await ctx.slack_env()
    ctx.env.delenv("SLACK_BOT_TOKEN")
    ctx.set(
        SLACK_CLIENT_ID="1234.5678",
        SLACK_CLIENT_SECRET="s",
        SLACK_CLOCK_TEAM="T0CLOCK",
        TOKEN_ENCRYPTION_KEYS=TOKEN_KEY,
    )
    settings = Settings()
    assert await commands.clock_team(await ctx.bot(), settings) == "T0CLOCK"


async def token_keys(ctx: Ctx) -> None:
    """`TOKEN_ENCRYPTION_KEYS`: the first key seals the installed workspaces' tokens, and every
    key of the list opens them (a rotation's old key too)."""
    await ctx.slack_env()
    ctx.env.delenv("SLACK_BOT_TOKEN")
    old = Fernet.generate_key().decode()
    ctx.set(
        SLACK_CLIENT_ID="1234.5678",
        SLACK_CLIENT_SECRET="s",
        TOKEN_ENCRYPTION_KEYS=f"{TOKEN_KEY},{old}",
    )
    bot = await ctx.bot()
    assert bot.installations is not None
    cipher = bot.installations.cipher
    sealed = cipher.seal("xoxb-every-setting")
    assert Fernet(TOKEN_KEY).decrypt(sealed.removeprefix("fernet:").encode()) == (
        b"xoxb-every-setting"
    )
    under_old = "fernet:" + Fernet(old).encrypt(b"xoxb-before-the-rotation").decode()
    assert cipher.open(under_old) == "xoxb-before-the-rotation"


async def listeners(ctx: Ctx) -> None:
    """`REPLACE_IN_FLIGHT`, `RESET_COMMAND`, `MAX_INBOUND_CHARS` (the API's limit too)."""
    ctx.set(
        REPLACE_IN_FLIGHT="false",
        RESET_COMMAND="/ops-reset",
        MAX_INBOUND_CHARS="123",
        API_TOKENS=f'{{"{API_TOKEN}": {{"team": "T1", "user": "U1"}}}}',
    )
    bot = await ctx.bot()
    assert bot.listeners.replace_in_flight is False
    assert bot.listeners.reset_command == "/ops-reset"
    assert bot.listeners.max_inbound_chars == 123
    assert bot.api is not None
    assert bot.api.settings.max_chars == 123


async def rendering(ctx: Ctx) -> None:
    ctx.set(STREAM_MAX_AGE_SECONDS="100", STREAM_FLUSH_SECONDS="0.3", STREAM_FLUSH_CHARS="50")
    settings = (await ctx.bot()).renderers.settings
    assert (settings.stream_max_age, settings.flush_interval, settings.flush_chars) == (
        100,
        0.3,
        50,
    )


async def api(ctx: Ctx) -> None:
    """`API_TOKENS` and the API's waits: the turn API a bot serves."""
    ctx.set(
        API_TOKENS=f'{{"{API_TOKEN}": {{"team": "T1", "user": "U1"}}}}',
        API_TURN_WAIT_SECONDS="5",
        API_HEARTBEAT_SECONDS="3",
        API_POLL_SECONDS="0.5",
    )
    served = (await ctx.bot()).api
    assert served is not None
    caller = served.tokens.caller(f"Bearer {API_TOKEN}")
    assert caller is not None
    assert (caller.team, caller.user) == ("T1", "U1")
    assert (served.settings.wait, served.settings.heartbeat, served.settings.poll) == (5, 3, 0.5)


async def bot_offline(ctx: Ctx) -> None:
    """`bot serve` with no credential at all serves the offline app: its bot runs the scripted
    model and talks to the Slack stand-in it started, on 127.0.0.1 only."""
    from bot.cli.main import main
    from bot.core import serving as serving_module

    ctx.set(DATABASE_URL=ctx.db_url, BOT_OFFLINE="true")
    ran: dict[str, Any] = {}
    ctx.env.setattr(uvicorn, "run", lambda app, **kwargs: ran.update(kwargs, app=app))
    ctx.env.setattr(serving_module, "freeze_startup_heap", lambda: None)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        assert await asyncio.to_thread(main, ["serve"]) == 0
        assert (ran["app"], ran["host"], ran["workers"]) == ("bot.cli.offline:web_app", LOCAL, 1)
        from bot.cli.offline import web_app

        served = web_app()
        async with served.router.lifespan_context(served):
            bot: SlackBot = served.state.bot
            assert isinstance(bot.runtime.model, ScriptedModel)
            assert bot.client.base_url.startswith("http://127.0.0.1:")
            assert bot.client.base_url != Settings().slack_api_url
            assert (await bot.client.auth_test())["ok"], "the stand-in answers"
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


# -- the example agent --------------------------------------------------------------------------


async def ops_refund_approvers(ctx: Ctx) -> None:
    ctx.set(DATABASE_URL=ctx.db_url, OPS_REFUND_APPROVERS="U0BOSS, U0CFO")
    agent = load_agent(EXAMPLE)
    refund = next(t for t in agent.tools if t.name == "issue_refund")
    small, large = ({"order_id": "A1", "amount": a} for a in (20.0, 250.0))
    assert refund.answerers_of_call(small) == PolicyAnswerer(
        policy="refund-approvers", scope="refunds"
    )
    assert refund.answerers_of_call(large) == Quorum(2, users=["U0BOSS", "U0CFO"])
    authorize = agent.authorize_answer
    assert authorize is not None
    for user, allowed in (("U0CFO", True), ("U0ALICE", False)):
        asked = {"policy": "refund-approvers", "principal": {"team": "T1", "user": user}}
        assert await authorize(asked) is allowed  # type: ignore[arg-type]


async def ops_auto_refund_limit(ctx: Ctx) -> None:
    ctx.set(DATABASE_URL=ctx.db_url, OPS_AUTO_REFUND_LIMIT="5")
    agent = load_agent(EXAMPLE)
    rule = agent.approve_automatically
    assert rule is not None
    await upgrade_database(ctx.db_url)  # the rule reads the refunds table

    def refund(amount: float) -> ProposedWrite:
        arguments = {"order_id": "ord_1", "amount": amount}
        return ProposedWrite(
            session="s",
            turn_id="t",
            call_id="c",
            tool="issue_refund",
            arguments=arguments,
            asked_by="U1",
            trigger_by=None,
        )

    approved = await rule(refund(4.5))
    assert approved is not None
    assert approved.policy == "small-refunds"
    assert await rule(refund(5.5)) is None


async def ops_refund_escalate_to(ctx: Ctx) -> None:
    ctx.set(DATABASE_URL=ctx.db_url, OPS_REFUND_ESCALATE_TO="U0CTO, U0CFO")
    refund = next(t for t in load_agent(EXAMPLE).tools if t.name == "issue_refund")
    assert refund.reminders.remind_after == 4 * 3600
    assert refund.reminders.escalate == Escalation(
        after=24 * 3600, answerers=Quorum(1, users=["U0CFO", "U0CTO"])
    )


async def ops_channel(ctx: Ctx) -> None:
    ctx.set(DATABASE_URL=ctx.db_url, OPS_CHANNEL="C0CHECK")
    assert [s.channel for s in load_agent(EXAMPLE).schedules] == ["C0CHECK"]


CHECKS: dict[str, Check] = {
    "DATABASE_URL": database_url,
    "REDIS_URL": redis,
    "REDIS_PREFIX": redis,
    "RUN_TURNS": run_turns,
    "WORKER_POLL_SECONDS": worker_poll,
    "CONTEXT_MESSAGES": context_messages,
    "TOOL_CONCURRENCY": tool_concurrency,
    "AGENT_DIR": agent_dir,
    "HOST": serve,
    "PORT": serve,
    "WEB_CONCURRENCY": serve,
    "CRON_GRACE_SECONDS": clock,
    "PRUNE_OLDER_THAN": clock,
    "PRUNE_RECEIPTS_OLDER_THAN": clock,
    "PRUNE_EVERY": clock,
    "PRUNE_BATCH": clock,
    "LOG_LEVEL": logging_setup,
    "LOG_FORMAT": logging_setup,
    "SLACK_BOT_TOKEN": bot_token,
    "SLACK_SIGNING_SECRET": signing_secret,
    "SLACK_API_URL": api_url,
    "SLACK_APP_TOKEN": app_token,
    "SLACK_CLIENT_ID": oauth,
    "SLACK_CLIENT_SECRET": oauth,
    "SLACK_SCOPES": oauth,
    "SLACK_INSTALL_REDIRECT_URI": oauth,
    "SLACK_CLOCK_TEAM": clock_team,
    "TOKEN_ENCRYPTION_KEYS": token_keys,
    "REPLACE_IN_FLIGHT": listeners,
    "RESET_COMMAND": listeners,
    "MAX_INBOUND_CHARS": listeners,
    "STREAM_MAX_AGE_SECONDS": rendering,
    "STREAM_FLUSH_SECONDS": rendering,
    "STREAM_FLUSH_CHARS": rendering,
    "API_TOKENS": api,
    "API_TURN_WAIT_SECONDS": api,
    "API_HEARTBEAT_SECONDS": api,
    "API_POLL_SECONDS": api,
    "ANTHROPIC_API_KEY": model.anthropic_key,
    "ANTHROPIC_BASE_URL": model.anthropic_base_url,
    "ANTHROPIC_MODEL": model.anthropic_model,
    "ANTHROPIC_MAX_TOKENS": model.anthropic_max_tokens,
    "ANTHROPIC_THINKING": model.anthropic_thinking,
    "ANTHROPIC_THINKING_BUDGET": model.anthropic_thinking_budget,
    "ANTHROPIC_EFFORT": model.anthropic_effort,
    "ANTHROPIC_THINKING_DISPLAY": model.anthropic_thinking_display,
    "ANTHROPIC_TIMEOUT_SECONDS": model.anthropic_timeout,
    "ANTHROPIC_MAX_RETRIES": model.anthropic_max_retries,
    "ANTHROPIC_MAX_CONTEXT_TOKENS": model.anthropic_max_context_tokens,
    "ANTHROPIC_LONG_CACHE": model.anthropic_long_cache,
    "ANTHROPIC_CONTEXT_MANAGEMENT": model.anthropic_context_management,
    "ANTHROPIC_COMPACT_AT_TOKENS": model.anthropic_compact_at_tokens,
    "OPS_REFUND_APPROVERS": ops_refund_approvers,
    "OPS_REFUND_ESCALATE_TO": ops_refund_escalate_to,
    "OPS_CHANNEL": ops_channel,
    "OPS_AUTO_REFUND_LIMIT": ops_auto_refund_limit,
    "BOT_OFFLINE": bot_offline,
    "CONSOLE_TOKENS": console.console_tokens,
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": telemetry.capture_content,
    "METRICS_PORT": metrics.metrics,
    "METRICS_HOST": metrics.metrics,
    "METRICS_TOKEN": metrics.metrics,
}
