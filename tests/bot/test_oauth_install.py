"""Installs in many workspaces: Bolt's install flow over real HTTP, each workspace's work done
with its own token, and an uninstall or a revoked token ending that workspace's work.

The stand-in plays Slack's side (`bot.testing.oauth`): its authorize page hands out one-time
codes, `oauth.v2.access` exchanges them, and once workspaces are registered every call needs a
live token of the channel's workspace, so a reply sent with the wrong token fails as in Slack.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from sqlalchemy import delete, select, update

from agent import Agent, Schedule, ScriptedModel, ScriptedReply
from agent.seams import ModelEvent, ModelRequest
from bot.cli.commands import clock_team
from bot.core.clock import Clock
from bot.slack.clients import UNINSTALLED
from bot.slack.inbound import session_key
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.http import local_client
from storage.installations.schema import INSTALLATION_TABLES, slack_bots, slack_oauth_states
from storage.installations.schema import slack_installations as installs
from storage.installations.sealing import TokenCipher
from storage.sql.dialects import dialect_for
from tests.bot.agents import AGENT, GATE, LONG, REFUND, SIMPLE, model
from tests.bot.conftest import empty_tables
from tests.bot.harness import SECRET, Running, approval, buttons, eventually, replies

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "client-secret-for-tests-0123456789"
REDIRECT = "https://bot.example.test/slack/oauth_redirect"
KEYS = Fernet.generate_key().decode()
OAUTH: dict[str, Any] = {
    "SLACK_BOT_TOKEN": None,
    "SLACK_CLIENT_ID": CLIENT_ID,
    "SLACK_CLIENT_SECRET": SecretStr(CLIENT_SECRET),
    "SLACK_INSTALL_REDIRECT_URI": REDIRECT,
    "TOKEN_ENCRYPTION_KEYS": SecretStr(KEYS),
}
COOKIE = "slack-app-oauth-state"
SHARED = "C0SHARED"
"""A channel shared between the two workspaces (Slack Connect): one id, seen from both."""


@pytest.fixture
async def oauth_db(db_url: str) -> str:
    """The installation tables emptied: every test installs from nothing."""
    await empty_tables(db_url, INSTALLATION_TABLES)
    return db_url


@pytest.fixture
def workspaces(standin: SlackStandIn) -> SlackStandIn:
    standin.oauth.app(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, redirect_uri=REDIRECT)
    standin.oauth.team("T0AAA", channels=("C0AAA", SHARED))
    standin.oauth.team("T0BBB", channels=("C0BBB", SHARED), enterprise_id="E0ORG")
    return standin


@pytest.fixture
async def browser() -> AsyncIterator[httpx.AsyncClient]:
    async with local_client(timeout=15.0) as client:
        yield client


async def rows(url: str, statement: Any) -> list[Any]:
    engine = dialect_for(url).create_engine()
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(statement)).mappings().all())
    finally:
        await engine.dispose()


async def execute(url: str, statement: Any) -> None:
    engine = dialect_for(url).create_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(statement)
    finally:
        await engine.dispose()


def authorize_link(page: str) -> str:
    found = re.search(r'href="([^"]*oauth/v2/authorize[^"]*)"', page)
    assert found, "the install page links to Slack's authorize page"
    return html.unescape(found.group(1))


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def begin(browser: httpx.AsyncClient, app: Running) -> tuple[str, str]:
    """GET /slack/install: (the authorize link, the state its cookie holds)."""
    page = await browser.get(f"{app.server.url}/slack/install")
    assert page.status_code == 200
    link = authorize_link(page.text)
    state = query_of(link)["state"]
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={state};")
    assert "HttpOnly" in cookie
    return link, state


async def finish(
    browser: httpx.AsyncClient, app: Running, *, code: str, state: str, cookie: str | None = None
) -> httpx.Response:
    """Slack sends the installer back to the redirect URL, with the browser's cookie."""
    headers = {"cookie": f"{COOKIE}={cookie if cookie is not None else state}"}
    return await browser.get(
        f"{app.server.url}/slack/oauth_redirect",
        params={"code": code, "state": state},
        headers=headers,
    )


