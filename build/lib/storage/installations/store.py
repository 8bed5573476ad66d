"""slack-sdk's async SQLAlchemy stores on the bot's database, with the changes the bot needs.

- `OneTimeStateStore`: the SDK's state store consumes a state with a SELECT and then a DELETE,
  so two callbacks racing with one state could both pass. Here the DELETE decides (`rowcount`),
  so a state is good for exactly one install, even between processes; expired states are
  swept whenever a new one is issued, so the table stays small.
- `TeamInstallationStore.async_find_team_bot`: the token of a workspace known only by its team id
  (a renderer knows the thread's team, not its Enterprise Grid org). Team ids are unique across
  Slack, so the team alone names one installation.
- `TeamInstallationStore` seals every secret column as slack-sdk writes it and opens it as
  slack-sdk reads it (`sealing.SealedText` on its tables), so a database dump shows no token
  while the SDK's own save and find code runs unchanged. A workspace whose tokens no key opens
  is not installed to the bot (each find answers None) and is logged once, by team.

Both run on an async engine of the bot's own dialect (`SqlDialect.create_engine`: the same
SQLite pragmas and PostgreSQL pool settings as the stores), so nothing here blocks the loop.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import (
    AsyncSQLAlchemyInstallationStore,
    SQLAlchemyInstallationStore,
)
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy import MetaData, and_, desc
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.installations.rotation import seal_plain_rows
from storage.installations.schema import STATES_TABLE, token_tables
from storage.installations.sealing import SealedText, TokenCipher, UnreadableTokenError
from storage.sql.dialects import dialect_for

log = logging.getLogger(__name__)


def _utc_naive(at: float) -> datetime:
    """How slack-sdk stores times (`normalize_datetime_for_db`): naive, in UTC."""
    return datetime.fromtimestamp(at, UTC).replace(tzinfo=None)


class OneTimeStateStore(AsyncSQLAlchemyOAuthStateStore):
    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        state = uuid.uuid4().hex
        now = time.time()
        table = self.oauth_states
        async with self.engine.begin() as conn:
            await conn.execute(table.delete().where(table.c.expire_at <= _utc_naive(now)))
            await conn.execute(
                table.insert(),
                {"state": state, "expire_at": _utc_naive(now + self.expiration_seconds)},
            )
        return state

    async def async_consume(self, state: str) -> bool:
        """True once for a state this store issued and that has not expired; never again."""
        if not isinstance(state, str) or not state:
            return False
        table = self.oauth_states
        async with self.engine.begin() as conn:
            deleted = await conn.execute(
                table.delete().where(
                    and_(table.c.state == state, table.c.expire_at > _utc_naive(time.time()))
                )
            )
        return bool(deleted.rowcount == 1)


class TeamInstallationStore(AsyncSQLAlchemyInstallationStore):
    def __init__(self, *, client_id: str, engine: AsyncEngine, cipher: TokenCipher) -> None:
        super().__init__(client_id=client_id, engine=engine, logger=log)
        # slack-sdk's tables, the secret columns sealed: every query below and in the SDK
        # goes through them.
        self.metadata = MetaData()
        self.installations, self.bots = token_tables(self.metadata, SealedText(cipher))
        self._unreadable: set[str | None] = set()

    def _opened(self, team_id: str | None) -> None:
        self._unreadable.discard(team_id)

    def _unopenable(self, team_id: str | None, err: UnreadableTokenError) -> None:
        if team_id not in self._unreadable:
            self._unreadable.add(team_id)
            log.error(
                "this workspace's stored tokens cannot be decrypted with TOKEN_ENCRYPTION_KEYS: "
                "it is treated as not installed until it installs again or the key that "
                f"sealed them is put back in the list ({err})",
                extra={"team": team_id},
            )

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        try:
            found = await super().async_find_bot(
                enterprise_id=enterprise_id,
                team_id=team_id,
                is_enterprise_install=is_enterprise_install,
            )
        except UnreadableTokenError as err:
            self._unopenable(team_id, err)
            return None
        self._opened(team_id)
        return found

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        try:
            found = await super().async_find_installation(
                enterprise_id=enterprise_id,
                team_id=team_id,
                user_id=user_id,
                is_enterprise_install=is_enterprise_install,
            )
        except UnreadableTokenError as err:
            self._unopenable(team_id, err)
            return None
        self._opened(team_id)
        return found

    async def async_find_team_bot(
        self, *, team_id: str, enterprise_id: str | None = None
    ) -> Bot | None:
        """The newest bot installation of the workspace `team_id` (in org `enterprise_id`, when
        given); None once its tokens were revoked or the app uninstalled."""
        c = self.bots.c
        where = and_(c.client_id == self.client_id, c.team_id == team_id, c.bot_token.is_not(None))
        if enterprise_id is not None:
            where = and_(where, c.enterprise_id == enterprise_id)
        query = self.bots.select().where(where).order_by(desc(c.installed_at)).limit(1)
        try:
            async with self.engine.connect() as conn:
                row = (await conn.execute(query)).mappings().first()
        except UnreadableTokenError as err:
            self._unopenable(team_id, err)
            return None
        self._opened(team_id)
        return None if row is None else SQLAlchemyInstallationStore.build_bot_entity(row)

    async def async_delete_bot_tokens(self, *, team_id: str, enterprise_id: str | None) -> None:
        """The workspace's bot token was revoked: its bot rows go (as slack-sdk's `delete_bot`
        does) and its installation rows lose their bot token too, so no copy of a dead token
        is kept; a user token granted with it stays (`tokens_revoked` names those apart)."""
        b, i = self.bots.c, self.installations.c
        async with self.engine.begin() as conn:
            await conn.execute(
                self.bots.delete().where(
                    and_(
                        b.client_id == self.client_id,
                        b.team_id == team_id,
                        b.enterprise_id == enterprise_id,
                    )
                )
            )
            await conn.execute(
                self.installations.update()
                .where(
                    and_(
                        i.client_id == self.client_id,
                        i.team_id == team_id,
                        i.enterprise_id == enterprise_id,
                    )
                )
                .values(bot_token=None, bot_refresh_token=None, bot_scopes=None)
            )


class InstallationStores:
    """The two stores on one engine, opened and closed together."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        client_id: str,
        cipher: TokenCipher,
        state_expiration: int = 600,
    ) -> None:
        self.engine = engine
        self.installations = TeamInstallationStore(
            client_id=client_id, engine=engine, cipher=cipher
        )
        self.states = OneTimeStateStore(
            expiration_seconds=state_expiration, engine=engine, logger=log, table_name=STATES_TABLE
        )
        self.cipher = cipher

    @classmethod
    async def open(
        cls, url: str, *, client_id: str, cipher: TokenCipher, state_expiration: int = 600
    ) -> InstallationStores:
        """`url`: the bot's `DATABASE_URL`, migrated to revision 0009 or later. Tokens stored
        in plain text (before encryption at rest, or by an older process since) are sealed
        here, so every start of a process leaves none behind."""
        stores = cls(
            dialect_for(url).create_engine(),
            client_id=client_id,
            cipher=cipher,
            state_expiration=state_expiration,
        )
        try:
            found = await seal_plain_rows(stores.engine, cipher)
        except BaseException:
            await stores.close()
            raise
        if found.sealed:
            log.info(
                "installed workspaces' tokens stored in plain text were encrypted",
                extra={"tokens": found.sealed},
            )
        return stores

    async def close(self) -> None:
        await self.engine.dispose()
