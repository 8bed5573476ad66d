"""The stand-in's side of installs in many workspaces: Slack's authorize step, `oauth.v2.access`,
and tokens that belong to one workspace each.

    standin.oauth.app(client_id="1.2", client_secret="s3", redirect_uri="http://…/oauth_redirect")
    standin.oauth.team("T1", channels=("C1",))            # a workspace the app can be installed in
    code = standin.oauth.approve(authorize_url, team="T1", user="U1")   # a person clicks Allow
    standin.oauth.revoke("T1")                              # its tokens die (uninstall, revocation)

As strict as Slack where the bot could get it wrong:
- `oauth.v2.access` (https://docs.slack.dev/reference/methods/oauth.v2.access) takes the client
  credentials by HTTP Basic auth (as slack-sdk sends them) or as arguments; an unknown client id
  is `invalid_client_id`, a wrong secret `bad_client_secret`, a code not issued, already used or
  for another app `invalid_code`, a `redirect_uri` other than the authorize request's
  `bad_redirect_uri`. Its answer has Slack's shape: `access_token`, `token_type`, `scope`,
  `bot_user_id`, `app_id`, `team`, `enterprise` (null outside Enterprise Grid),
  `is_enterprise_install`, `authed_user`.
- Once any workspace is registered, a Web API call needs a live token: an unknown or revoked one
  is `invalid_auth`, and a call names the token's workspace only (`auth.test` answers for it;
  a channel that is not that workspace's is `channel_not_found`, so a post with team B's token
  into team A's channel fails the way it would in Slack). With none registered the stand-in
  keeps accepting any `Bearer xox…` token, as the single-workspace tests expect.
Each call records the token's workspace (`Call.team`), so a test sees which token made it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

ACCESS = "oauth.v2.access"
CHANNEL_ARGS = ("channel", "channel_id")


@dataclass
class Team:
    team_id: str
    name: str
    bot_user_id: str
    bot_id: str
    enterprise_id: str | None = None
    enterprise_name: str | None = None
    channels: set[str] = field(default_factory=set)
    """The conversations the bot is in; a channel shared between workspaces is in several."""


@dataclass
class Grant:
    """A one-time code from the authorize step, not yet exchanged."""

    client_id: str
    team_id: str
    user: str
    scopes: str
    redirect_uri: str | None
    org_wide: bool = False


@dataclass
class Token:
    team_id: str
    live: bool = True


class Identity(Protocol):
    """The stand-in's attributes that name the workspace a call is answered for."""

    team_id: str
    team_name: str
    bot_user_id: str
    bot_id: str


