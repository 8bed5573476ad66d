"""Which Slack client speaks for a workspace: one seam for every call made outside a Bolt
listener (renderers, the Home tab, approvals, resets, the agent's entry points, the clock).

- `SingleToken`: `SLACK_BOT_TOKEN`, one workspace; every team gets the same client (today's
  behaviour, and the default).
- `InstalledClients`: installs in many workspaces (`bot.slack.oauth`); a team's client carries the
  bot token its installation stored, looked up by team id (unique across Slack) and cached briefly.

A team with no installation (never installed, uninstalled, its bot token revoked) raises
`NotInstalled`, a `SlackCallError`: every caller already treats those as "Slack refused this",
logs and moves on, so work for such a team is not attempted and nothing crashes. It is logged
once per team and process (until the team is installed again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.calls import SlackCallError
from storage.installations.store import TeamInstallationStore

log = logging.getLogger(__name__)

NOT_INSTALLED = "not_installed"
UNINSTALLED = "uninstalled"
"""The cancellation reason of the turns of a workspace that removed the app (`bot.slack.oauth`), or
whose installation a renderer finds gone (`bot.slack.rendering.pool`)."""
CACHE_SECONDS = 30.0
"""How long a process keeps a team's client before looking its token up again: how long a
process that did not receive `app_uninstalled` itself (a worker) may still try a dead token
(Slack then refuses it with `invalid_auth`, and nothing is lost)."""


class NotInstalled(SlackCallError):
    """The app has no bot token for this workspace; nothing was sent."""

    def __init__(self, team: str) -> None:
        super().__init__("installation", NOT_INSTALLED)
        self.team = team


class SlackClients(Protocol):
    async def for_team(self, team: str, enterprise: str | None = None) -> AsyncWebClient:
        """The client whose token speaks for `team` (in Enterprise Grid org `enterprise`, when
        known); raises `NotInstalled` when the app has none there."""
        ...

    def forget(self, team: str) -> None:
        """Drop what is cached for `team` (its tokens were just removed)."""
        ...

    def usable(self, team: str, client: AsyncWebClient) -> bool:
        """Whether `client`, handed out earlier for `team`, still speaks for it: False once its
        token was forgotten (an uninstall, a revoked token) or replaced, so work begun with it
        (a renderer mid-turn) makes no further call with a dead token."""
        ...


class SingleToken:
    """One bot token, one workspace: the client is the same whoever asks."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def for_team(self, team: str, enterprise: str | None = None) -> AsyncWebClient:
        return self.client

    def forget(self, team: str) -> None:
        return None

    def usable(self, team: str, client: AsyncWebClient) -> bool:
        return client is self.client


class InstalledClients:
    """Clients with each installed workspace's bot token, made on first use and cached."""

    def __init__(
        self,
        store: TeamInstallationStore,
        make: Callable[[str], AsyncWebClient],
        *,
        ttl: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`make(token)`: a client for a token (`make_client` / `make_render_client`)."""
        self.store = store
        self.make = make
        self.ttl = ttl
        self.clock = clock
        self._clients: dict[str, tuple[str, AsyncWebClient, float]] = {}
        self._warned: set[str] = set()

    async def for_team(self, team: str, enterprise: str | None = None) -> AsyncWebClient:
        cached = self._clients.get(team)
        if cached is not None and self.clock() - cached[2] < self.ttl:
            return cached[1]
        bot = await self.store.async_find_team_bot(team_id=team, enterprise_id=enterprise)
        if bot is None or not bot.bot_token:
            self._clients.pop(team, None)
            if team not in self._warned:
                self._warned.add(team)
                log.warning(
                    "no installation for this workspace: its work is not sent to Slack",
                    extra={"team": team},
                )
            raise NotInstalled(team)
        self._warned.discard(team)
        if cached is not None and cached[0] == bot.bot_token:
            client = cached[1]  # same token: keep the client (and what is cached per client)
        else:
            client = self.make(bot.bot_token)
        self._clients[team] = (bot.bot_token, client, self.clock())
        return client

    def forget(self, team: str) -> None:
        self._clients.pop(team, None)

    def usable(self, team: str, client: AsyncWebClient) -> bool:
        """Only the client this cache holds for the team now: `forget` (the uninstall's own
        process, at once) or a changed token (found on the next look-up) retires the others."""
        cached = self._clients.get(team)
        return cached is not None and cached[1] is client
