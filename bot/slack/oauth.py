"""Installs in many workspaces: Bolt's OAuth flow, and what an uninstall does.

On when `SLACK_CLIENT_ID` and `SLACK_CLIENT_SECRET` are set and `SLACK_BOT_TOKEN` is not.
- `GET /slack/install` is Bolt's install page: a fresh one-time `state`, kept in
  `slack_oauth_states` and in a cookie on the installer's browser (Bolt's `OAuthStateUtils`),
  and an "Add to Slack" link to Slack's authorize page with the scopes (`SLACK_SCOPES`, by
  default the manifest's). `GET /slack/oauth_redirect` is where Slack sends the installer back:
  the state must match the cookie and be consumed (once, unexpired; `OneTimeStateStore`), then
  the code is exchanged (`oauth.v2.access`) and the installation stored (`slack_installations`,
  `slack_bots`). Bolt answers a forged, reused or expired state 400 / 401 and stores nothing.
- Every event is authorized by Bolt against the installation store (`installation_store_bot_only`:
  the newest bot token of the event's workspace), so listeners speak with that workspace's token;
  work done outside a listener finds it through `bot.slack.clients.InstalledClients`.
- `app_uninstalled` (https://docs.slack.dev/reference/events/app_uninstalled): every token of
  the workspace is deleted before the ack; `tokens_revoked`
  (https://docs.slack.dev/reference/events/tokens_revoked): only those it names (the bot's;
  the users' installations by user id). Then, once the bot token is gone, the workspace's
  unfinished turns are stopped durably (`session.stop`, reason `uninstalled`) after the ack (or,
  if this process dies first, by the next renderer that finds no installation): a
  stopped turn calls the model no more, and nothing is shown for it (the workspace has no
  token to show it with; its renderers go idle).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.web.async_client import AsyncWebClient

from agent import Agent, Runtime
from bot.core.settings import Settings
from bot.slack.clients import UNINSTALLED, SlackClients
from bot.slack.inbound import is_slack_id
from storage.delivery.store import DeliveryStore
from storage.installations.store import InstallationStores

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"


async def open_stores(settings: Settings) -> InstallationStores:
    """The installation stores on `DATABASE_URL`, sealing tokens with `TOKEN_ENCRYPTION_KEYS`
    (`ConfigError` if they are missing or malformed; `bot serve` says so before it gets here).
    Opening seals any token still stored in plain text."""
    return await InstallationStores.open(
        settings.database_url,
        client_id=str(settings.slack_client_id),
        cipher=settings.token_cipher(),
    )


def oauth_settings(settings: Settings, stores: InstallationStores) -> AsyncOAuthSettings:
    """Bolt's OAuth settings over the bot's own stores (never Bolt's file-based defaults)."""
    secret = settings.slack_client_secret
    return AsyncOAuthSettings(
        client_id=settings.slack_client_id,
        client_secret=secret.get_secret_value() if secret else None,
        scopes=settings.install_scopes(),
        redirect_uri=settings.slack_install_redirect_uri,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        installation_store=stores.installations,
        # The bot token alone authorizes: a revoked bot token (deleted from `slack_bots`) then
        # stops authorizing even where an installation row of a user remains.
        installation_store_bot_only=True,
        state_store=stores.states,
        logger=logging.getLogger("slack_bolt.oauth"),
    )


class WorkspaceInstallFlow(AsyncOAuthFlow):
    """Bolt's flow, refusing an org-wide (Enterprise Grid) install: its tokens name no team,
    and this bot finds a workspace's token by team (`bot.slack.clients`), so every turn there
    would be queued and never shown. The manifest does not offer one (`org_deploy_enabled:
    false`); an app set up otherwise gets Bolt's failure page (4xx) and nothing is stored."""

    async def run_installation(self, code: str) -> Installation | None:
        installation = await super().run_installation(code)
        if installation is not None and installation.is_enterprise_install:
            log.warning(
                "an org-wide install was refused: this bot is installed per workspace",
                extra={"enterprise": installation.enterprise_id},
            )
            return None
        return installation


def install_flow(
    settings: Settings, stores: InstallationStores, client: AsyncWebClient
) -> WorkspaceInstallFlow:
    return WorkspaceInstallFlow(
        client=client,
        logger=logging.getLogger("slack_bolt.oauth"),
        settings=oauth_settings(settings, stores),
    )


def authorize(
    settings: Settings, stores: InstallationStores, client: AsyncWebClient
) -> AsyncInstallationStoreAuthorize:
    """What Bolt would build from `oauth_settings`, with its cache on: each event still reads
    the workspace's bot token from the store (so a deleted one stops authorizing at once), but
    Bolt's `auth.test` of that token is made once per token, not once per event on the ack's
    path."""
    secret = settings.slack_client_secret
    return AsyncInstallationStoreAuthorize(
        logger=logging.getLogger("slack_bolt.authorize"),
        installation_store=stores.installations,
        client_id=settings.slack_client_id,
        client_secret=secret.get_secret_value() if secret else None,
        bot_only=True,
        cache_enabled=True,
        client=client,
    )


class Uninstalls:
    """`app_uninstalled` and `tokens_revoked`: tokens deleted before the ack, work stopped after."""

    def __init__(
        self,
        *,
        stores: InstallationStores,
        clients: tuple[SlackClients, ...],
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
    ) -> None:
        self.stores = stores
        self.clients = clients
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery

    async def on_uninstalled(self, ack: Any, context: AsyncBoltContext) -> None:
        team, enterprise = _workspace(context)
        if team is not None:
            await self.stores.installations.async_delete_all(enterprise_id=enterprise, team_id=team)
            self._forget(team)
            log.info("app uninstalled: the workspace's tokens were deleted", extra={"team": team})
        await ack()

    async def on_tokens_revoked(
        self, ack: Any, body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        team, enterprise = _workspace(context)
        tokens = _revoked(body)
        if team is not None:
            for user in tokens.get("oauth", []):
                await self.stores.installations.async_delete_installation(
                    enterprise_id=enterprise, team_id=team, user_id=user
                )
            if tokens.get("bot"):
                await self.stores.installations.async_delete_bot_tokens(
                    team_id=team, enterprise_id=enterprise
                )
                self._forget(team)
                log.info("the workspace's bot token was revoked and deleted", extra={"team": team})
        await ack()

    async def stop_work(self, body: dict[str, Any], context: AsyncBoltContext) -> None:
        """Lazy, after the ack: the workspace's unfinished turns end, durably."""
        team, _ = _workspace(context)
        event = body.get("event")
        kind = event.get("type") if isinstance(event, dict) else None
        if team is None or (kind == "tokens_revoked" and not _revoked(body).get("bot")):
            return
        stopped = 0
        for key in await self.delivery.sessions_of_team(team):
            try:
                stopped += len(await self.runtime.session(self.agent, key).stop(reason=UNINSTALLED))
            except Exception:
                log.exception("could not stop a session's turns", extra={"session": key})
        log.info("stopped the workspace's work", extra={"team": team, "turns": stopped})

    def _forget(self, team: str) -> None:
        for clients in self.clients:
            clients.forget(team)


def _workspace(context: AsyncBoltContext) -> tuple[str | None, str | None]:
    team, enterprise = context.team_id, context.enterprise_id
    return (
        team if is_slack_id(team) else None,
        enterprise if is_slack_id(enterprise) else None,
    )


def _revoked(body: dict[str, Any]) -> dict[str, list[str]]:
    """`event.tokens`: `{"oauth": [user ids], "bot": [bot user ids]}`, ids checked."""
    event = body.get("event")
    tokens = event.get("tokens") if isinstance(event, dict) else None
    if not isinstance(tokens, dict):
        return {}
    found: dict[str, list[str]] = {}
    for kind in ("oauth", "bot"):
        ids = tokens.get(kind)
        if isinstance(ids, list):
            found[kind] = [i for i in ids if is_slack_id(i)]
    return found