class OAuthWorkspaces:
    def __init__(self, *, app_id: str = "A0DEMO") -> None:
        self.app_id = app_id
        self.client_id: str | None = None
        self.client_secret: str | None = None
        self.redirect_uri: str | None = None
        self.teams: dict[str, Team] = {}
        self.grants: dict[str, Grant] = {}
        self.tokens: dict[str, Token] = {}
        self._serial = itertools.count(1)

    # what a test sets up -----------------------------------------------------------------

    def app(self, *, client_id: str, client_secret: str, redirect_uri: str | None = None) -> None:
        """The app's credentials and its registered redirect URL."""
        self.client_id, self.client_secret, self.redirect_uri = (
            client_id,
            client_secret,
            redirect_uri,
        )

    def team(
        self,
        team_id: str,
        *,
        channels: tuple[str, ...] = (),
        enterprise_id: str | None = None,
        name: str | None = None,
    ) -> Team:
        """A workspace the app can be installed in; its bot user and bot ids are its own."""
        n = next(self._serial)
        found = self.teams[team_id] = Team(
            team_id=team_id,
            name=name or f"Team {team_id}",
            bot_user_id=f"U{n}BOT{team_id}",
            bot_id=f"B{n}BOT{team_id}",
            enterprise_id=enterprise_id,
            enterprise_name=f"Org {enterprise_id}" if enterprise_id else None,
            channels=set(channels),
        )
        return found

    def approve(self, authorize_url: str, *, team: str, user: str, org_wide: bool = False) -> str:
        """A person of `team` clicks Allow on Slack's authorize page: the one-time code Slack
        puts in the redirect; `org_wide`: an Enterprise Grid admin installs it for the whole
        org (the team's) instead. The page itself refuses an app or a scope list it does not know
        (raised here: in Slack the person sees an error page, and no code exists)."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url).query).items()}
        if query.get("client_id") != self.client_id:
            raise ValueError("the authorize page names another app")
        if not query.get("scope"):
            raise ValueError("the authorize page asks for no bot scope")
        if team not in self.teams:
            raise ValueError(f"no workspace {team} in the stand-in")
        if org_wide and not self.teams[team].enterprise_id:
            raise ValueError(f"{team} is in no Enterprise Grid org")
        code = f"{team}.{secrets.token_hex(8)}"
        self.grants[code] = Grant(
            client_id=query["client_id"],
            team_id=team,
            user=user,
            scopes=query["scope"],
            redirect_uri=query.get("redirect_uri"),
            org_wide=org_wide,
        )
        return code

    def revoke(self, team: str) -> None:
        """The workspace's tokens die (what Slack does before `app_uninstalled` and
        `tokens_revoked` reach the app)."""
        for token in self.tokens.values():
            if token.team_id == team:
                token.live = False

    def token_of(self, team: str) -> str:
        """The newest token issued for `team` (a test may then call as that workspace)."""
        return next(t for t, info in reversed(self.tokens.items()) if info.team_id == team)

    # what the stand-in asks --------------------------------------------------------------

    @property
    def strict(self) -> bool:
        return bool(self.teams)

    def refusal(self, token: str | None, args: dict[str, Any]) -> dict[str, Any] | None:
        """Why a call with `token` is refused (None: it may go on)."""
        if not self.strict:
            return None
        found = self.tokens.get(token or "")
        if found is None or not found.live:
            return {"ok": False, "error": "invalid_auth"}
        team = self.teams[found.team_id]
        for name in CHANNEL_ARGS:
            channel = args.get(name)
            if channel and channel not in team.channels:
                return {"ok": False, "error": "channel_not_found"}
        return None

    def team_of(self, token: str | None) -> str | None:
        found = self.tokens.get(token or "")
        return found.team_id if found is not None else None

    @contextlib.contextmanager
    def acting_for(self, standin: Identity, token: str | None) -> Iterator[None]:
        """Answer one call as the token's workspace (its team and bot ids), then as before."""
        team = self.teams.get(self.team_of(token) or "") if self.strict else None
        if team is None:
            yield
            return
        saved = (standin.team_id, standin.team_name, standin.bot_user_id, standin.bot_id)
        standin.team_id, standin.team_name = team.team_id, team.name
        standin.bot_user_id, standin.bot_id = team.bot_user_id, team.bot_id
        try:
            yield
        finally:
            standin.team_id, standin.team_name, standin.bot_user_id, standin.bot_id = saved

    def auth_test_extra(self, token: str | None) -> dict[str, Any]:
        team = self.teams.get(self.team_of(token) or "")
        if team is None:
            return {}
        return {"enterprise_id": team.enterprise_id, "app_id": self.app_id}

    def access(self, args: dict[str, Any], authorization: str) -> dict[str, Any]:
        """`oauth.v2.access`: a code for a bot token, once."""
        client_id, client_secret = _basic(authorization) or (
            args.get("client_id"),
            args.get("client_secret"),
        )
        if self.client_id is None or client_id != self.client_id:
            return {"ok": False, "error": "invalid_client_id"}
        if client_secret != self.client_secret:
            return {"ok": False, "error": "bad_client_secret"}
        grant = self.grants.get(str(args.get("code") or ""))
        if grant is None or grant.client_id != client_id:
            return {"ok": False, "error": "invalid_code"}
        if args.get("redirect_uri") != grant.redirect_uri:
            # "This must match the originally submitted URI (if one was sent)."
            return {"ok": False, "error": "bad_redirect_uri"}
        del self.grants[str(args["code"])]  # a code is exchanged once
        team = self.teams[grant.team_id]
        token = f"xoxb-{team.team_id}-{secrets.token_hex(12)}"
        self.tokens[token] = Token(team_id=team.team_id)
        enterprise = (
            {"id": team.enterprise_id, "name": team.enterprise_name} if team.enterprise_id else None
        )
        return {
            "ok": True,
            "access_token": token,
            "token_type": "bot",
            "scope": grant.scopes,
            "bot_user_id": team.bot_user_id,
            "app_id": self.app_id,
            # An org-wide install names the org and no team.
            "team": None if grant.org_wide else {"id": team.team_id, "name": team.name},
            "enterprise": enterprise,
            "is_enterprise_install": grant.org_wide,
            "authed_user": {"id": grant.user},
        }


def bearer(authorization: str, args: dict[str, Any]) -> str | None:
    """The call's token: the `Authorization: Bearer` header, or a `token` argument."""
    if authorization.startswith("Bearer "):
        return authorization.removeprefix("Bearer ").strip() or None
    token = args.get("token")
    return token if isinstance(token, str) and token else None


def _basic(authorization: str) -> tuple[str, str] | None:
    if not authorization.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(authorization.removeprefix("Basic "), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, _, secret = decoded.partition(":")
    return client_id, secret
