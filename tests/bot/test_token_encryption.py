"""Installed workspaces' tokens encrypted at rest, through the real install flow (Bolt's OAuth
over HTTP against the Slack stand-in) on SQLite and PostgreSQL: a dump of the database shows no
token while the bot answers with them; a start seals rows stored in plain text; `bot db
rotate-token-key` moves them to a new key; a key list that opens nothing leaves the workspace
not installed (said once), never a crash or a 5xx."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from sqlalchemy import update

from bot.slack.inbound import session_key
from bot.testing import SlackStandIn
from bot.testing.http import local_client
from storage.installations.schema import INSTALLATION_TABLES, slack_bots
from storage.installations.schema import slack_installations as installs
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.conftest import empty_tables
from tests.bot.harness import Running, eventually, replies
from tests.bot.test_oauth_install import CLIENT_ID, CLIENT_SECRET, OAUTH, REDIRECT, driver, execute
from tests.bot.test_oauth_install import install as install_through_the_flow
from tests.support.db_dump import dump

ROOT = Path(__file__).resolve().parents[2]
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
SHAPE = "xoxb-"

Launch = Callable[..., Awaitable[Running]]


def keys(*listed: str) -> dict[str, object]:
    return {**OAUTH, "TOKEN_ENCRYPTION_KEYS": SecretStr(",".join(listed))}


@pytest.fixture
async def oauth_db(db_url: str) -> str:
    await empty_tables(db_url, INSTALLATION_TABLES)
    return db_url


@pytest.fixture
def workspaces(standin: SlackStandIn) -> SlackStandIn:
    standin.oauth.app(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, redirect_uri=REDIRECT)
    standin.oauth.team("T0AAA", channels=("C0AAA",))
    return standin


@pytest.fixture
async def browser() -> AsyncIterator[httpx.AsyncClient]:
    async with local_client(timeout=15.0) as client:
        yield client


async def answered(app: Running, standin: SlackStandIn, text: str) -> None:
    """A mention in T0AAA gets the agent's reply, rendered with the workspace's token."""
    speaker = driver(app, "T0AAA")
    try:
        before = len(replies(standin, "C0AAA"))
        await speaker.mention("U0ALICE", text, channel="C0AAA")
        await eventually(
            lambda: any("from the agent." in m.text for m in replies(standin, "C0AAA")[before:]),
            within=30,
        )
    finally:
        await speaker.aclose()


def assert_no_token(text: str, token: str) -> None:
    assert token not in text
    assert token.split("-", 2)[-1] not in text  # nor its secret part
    assert SHAPE not in text


async def rotate(url: str, listed: str) -> tuple[int, str, str]:
    """`bot db rotate-token-key`, as an operator runs it: its own process, the environment."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": url,
        "TOKEN_ENCRYPTION_KEYS": listed,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli.main",
        "db",
        "rotate-token-key",
        cwd=ROOT / "tests",  # no .env there
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.usefixtures("serving")
async def test_a_dump_shows_no_token_while_the_bot_answers_with_it(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    app = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_A))
    await install_through_the_flow(browser, app, "T0AAA")
    token = workspaces.oauth.token_of("T0AAA")

    await answered(app, workspaces, "hello")

    assert {c.team for c in workspaces.calls if c.args.get("channel") == "C0AAA"} == {"T0AAA"}
    assert_no_token(await dump(oauth_db), token)


async def test_a_start_seals_the_tokens_an_older_version_stored_in_plain_text(
    oauth_db: str,
    launch: Launch,
    workspaces: SlackStandIn,
    browser: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    first = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_A))
    await install_through_the_flow(browser, first, "T0AAA")
    token = workspaces.oauth.token_of("T0AAA")
    # What an older version left: the same rows, the token in plain text.
    await execute(oauth_db, update(slack_bots).values(bot_token=token))
    await execute(oauth_db, update(installs).values(bot_token=token))
    assert token in await dump(oauth_db)
    await answered(first, workspaces, "read as it is")  # read before anything seals it

    later = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_A))

    assert_no_token(await dump(oauth_db), token)
    assert "tokens stored in plain text were encrypted" in caplog.text
    await answered(later, workspaces, "after the start")
    assert token not in caplog.text


async def test_a_rotation_moves_the_tokens_to_the_new_key(
    oauth_db: str, launch: Launch, workspaces: SlackStandIn, browser: httpx.AsyncClient
) -> None:
    first = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_A))
    await install_through_the_flow(browser, first, "T0AAA")
    token = workspaces.oauth.token_of("T0AAA")

    code, out, err = await rotate(oauth_db, f"{KEY_B},{KEY_A}")
    assert code == 0, err
    assert "2 re-encrypted under the first key" in out  # the bot row and the installation row
    code, out, _ = await rotate(oauth_db, f"{KEY_B},{KEY_A}")
    assert code == 0
    assert "0 re-encrypted" in out
    assert "2 already under the first key" in out

    # The old key dropped: the bot still answers in the workspace.
    rotated = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_B))
    await answered(rotated, workspaces, "after the rotation")
    assert_no_token(await dump(oauth_db), token)
    for text in (out, err):
        for secret in (KEY_A, KEY_B, token):
            assert secret not in text


async def test_keys_that_open_nothing_leave_the_workspace_not_installed_and_say_so_once(
    oauth_db: str,
    launch: Launch,
    workspaces: SlackStandIn,
    browser: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_A))
    await install_through_the_flow(browser, first, "T0AAA")
    token = workspaces.oauth.token_of("T0AAA")
    caplog.set_level(logging.INFO)

    wrong = await launch(oauth_db, AGENT, model(SIMPLE), **keys(KEY_B))
    speaker = driver(wrong, "T0AAA")
    try:
        for text in ("hello?", "anyone?"):
            ts = await speaker.mention("U0ALICE", text, channel="C0AAA")  # a 2xx, or it raises
            assert await wrong.turns(session_key("T0AAA", "C0AAA", ts)) == []
    finally:
        await speaker.aclose()

    said = [r for r in caplog.records if "cannot be decrypted" in r.getMessage()]
    assert len(said) == 1
    assert getattr(said[0], "team", None) == "T0AAA"
    for secret in (KEY_A, KEY_B, token):
        assert secret not in caplog.text
    # The rotation refuses to lose them: it leaves them, exits 1 and says why.
    code, out, err = await rotate(oauth_db, KEY_B)
    assert code == 1
    assert "2 tokens are sealed under no key of TOKEN_ENCRYPTION_KEYS" in err
    for secret in (KEY_A, KEY_B, token):
        assert secret not in out + err
    # The right key still opens them: nothing was lost.
    await answered(first, workspaces, "still here")


async def test_the_rotation_refuses_a_malformed_key_list_in_one_line(oauth_db: str) -> None:
    bad = KEY_B[:-4]
    code, out, err = await rotate(oauth_db, f"{KEY_A},{bad}")
    assert code == 2
    assert err.strip() == (
        "bot db rotate-token-key: TOKEN_ENCRYPTION_KEYS: key 2 of 2 is not a Fernet key (32 "
        'url-safe base64-encoded bytes, 44 characters; make one with `python -c "from '
        'cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`)'
    )
    assert bad not in out + err
