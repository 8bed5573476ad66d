"""The Home tab's "Standing grants": the grants that let a tool's later calls run without asking
("Approve & allow again", `bot.slack.grant_modal`), listed for the person who gave them and the
person they cover, each with a Revoke button.

What is listed is the engine's query (`agent.standing_grants`: live now, in the viewer's own
workspace), narrowed to the grants the viewer gave or that cover the viewer's calls: the two
people who may revoke one without asking anyone (an admin whom `authorize_answer` admits for
`agent.GRANTS_POLICY` revokes by the same button wherever they find it; the engine decides).

A Revoke click commits the revocation before its ack, as an answer does (Slack never retries
an acknowledged click), then republishes the tab: the clicker's, with a note at its top if the
engine refused (the Home tab has no thread to say it in, as for a refused Home click), and
those of the other people the grant named.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from agent import (
    Agent,
    GrantRecord,
    GrantScope,
    Principal,
    ResumeError,
    Runtime,
    revoke_grant,
    standing_grants,
)
from agent.seams import Grants
from bot.slack.identity import principal_of
from bot.slack.inbound import parse_session_key

log = logging.getLogger(__name__)
Ack = Callable[..., Awaitable[Any]]

REVOKE_GRANT = "agent_revoke_grant"
MAX_GRANTS = 20
"""Grants listed at most (one block each; the tab holds 100 blocks in all)."""
NO_GRANTS = "No standing grants: every proposed write asks first."
UNREADABLE = "I couldn't read your standing grants just now."
REFUSED = "You can't revoke that grant: {why}."
TRY_AGAIN = "I couldn't revoke that grant just now; nothing was changed. Please try again."
REVOKED = "Revoked: {tool} asks again."


async def grants_shown_to(store: Grants, principal: Principal, *, now: float) -> list[GrantRecord]:
    """The live grants of the viewer's workspace that the viewer gave or that cover them."""
    user = principal.get("user")
    if not user:
        return []
    live = await standing_grants(store, principal, now=now)
    return [g for g in live if user in (g.granted_by, g.speaker)]


def until(expires_at: float) -> str:
    """A time as Slack shows it in the reader's own zone, with a UTC fallback."""
    fallback = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(expires_at)}^{{date_short_pretty}} at {{time}}|{fallback}>"


def where(grant: GrantRecord, links: dict[str, str]) -> str:
    if grant.scope == GrantScope.CHANNEL:
        return f"in <#{grant.channel}>" if grant.channel else "in a channel"
    try:
        _, channel, _ = parse_session_key(grant.session)
    except ValueError:
        channel = None
    link = links.get(grant.session)
    thread = f"<{link}|a thread>" if link else "a thread"
    return f"in {thread} in <#{channel}>" if channel else f"in {thread}"


def grants_blocks(
    grants: Sequence[GrantRecord] | None, links: dict[str, str]
) -> list[dict[str, Any]]:
    """The section: a header, then each grant with its Revoke button (None: unreadable)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Standing grants"}}
    ]
    if grants is None or not grants:
        text = UNREADABLE if grants is None else NO_GRANTS
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": text}]})
        return blocks
    for grant in grants[:MAX_GRANTS]:
        line = (
            f"*{grant.tool}* {where(grant, links)} · for <@{grant.speaker}> · "
            f"granted by <@{grant.granted_by}> · until {until(grant.expires_at)}"
        )
        blocks.append(
            {
                "type": "section",
                "block_id": f"grant:{grant.grant_id}",
                "text": {"type": "mrkdwn", "text": line[:3000]},
                "accessory": {
                    "type": "button",
                    "action_id": REVOKE_GRANT,
                    "text": {"type": "plain_text", "text": "Revoke"},
                    "style": "danger",
                    "value": grant.grant_id,
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Revoke this grant?"},
                        "text": {
                            "type": "mrkdwn",
                            "text": f"{grant.tool} will ask for approval again.",
                        },
                        "confirm": {"type": "plain_text", "text": "Revoke"},
                        "deny": {"type": "plain_text", "text": "Cancel"},
                    },
                },
            }
        )
    if len(grants) > MAX_GRANTS:
        more = f"…and {len(grants) - MAX_GRANTS} more."
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": more}]})
    return blocks


class HomeTabs(Protocol):
    """How a revocation is shown (`bot.slack.home.HomeTab`)."""

    def tell(self, principal: Principal, notice: str | None) -> None:
        """Republish one person's tab, with `notice` at its top, in the background."""
        ...

    def refresh(self, team: str, users: set[str] | None = None) -> None:
        """Republish the tabs of these people of `team`, in the background."""
        ...


class GrantRevokes:
    """A Revoke click in the Home tab."""

    def __init__(self, *, runtime: Runtime, agent: Agent, home: HomeTabs) -> None:
        self.runtime = runtime
        self.agent = agent
        self.home = home

    async def handle(self, body: dict[str, Any], ack: Ack) -> None:
        """Revoke (committed before the ack), then republish the Home tabs it showed in."""
        principal = principal_of(body)
        try:
            grant_id = str(body["actions"][0]["value"])
        except (KeyError, IndexError, TypeError):
            grant_id = ""
        user = principal.get("user") if principal is not None else None
        if principal is None or not user or not grant_id:
            log.warning("unreadable Revoke click ignored")
            await ack()
            return
        affected: set[str] = set()
        try:
            revoked = await revoke_grant(
                self.runtime.store,
                grant_id,
                by=user,
                principal=principal,
                authorize_answer=self.agent.authorize_answer,
                now=self.runtime.clock(),
            )
        except ResumeError as refused:
            notice = REFUSED.format(why=str(refused).rstrip("."))
        except Exception:
            log.exception("revoking a grant failed; nothing was changed")
            notice = TRY_AGAIN
        else:
            notice = REVOKED.format(tool=revoked.tool)
            affected = {revoked.granted_by, revoked.speaker} - {user}
        await ack()
        # After the ack (Slack wants it within three seconds): in the Home tab's background.
        self.home.tell(principal, notice)
        team = principal.get("team")
        if affected and team:
            self.home.refresh(team, affected)
