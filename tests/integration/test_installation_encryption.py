"""Installed workspaces' tokens at rest, on real SQLite and PostgreSQL: every secret column
slack-sdk stores is sealed in the database (a dump shows none) and opens through slack-sdk's
own store code; plain rows left by older code are sealed when the stores open; a rotation moves
every value under the first key; a workspace no key opens is not installed, and said once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from sqlalchemy import Table, create_engine, inspect, select

from storage.installations import InstallationStores
from storage.installations.rotation import reseal_rows, seal_plain_rows
from storage.installations.schema import (
    INSTALLATION_TABLES,
    SECRET_COLUMNS,
    slack_bots,
    slack_installations,
)
from storage.installations.sealing import SEALED_PREFIX, TokenCipher
from storage.migrate import alembic_config
from storage.sql.dialects import dialect_for
from tests.bot.conftest import empty_tables
from tests.support.db_dump import _every_row, dump

CLIENT_ID = "1111.2222"
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
SHAPES = ("xoxb-", "xoxp-", "xoxe-", "hooks.slack.com")
"""What a Slack token or webhook URL starts with: none of it may be readable in a dump."""


def installation(team: str, n: int = 1) -> Installation:
    """Every secret slack-sdk stores, each distinct, as an install with a user token, token
    rotation and an incoming webhook would return them."""
    return Installation(
        app_id="A0APP",
        team_id=team,
        team_name=f"team {team}",
        bot_token=f"xoxb-{team}-{n}-botbotbotbotbotbotbotbotbot",
        bot_id="B0BOT",
        bot_user_id="U0BOT",
        bot_scopes="chat:write,app_mentions:read",
        bot_refresh_token=f"xoxe-1-{team}-{n}-botrefreshbotrefreshbotrefresh",
        bot_token_expires_in=43200,
        user_id="U0ADMIN",
        user_token=f"xoxp-{team}-{n}-useruseruseruseruseruseruser",
        user_scopes="search:read",
        user_refresh_token=f"xoxe-1-{team}-{n}-userrefreshuserrefreshuser",
        user_token_expires_in=43200,
        incoming_webhook_url=f"https://hooks.slack.com/services/{team}/B0HOOK{n}/abcdefghijklmnopqrstuvwx",
        incoming_webhook_channel="#general",
        incoming_webhook_channel_id="C0GENERAL",
        incoming_webhook_configuration_url="https://example.slack.com/services/B0HOOK",
        installed_at=datetime(2026, 12, 1, 9, 0, n, tzinfo=UTC).timestamp(),
    )


def secrets_of(found: Installation) -> list[str]:
    values = [
        found.bot_token,
        found.bot_refresh_token,
        found.user_token,
        found.user_refresh_token,
        found.incoming_webhook_url,
    ]
    assert all(values)
    return [str(v) for v in values]


def assert_no_secret(text: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text
    for shape in SHAPES:
        assert shape not in text, shape


@pytest.fixture
async def url(sql_url: str) -> str:
    await empty_tables(sql_url, INSTALLATION_TABLES)
    return sql_url


@pytest.fixture
async def opened(url: str) -> AsyncIterator[Callable[..., InstallationStores]]:
    """Stores with a given key list, on the test's database, closed after the test."""
    made: list[InstallationStores] = []

    def stores(*keys: str) -> InstallationStores:
        made.append(
            InstallationStores(
                dialect_for(url).create_engine(), client_id=CLIENT_ID, cipher=TokenCipher(keys)
            )
        )
        return made[-1]

    yield stores
    for each in made:
        await each.close()


async def raw(url: str) -> list[dict[str, object]]:
    """Every secret column of both tables, as stored."""
    engine = dialect_for(url).create_engine()
    found: list[dict[str, object]] = []
    try:
        async with engine.connect() as conn:
            for table in (slack_installations, slack_bots):
                names = SECRET_COLUMNS[table.name]
                rows = await conn.execute(select(*(table.c[n] for n in names)))
                found += [dict(r) for r in rows.mappings()]
    finally:
        await engine.dispose()
    return found