async def install(browser: httpx.AsyncClient, app: Running, team: str) -> None:
    link, state = await begin(browser, app)
    code = app.standin.oauth.approve(link, team=team, user="U0ADMIN")
    response = await finish(browser, app, code=code, state=state)
    assert response.status_code == 200, response.text


def driver(app: Running, team: str) -> SlackDriver:
    """Slack's side for one workspace: its events carry its team (and org) and bot user."""
    known = app.standin.oauth.teams[team]
    return SlackDriver(
        app.server.url,
        SECRET,
        standin=app.standin,
        team_id=team,
        bot_user_id=known.bot_user_id,
        enterprise_id=known.enterprise_id,
    )


Launch = Callable[..., Awaitable[Running]]


async def test_the_install_flow_stores_the_workspaces_bot_token(
    oauth_db: str,
    launch: Launch,
    workspaces: SlackStandIn,
    browser: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    app = await launch(oauth_db, AGENT, model(SIMPLE), **OAUTH)
    link, state = await begin(browser, app)
    asked = query_of(link)
    assert asked["client_id"] == CLIENT_ID
    assert asked["redirect_uri"] == REDIRECT
    assert set(asked["scope"].split(",")) >= {"app_mentions:read", "chat:write", "commands"}
    assert len(await rows(oauth_db, select(slack_oauth_states))) == 1

    code = workspaces.oauth.approve(link, team="T0AAA", user="U0ADMIN")
    response = await finish(browser, app, code=code, state=state)

    assert response.status_code == 200
    [exchange] = workspaces.calls_to("oauth.v2.access")
    assert exchange.response["ok"] is True
    assert exchange.args["redirect_uri"] == REDIRECT
    [bot] = await rows(oauth_db, select(slack_bots))
    assert bot["team_id"] == "T0AAA"
    assert bot["client_id"] == CLIENT_ID
    token = workspaces.oauth.token_of("T0AAA")
    assert str(bot["bot_token"]).startswith("fernet:")  # sealed at rest (test_token_encryption)
    assert TokenCipher.from_list(KEYS).open(bot["bot_token"]) == token
    assert bot["bot_user_id"] == workspaces.oauth.teams["T0AAA"].bot_user_id
    [installed] = await rows(oauth_db, select(installs))
    assert installed["user_id"] == "U0ADMIN"
    assert set(str(installed["bot_scopes"]).split(",")) == set(asked["scope"].split(","))
    # The state is spent: the same link cannot install again.
    assert await rows(oauth_db, select(slack_oauth_states)) == []
    # Nothing secret in what the browser saw, nor in what the bot logged.
    for secret in (token, CLIENT_SECRET):
        assert secret not in response.text
        assert secret not in caplog.text


async def test_a_forged_reused_or_expired_state_installs_nothing(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    app = await launch(oauth_db, AGENT, model(SIMPLE), **OAUTH)

    async def refused(response: httpx.Response) -> None:
        assert 400 <= response.status_code < 500, response.status_code
        assert await rows(oauth_db, select(slack_bots)) == []

    # Forged: a state this bot never issued, with a cookie to match.
    link, _ = await begin(browser, app)
    code = workspaces.oauth.approve(link, team="T0AAA", user="U0ADMIN")
    await refused(await finish(browser, app, code=code, state="forged-state"))
    # A state issued to another browser (its cookie is not this one's).
    _, state = await begin(browser, app)
    await refused(await finish(browser, app, code=code, state=state, cookie="someone-else"))
    # Expired: issued, then left past its ten minutes.
    link, state = await begin(browser, app)
    [row] = [r for r in await rows(oauth_db, select(slack_oauth_states)) if r["state"] == state]
    await execute(
        oauth_db,
        update(slack_oauth_states)
        .where(slack_oauth_states.c.state == state)
        .values(expire_at=row["expire_at"].replace(year=2000)),
    )
    await refused(await finish(browser, app, code=code, state=state))
    assert workspaces.calls_to("oauth.v2.access") == []

    # Reused: one good install, then the same state again (with a fresh code) stores nothing.
    link, state = await begin(browser, app)
    code = workspaces.oauth.approve(link, team="T0AAA", user="U0ADMIN")
    assert (await finish(browser, app, code=code, state=state)).status_code == 200
    again = workspaces.oauth.approve(link, team="T0BBB", user="U0ADMIN")
    response = await finish(browser, app, code=again, state=state)
    assert 400 <= response.status_code < 500
    assert [b["team_id"] for b in await rows(oauth_db, select(slack_bots))] == ["T0AAA"]
    assert len(workspaces.calls_to("oauth.v2.access")) == 1


async def test_an_org_wide_install_is_refused_and_stores_nothing(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    """Its tokens name no workspace, so nothing could be shown where it is used."""
    app = await launch(oauth_db, AGENT, model(SIMPLE), **OAUTH)
    link, state = await begin(browser, app)
    code = workspaces.oauth.approve(link, team="T0BBB", user="U0ADMIN", org_wide=True)
    response = await finish(browser, app, code=code, state=state)
    assert 400 <= response.status_code < 500
    assert workspaces.calls_to("oauth.v2.access")[0].response["is_enterprise_install"] is True
    assert await rows(oauth_db, select(slack_bots)) == []
    assert await rows(oauth_db, select(installs)) == []


@pytest.mark.usefixtures("serving")
async def test_each_workspace_is_answered_with_its_own_token(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    app = await launch(oauth_db, AGENT, model(SIMPLE), **OAUTH)
    await install(browser, app, "T0AAA")
    await install(browser, app, "T0BBB")
    first, second = driver(app, "T0AAA"), driver(app, "T0BBB")
    try:
        await first.mention("U0ALICE", "hello", channel="C0AAA")
        await second.mention("U0BOB", "hello", channel="C0BBB")
        for channel in ("C0AAA", "C0BBB"):
            await eventually(
                lambda c=channel: any("from the agent." in m.text for m in replies(workspaces, c)),
                within=30,
            )
    finally:
        await first.aclose()
        await second.aclose()
    sent = [c for c in workspaces.calls if c.args.get("channel") in ("C0AAA", "C0BBB")]
    assert sent, "the replies were sent"
    for call in sent:
        expected = "T0AAA" if call.args["channel"] == "C0AAA" else "T0BBB"
        assert call.team == expected, (call.method, call.args["channel"], call.team)
        assert call.response.get("ok") is True, (call.method, call.response)
    assert all(c.team is not None for c in workspaces.calls if c.method != "oauth.v2.access")


async def test_a_token_of_another_workspace_cannot_post_in_its_channels(
    workspaces: SlackStandIn,
) -> None:
    """What makes the routing test above able to fail: the stand-in refuses a wrong token."""
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    base = AsyncWebClient(base_url=workspaces.api_url)
    link = (
        f"https://slack.com/oauth/v2/authorize?client_id={CLIENT_ID}&scope=chat:write"
        f"&redirect_uri={REDIRECT}"
    )
    code = workspaces.oauth.approve(link, team="T0BBB", user="U0ADMIN")
    answer = await base.oauth_v2_access(
        client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code, redirect_uri=REDIRECT
    )
    team_b = AsyncWebClient(token=answer["access_token"], base_url=workspaces.api_url)
    with pytest.raises(SlackApiError) as refused:
        await team_b.chat_postMessage(channel="C0AAA", text="hi")
    assert refused.value.response["error"] == "channel_not_found"
    assert (await team_b.chat_postMessage(channel="C0BBB", text="hi"))["ok"]
    assert (await team_b.auth_test())["team_id"] == "T0BBB"


async def test_the_same_ids_in_two_workspaces_are_two_people_and_two_conversations(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    app = await launch(oauth_db, AGENT, model(REFUND), **OAUTH)
    await install(browser, app, "T0AAA")
    await install(browser, app, "T0BBB")
    ours, theirs = driver(app, "T0AAA"), driver(app, "T0BBB")
    try:
        ts = await ours.mention("U0SAME", "refund order 42", channel=SHARED)
        message = await eventually(lambda: approval(workspaces, SHARED), within=30)
        their_ts = await theirs.mention("U0SAME", "hello", channel=SHARED)
        ours_key = session_key("T0AAA", SHARED, ts)
        theirs_key = session_key("T0BBB", SHARED, their_ts)
        await eventually(lambda: app.turns(theirs_key), within=30)
        assert ours_key != theirs_key
        assert [t.turn_id for t in await app.turns(ours_key)] == [f"T0AAA:{SHARED}:{ts}"]

        # The same user id clicking from the other workspace is someone else: refused.
        approve, _ = buttons(message)
        response = await theirs.click("U0SAME", approve, channel=SHARED, message_ts=message.ts)
        assert response.status_code == 200
        await eventually(lambda: workspaces.ephemerals, within=30)
        assert "can't answer" in workspaces.ephemerals[0]["text"]
        [turn] = await app.turns(ours_key)
        assert turn.status.value == "suspended"

        # The requester of the request's own workspace answers it.
        response = await ours.click(
            "U0SAME", approve, channel=SHARED, message_ts=message.ts, thread_ts=ts
        )
        assert response.status_code == 200
        await eventually(
            lambda: any("Refund done." in m.text for m in replies(workspaces, SHARED)), within=30
        )
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_an_uninstall_deletes_the_tokens_and_stops_the_workspaces_work(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    GATE.clear()  # the long call's gate is this test's (an Event binds to its loop)
    app = await launch(oauth_db, AGENT, model(LONG), **OAUTH)
    await install(browser, app, "T0AAA")
    await install(browser, app, "T0BBB")
    ours, theirs = driver(app, "T0AAA"), driver(app, "T0BBB")
    try:
        ts = await ours.mention("U0ALICE", "do the long task", channel="C0AAA")
        key = session_key("T0AAA", "C0AAA", ts)
        await eventually(lambda: replies(workspaces, "C0AAA"), within=30)
        await eventually(lambda: "long" in GATE, within=30)  # the turn is in its long call

        workspaces.oauth.revoke("T0AAA")  # Slack kills the tokens, then tells the app
        response = await ours.post_event({"type": "app_uninstalled"})
        assert response.status_code == 200
        assert [b["team_id"] for b in await rows(oauth_db, select(slack_bots))] == ["T0BBB"]
        assert [i["team_id"] for i in await rows(oauth_db, select(installs))] == ["T0BBB"]

        async def stopped() -> bool:
            turns = await app.turns(key)
            return bool(turns) and turns[0].status.value == "cancelled"

        await eventually(stopped, within=30)
        [turn] = await app.turns(key)
        assert turn.cancel_reason == UNINSTALLED

        # A later event for the workspace does no work and is no 5xx.
        calls = len(workspaces.calls)
        later = await ours.mention("U0ALICE", "are you there?", channel="C0AAA")
        assert await app.turns(session_key("T0AAA", "C0AAA", later)) == []
        assert all(c.team != "T0AAA" for c in workspaces.calls[calls:])
        # The other workspace is untouched.
        await theirs.mention("U0BOB", "hello", channel="C0BBB")
        await eventually(lambda: replies(workspaces, "C0BBB"), within=30)
    finally:
        await ours.aclose()
        await theirs.aclose()


class SlowFirstByte:
    """A model that takes its time before its first byte (until the test opens it), then
    answers as scripted: the turn is well under way, its renderer at work, when it speaks."""

    def __init__(self, script: list[ScriptedReply]) -> None:
        self.inner = ScriptedModel(script)
        self.asked = asyncio.Event()
        self.opened = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.asked.set()
        await self.opened.wait()
        async for event in self.inner.stream(request):
            yield event


async def test_after_an_uninstall_its_process_sends_nothing_with_the_dead_token(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    """The model's first words arrive after the uninstall: the renderer that had been showing
    the turn makes no call with the deleted token (no stream started, no message posted
    instead), the turn is stopped, and the other workspace is served as before."""
    slow = SlowFirstByte([ScriptedReply(text=["Hello ", "there."])])
    app = await launch(oauth_db, AGENT, slow, **OAUTH)
    await install(browser, app, "T0AAA")
    await install(browser, app, "T0BBB")
    ours, theirs = driver(app, "T0AAA"), driver(app, "T0BBB")
    try:
        ts = await ours.mention("U0ALICE", "hello", channel="C0AAA")
        key = session_key("T0AAA", "C0AAA", ts)
        await eventually(slow.asked.is_set, within=30)
        # The renderer is at work with the workspace's token (the agent session, processing).
        await eventually(
            lambda: any(
                c.team == "T0AAA" for c in workspaces.calls_to("agents.sessions.setStatus")
            ),
            within=30,
        )

        workspaces.oauth.revoke("T0AAA")
        assert (await ours.post_event({"type": "app_uninstalled"})).status_code == 200
        after = len(workspaces.calls)

        async def asked_to_stop() -> bool:
            turns = await app.turns(key)
            return bool(turns) and turns[0].cancel_reason == UNINSTALLED

        await eventually(asked_to_stop, within=30)  # durable; it takes effect at a checkpoint
        slow.opened.set()  # the model's first words, after the uninstall

        async def stopped() -> bool:
            turns = await app.turns(key)
            return bool(turns) and turns[0].status.value == "cancelled"

        await eventually(stopped, within=30)
        await eventually(lambda: _idle(app, key), within=30, what="the thread's rendering ended")
        sent = [(c.method, c.response.get("error")) for c in workspaces.calls[after:]]
        assert [c for c in workspaces.calls[after:] if c.team == "T0AAA"] == [], sent
        await theirs.mention("U0BOB", "hello", channel="C0BBB")
        await eventually(lambda: replies(workspaces, "C0BBB"), within=30)
    finally:
        await ours.aclose()
        await theirs.aclose()


async def _idle(app: Running, key: str) -> bool:
    return key not in await app.runner.delivery.active_sessions()


async def test_a_workspace_without_tokens_has_its_turns_stopped_by_whoever_renders_it(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    """The uninstall's process deleted the tokens, acked, and died before stopping the
    workspace's turns (Slack does not send the event again): the next process to take the
    session up to render it finds no installation, and stops them instead."""
    app = await launch(oauth_db, AGENT, model(REFUND), **OAUTH)
    await install(browser, app, "T0AAA")
    ours = driver(app, "T0AAA")
    try:
        ts = await ours.mention("U0ALICE", "refund order 42", channel="C0AAA")
        key = session_key("T0AAA", "C0AAA", ts)
        await eventually(lambda: approval(workspaces, "C0AAA"), within=30)
        [parked] = await app.turns(key)
        assert parked.status.value == "suspended"

        workspaces.oauth.revoke("T0AAA")
        await execute(oauth_db, delete(slack_bots).where(slack_bots.c.team_id == "T0AAA"))
        await execute(oauth_db, delete(installs).where(installs.c.team_id == "T0AAA"))
        for bot in {app.bot, app.runner}:  # a process that starts now has nothing cached
            bot.clients.forget("T0AAA")
            bot.render_clients.forget("T0AAA")
        calls = len(workspaces.calls)
        app.runner.renderers.kick(key)  # what its next event, or a restarted sweep, does

        async def stopped() -> bool:
            return (await app.turns(key))[0].status.value == "cancelled"

        await eventually(stopped, within=30)
        [turn] = await app.turns(key)
        assert turn.cancel_reason == UNINSTALLED
        assert all(c.team != "T0AAA" for c in workspaces.calls[calls:])
    finally:
        await ours.aclose()


async def test_a_revoked_bot_token_is_deleted_and_a_revoked_user_token_leaves_the_bot(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    app = await launch(oauth_db, AGENT, model(SIMPLE), **OAUTH)
    await install(browser, app, "T0AAA")
    ours = driver(app, "T0AAA")
    bot_user = workspaces.oauth.teams["T0AAA"].bot_user_id
    try:
        # Only a person's token: the bot keeps working.
        revoked = {"type": "tokens_revoked", "tokens": {"oauth": ["U0ADMIN"], "bot": []}}
        assert (await ours.post_event(revoked)).status_code == 200
        assert [b["team_id"] for b in await rows(oauth_db, select(slack_bots))] == ["T0AAA"]
        await ours.mention("U0ALICE", "hello", channel="C0AAA")
        await eventually(lambda: replies(workspaces, "C0AAA"), within=30)

        # The bot's token: deleted everywhere it was kept, and the workspace does no work.
        workspaces.oauth.revoke("T0AAA")
        revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": [bot_user]}}
        assert (await ours.post_event(revoked)).status_code == 200
        assert await rows(oauth_db, select(slack_bots)) == []
        assert all(i["bot_token"] is None for i in await rows(oauth_db, select(installs)))
        later = await ours.mention("U0ALICE", "still there?", channel="C0AAA")
        assert await app.turns(session_key("T0AAA", "C0AAA", later)) == []
    finally:
        await ours.aclose()


async def test_the_clock_and_the_home_tab_speak_for_their_own_workspace(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    seed = "Morning summary, please."
    agent = Agent(
        name="cron-oauth",
        instructions="Summarize.",
        schedules=[Schedule(name="daily", cron="0 9 * * *", seed=seed, channel="C0BBB")],
    )
    scripted = ScriptedModel(by_opening={seed: [ScriptedReply(text="Morning! All quiet.")]})
    app = await launch(oauth_db, agent, scripted, SLACK_CLOCK_TEAM="T0BBB", **OAUTH)
    await install(browser, app, "T0AAA")
    await install(browser, app, "T0BBB")
    clock = Clock(
        runtime=app.bot.runtime,
        agent=agent,
        delivery=app.bot.delivery,
        renderers=app.bot.renderers,
        team=await clock_team(app.bot, app.bot.settings),
        now=lambda: datetime(2026, 11, 30, 9, 0, 30, tzinfo=UTC).timestamp(),
    )
    assert await clock.tick() == ["cron:daily:2026-11-30T09:00:00+00:00"]
    await eventually(
        lambda: any("All quiet." in m.text for m in replies(workspaces, "C0BBB")), within=30
    )
    posted = [c for c in workspaces.calls if c.args.get("channel") == "C0BBB"]
    assert posted
    assert {c.team for c in posted} == {"T0BBB"}

    theirs = driver(app, "T0BBB")
    try:
        assert (await theirs.open_home("U0BOB")).status_code == 200
        await eventually(lambda: workspaces.calls_to("views.publish"), within=30)
    finally:
        await theirs.aclose()
    [published] = workspaces.calls_to("views.publish")
    assert published.team == "T0BBB"
    assert published.response["ok"] is True


async def test_with_one_bot_token_there_is_no_install_flow(
    db_url: str, launch: Launch, standin: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    """`SLACK_BOT_TOKEN` (the default way) serves one workspace: the install paths do not exist."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    for path in ("/slack/install", "/slack/oauth_redirect?code=c&state=s"):
        assert (await browser.get(f"{app.server.url}{path}")).status_code == 404
    assert standin.calls_to("oauth.v2.access") == []