async def save_as_older_code_did(url: str, *installs: Installation) -> None:
    """slack-sdk's own store, as the bot used it before encryption at rest: plain text."""
    engine = dialect_for(url).create_engine()
    try:
        plain = AsyncSQLAlchemyInstallationStore(client_id=CLIENT_ID, engine=engine)
        for each in installs:
            await plain.async_save(each)
    finally:
        await engine.dispose()


async def test_every_secret_column_is_sealed_at_rest_and_opens_through_slack_sdk(
    url: str, opened: Callable[..., InstallationStores]
) -> None:
    stores = opened(KEY_A)
    saved = installation("T0AAA")
    await stores.installations.async_save(saved)
    secrets = secrets_of(saved)

    stored = await raw(url)
    assert len(stored) == 2  # one installation row, one bot row
    for row in stored:
        assert all(str(v).startswith(SEALED_PREFIX) for v in row.values() if v is not None)
    assert_no_secret(await dump(url), secrets)
    if not url.startswith("sqlite"):
        assert_no_secret(await _every_row(url), secrets)  # the fallback reads it the same

    store = stores.installations
    found = await store.async_find_installation(
        enterprise_id=None, team_id="T0AAA", user_id="U0ADMIN"
    )
    assert found is not None
    assert secrets_of(found) == secrets
    bot = await store.async_find_bot(enterprise_id=None, team_id="T0AAA")
    assert bot is not None
    assert (bot.bot_token, bot.bot_refresh_token) == (saved.bot_token, saved.bot_refresh_token)
    team_bot = await store.async_find_team_bot(team_id="T0AAA")
    assert team_bot is not None
    assert team_bot.bot_token == saved.bot_token


async def test_plain_rows_left_by_older_code_are_read_then_sealed_when_the_stores_open(
    url: str, opened: Callable[..., InstallationStores], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    older = [installation("T0AAA"), installation("T0BBB")]
    await save_as_older_code_did(url, *older)
    secrets = [s for each in older for s in secrets_of(each)]
    assert secrets[0] in await dump(url)  # what the fix is for

    # A process of this version reads them as they are, before anything sealed them.
    before = opened(KEY_A).installations
    bot = await before.async_find_team_bot(team_id="T0BBB")
    assert bot is not None
    assert bot.bot_token == older[1].bot_token

    stores = await InstallationStores.open(url, client_id=CLIENT_ID, cipher=TokenCipher([KEY_A]))
    try:
        assert_no_secret(await dump(url), secrets)
        for each in older:
            found = await stores.installations.async_find_installation(
                enterprise_id=None, team_id=each.team_id, user_id="U0ADMIN"
            )
            assert found is not None
            assert secrets_of(found) == secrets_of(each)
        assert "tokens stored in plain text were encrypted" in caplog.text
        # The next start has nothing left to seal.
        assert (await seal_plain_rows(stores.engine, stores.cipher)).sealed == 0
    finally:
        await stores.close()
    for secret in secrets:
        assert secret not in caplog.text


async def test_two_processes_sealing_at_once_seal_each_value_once(
    url: str, opened: Callable[..., InstallationStores]
) -> None:
    older = [installation(f"T0T{n:02d}", n) for n in range(12)]
    await save_as_older_code_did(url, *older)
    first, second = opened(KEY_A), opened(KEY_A)
    done = await asyncio.gather(
        seal_plain_rows(first.engine, first.cipher), seal_plain_rows(second.engine, second.cipher)
    )
    # 12 installations x 5 secrets + 12 bots x 2; each sealed by exactly one of the two.
    assert sum(d.sealed for d in done) == 12 * 7
    assert_no_secret(await dump(url), [s for each in older for s in secrets_of(each)])
    for each in older:
        bot = await first.installations.async_find_team_bot(team_id=str(each.team_id))
        assert bot is not None
        assert bot.bot_token == each.bot_token


async def test_a_rotation_moves_every_token_under_the_first_key(
    url: str, opened: Callable[..., InstallationStores]
) -> None:
    saved = installation("T0AAA")
    await opened(KEY_A).installations.async_save(saved)
    both = opened(KEY_B, KEY_A)
    # Until the rotation ran, the new list opens what the old key sealed.
    bot = await both.installations.async_find_team_bot(team_id="T0AAA")
    assert bot is not None
    assert bot.bot_token == saved.bot_token

    moved = await reseal_rows(both.engine, both.cipher)
    assert (moved.rotated, moved.sealed, moved.unreadable, moved.current) == (7, 0, 0, 0)
    again = await reseal_rows(both.engine, both.cipher)
    assert (again.rotated, again.current) == (0, 7)

    only_new = opened(KEY_B).installations
    found = await only_new.async_find_installation(
        enterprise_id=None, team_id="T0AAA", user_id="U0ADMIN"
    )
    assert found is not None
    assert secrets_of(found) == secrets_of(saved)
    assert await opened(KEY_A).installations.async_find_team_bot(team_id="T0AAA") is None
    assert_no_secret(await dump(url), secrets_of(saved))


async def test_a_workspace_no_key_opens_is_not_installed_and_said_once(
    url: str, opened: Callable[..., InstallationStores], caplog: pytest.LogCaptureFixture
) -> None:
    saved = installation("T0AAA")
    await opened(KEY_A).installations.async_save(saved)
    wrong = opened(KEY_B)
    store = wrong.installations
    caplog.set_level(logging.INFO)

    for _ in range(3):
        assert await store.async_find_team_bot(team_id="T0AAA") is None
        assert await store.async_find_bot(enterprise_id=None, team_id="T0AAA") is None
        assert (
            await store.async_find_installation(
                enterprise_id=None, team_id="T0AAA", user_id="U0ADMIN"
            )
            is None
        )
    said = [r for r in caplog.records if "cannot be decrypted" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.ERROR
    assert getattr(said[0], "team", None) == "T0AAA"
    assert "not installed" in said[0].getMessage()
    for secret in (KEY_A, KEY_B, *secrets_of(saved)):
        assert secret not in caplog.text

    # A rotation with the wrong list leaves those values alone (the right key still opens).
    left = await reseal_rows(wrong.engine, wrong.cipher)
    assert (left.unreadable, left.rotated) == (7, 0)
    bot = await opened(KEY_A).installations.async_find_team_bot(team_id="T0AAA")
    assert bot is not None
    assert bot.bot_token == saved.bot_token


@pytest.mark.parametrize("table", [slack_installations, slack_bots], ids=lambda t: t.name)
def test_every_credential_column_of_slack_sdks_tables_is_sealed(table: Table) -> None:
    """A newer slack-sdk adding a token column fails here instead of storing it in plain text
    (the other URLs, `enterprise_url` and the webhook's configuration page, grant nothing)."""
    credentials = {c.name for c in table.c if c.name.endswith(("_token", "webhook_url"))}
    assert credentials == set(SECRET_COLUMNS[table.name])


def test_migration_0009_widens_the_token_columns_and_narrows_them_back(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"
    engine = create_engine(dialect_for(url).url)

    def migrate(revision: str, *, down: bool = False) -> dict[str, str]:
        with engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(config, revision)
        found = inspect(engine)
        return {
            f"{table}.{c['name']}": str(c["type"])
            for table, names in SECRET_COLUMNS.items()
            for c in found.get_columns(table)
            if c["name"] in names
        }

    try:
        assert set(migrate("head").values()) == {"TEXT"}
        narrowed = migrate("0008", down=True)
        assert len(narrowed) == 7
        assert set(narrowed.values()) == {"VARCHAR(200)"}
        assert set(migrate("head").values()) == {"TEXT"}
    finally:
        engine.dispose()
