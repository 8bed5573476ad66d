"""The App Home tab as an approval inbox: every request the person may answer, across channels
and threads, with Approve / Deny, and their recent conversations.

Published with `views.publish` (https://docs.slack.dev/reference/methods/views.publish) when the
person opens the tab (`app_home_opened` with `tab: "home"`,
https://docs.slack.dev/reference/events/app_home_opened), and again whenever a request they
may answer appears or goes (the renderer posts or settles one, a click answers one), for the
people who have opened it (`slack_home_viewers`).

What it lists is one engine query, `runtime.answerable(principal)`: the rules an answer is
checked by, so the inbox never offers what a click would be refused, and a person who may
answer nothing sees an empty inbox, never someone else's. Its buttons carry the same
`ApprovalRef` value as the thread's (session, turn, request, digest) and a click goes through
the same `AnswerHandler` path: the same authorization, digest binding and engine calls.

Below the inbox, the person's standing grants (`bot.slack.home_grants`): what they allowed
again, or what was allowed again for them, each with Revoke.

The view passes the `hash` Slack gave with the event, so a publish based on what the person saw
cannot overwrite a newer one unnoticed (`hash_conflict`); this one then publishes again from the
database, which is the newer state anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from slack_sdk.web.async_client import AsyncWebClient

from agent import GrantRecord, GrantScope, Principal, Tally
from agent.seams import Grants
from bot.slack.approval_blocks import (
    APPROVE,
    DENY,
    ApprovalRef,
    Kind,
    modal_buttons,
    progress_text,
)
from bot.slack.calls import Refused, SlackCallError, call
from bot.slack.clients import SlackClients
from bot.slack.home_grants import grants_blocks, grants_shown_to
from bot.slack.inbound import parse_session_key
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)

MAX_LISTED = 20
"""Requests shown at most (a Home view holds 100 blocks; each takes three)."""
MAX_PROMPT = 300
EMPTY = "Nothing is waiting for your answer."
STATUS_MARKS = {
    "completed": "✅",
    "failed": "⚠️",
    "cancelled": "⏹️",
    "suspended": "🙋",
    "running": "⏳",
    "queued": "⏳",
}


class Pending(Protocol):
    """What the inbox shows of a request (`agent.PendingApproval`)."""

    @property
    def kind(self) -> Kind: ...
    @property
    def session(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def prompt(self) -> str: ...
    @property
    def asked_by(self) -> str | None: ...
    @property
    def created_at(self) -> float | None: ...
    @property
    def digest(self) -> str: ...
    @property
    def tally(self) -> Tally | None: ...
    @property
    def tool(self) -> str: ...


Offers = Callable[[str], tuple[float | None, Sequence[str] | None]]
"""A tool's name → what an approver may choose beyond Approve and Deny: its `grantable_for`
and its `editable` arguments (the agent's declaration; `HomeTab(offers=)`)."""


class Recent(Protocol):
    """What the inbox shows of one of the person's turns (`agent.RecentTurn`)."""

    @property
    def session(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def status(self) -> Any: ...


class Inbox(Protocol):
    """The engine's queries the Home tab is built from (`agent.Runtime`)."""

    async def answerable(self, principal: Principal) -> Sequence[Pending]: ...
    async def recent_turns(self, principal: Principal, limit: int = 10) -> Sequence[Recent]: ...
    @property
    def store(self) -> Grants:
        """Where the standing grants are (`agent.standing_grants` reads them)."""
        ...

    @property
    def clock(self) -> Callable[[], float]:
        """The engine's clock: a grant is live until its `expires_at` by this clock."""
        ...


def ref_of(pending: Pending) -> ApprovalRef:
    """The button value, as the thread's request carries it: session, turn, request and the
    digest an answer is bound to (a park's and a proposed write's alike)."""
    return ApprovalRef(
        kind=pending.kind,
        session=pending.session,
        turn_id=pending.turn_id,
        ident=pending.request_id,
        digest=pending.digest,
    )


def ago(then: float | None, now: float) -> str:
    if then is None:
        return "a while ago"
    seconds = max(0, int(now - then))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


def who(asked_by: str | None) -> str:
    if not asked_by:
        return "someone"
    return f"<@{asked_by}>" if not asked_by.startswith(("cron:", "host")) else f"`{asked_by}`"


def home_view(
    pending: Sequence[Pending],
    recent: Sequence[Recent],
    links: dict[str, str],
    *,
    now: float,
    notice: str | None = None,
    grants: Sequence[GrantRecord] | None = (),
    offers: Offers | None = None,
) -> dict[str, Any]:
    """The Home tab's view. `links`: a permalink per session (its thread), where Slack gave one.
    `grants`: the person's standing grants (None: they could not be read). `offers`: the
    buttons a proposed write offers beyond Approve and Deny, as its thread message does (never
    on a request that needs several approvals)."""
    blocks: list[dict[str, Any]] = []
    if notice:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": notice}]})
    blocks.append(_header("Waiting for your answer"))
    if not pending:
        blocks.append(_section(EMPTY))
    for n, item in enumerate(pending[:MAX_LISTED]):
        link = links.get(item.session)
        where = f" · <{link}|open the thread>" if link else ""
        asked = f"Asked by {who(item.asked_by)} · {ago(item.created_at, now)}{where}"
        prompt = item.prompt if len(item.prompt) <= MAX_PROMPT else item.prompt[:MAX_PROMPT] + "…"
        if item.tally is not None:  # one vote of several: who voted so far
            asked += f"\n{progress_text(item.tally)}"
        blocks.append(_section(f"🙋 {prompt}\n{asked}"))
        value = ref_of(item).encode()
        blocks.append(
            {
                "type": "actions",
                "block_id": f"approval:{n}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": APPROVE,
                        "text": {"type": "plain_text", "text": "Approve"},
                        "style": "primary",
                        "value": value,
                        "confirm": {
                            "title": {"type": "plain_text", "text": "Approve this request?"},
                            "text": {"type": "mrkdwn", "text": prompt[:300]},
                            "confirm": {"type": "plain_text", "text": "Approve"},
                            "deny": {"type": "plain_text", "text": "Cancel"},
                        },
                    },
                    {
                        "type": "button",
                        "action_id": DENY,
                        "text": {"type": "plain_text", "text": "Deny"},
                        "style": "danger",
                        "value": value,
                    },
                    *_offered(item, offers),
                ],
            }
        )
    if len(pending) > MAX_LISTED:
        blocks.append(_context(f"…and {len(pending) - MAX_LISTED} more."))
    blocks.append({"type": "divider"})
    blocks.extend(grants_blocks(grants, links))
    blocks.append({"type": "divider"})
    blocks.append(_header("Your recent conversations"))
    if not recent:
        blocks.append(_context("None yet: mention me in a thread, or write to me here."))
    for turn in recent:
        status = getattr(turn.status, "value", str(turn.status))
        text = " ".join(turn.text.split())[:120] or "(no text)"
        link = links.get(turn.session)
        where = f" · <{link}|thread>" if link else ""
        mark = STATUS_MARKS.get(status, "•")
        blocks.append(_context(f"{mark} {text} · {status} · {ago(turn.created_at, now)}{where}"))
    return {"type": "home", "blocks": blocks}


def _offered(item: Pending, offers: Offers | None) -> list[dict[str, Any]]:
    if offers is None or item.kind != "confirm" or item.tally is not None:
        return []
    grantable_for, editable = offers(item.tool)
    return [button.to_dict() for button in modal_buttons(ref_of(item), grantable_for, editable)]


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


class HomeTab:
    def __init__(
        self,
        *,
        inbox: Inbox,
        delivery: DeliveryStore,
        clients: SlackClients,
        offers: Offers | None = None,
    ) -> None:
        self.inbox = inbox
        self.offers = offers
        self.delivery = delivery
        self.clients = clients
        self._links: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._publishing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._again: set[tuple[str, str]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    async def opened(self, principal: Principal, *, hash: str | None = None) -> None:
        """The person opened the tab: remember them, and show their inbox."""
        team, user = principal.get("team"), principal.get("user")
        if not team or not user:
            return
        await self.delivery.note_home_viewer(team, user, principal.get("enterprise"), time.time())
        await self.publish(principal, hash=hash)

    async def publish(
        self, principal: Principal, *, hash: str | None = None, notice: str | None = None
    ) -> None:
        user, team = principal.get("user"), principal.get("team")
        if not user or not team:
            return
        client = await self.clients.for_team(team, principal.get("enterprise"))
        pending = list(await self.inbox.answerable(principal))
        recent = list(await self.inbox.recent_turns(principal, limit=10))
        grants = await self._grants(principal)
        in_threads = {g.session for g in grants or () if g.scope == GrantScope.THREAD}
        links = await self._permalinks(
            client, {p.session for p in pending} | {r.session for r in recent} | in_threads
        )
        view = home_view(
            pending,
            recent,
            links,
            now=time.time(),
            notice=notice,
            grants=grants,
            offers=self.offers,
        )
        try:
            await call("views.publish", lambda: self._publish(client, user, view, hash))
        except Refused as refused:
            if refused.code != "hash_conflict":
                raise
            # Someone published since the view the event showed: this one is built from the
            # database now, the newest state there is, so it goes out over whatever is shown.
            await call("views.publish", lambda: self._publish(client, user, view, None))

    async def _grants(self, principal: Principal) -> list[GrantRecord] | None:
        """The person's standing grants; None (the tab says so) if they cannot be read, rather
        than no tab at all."""
        try:
            return await grants_shown_to(self.inbox.store, principal, now=self.inbox.clock())
        except Exception:
            log.exception("could not read the standing grants for a Home tab")
            return None

    def tell(self, principal: Principal, notice: str | None) -> None:
        """Republish one person's tab with `notice` at its top, in the background (after a
        click's ack: the Home tab has no thread to answer in)."""
        if self._closed:
            return
        task = asyncio.create_task(self._tell(principal, notice))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _tell(self, principal: Principal, notice: str | None) -> None:
        try:
            await self.publish(principal, notice=notice)
        except SlackCallError as err:
            log.warning("could not republish a Home tab", extra={"code": err.code})
        except Exception:
            log.exception("could not republish a Home tab")

    async def _publish(
        self, client: AsyncWebClient, user: str, view: dict[str, Any], hash: str | None
    ) -> Any:
        return await client.views_publish(user_id=user, view=view, hash=hash)

    def refresh(self, team: str, users: set[str] | None = None) -> None:
        """Republish the inbox, in the background, for the people of `team` with a Home tab who
        may be affected (only `users`, if given); cheap, and coalesced per person."""
        if self._closed:
            return
        task = asyncio.create_task(self._refresh(team, users))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _refresh(self, team: str, users: set[str] | None) -> None:
        try:
            viewers = await self.delivery.home_viewers(team, users)
        except Exception:
            log.exception("could not read who has a Home tab")
            return
        for user, enterprise in viewers:
            principal: Principal = {"team": team, "enterprise": enterprise, "user": user}
            self._schedule(principal)

    def _schedule(self, principal: Principal) -> None:
        key = (str(principal.get("team")), str(principal.get("user")))
        running = self._publishing.get(key)
        if running is not None and not running.done():
            self._again.add(key)
            return
        task = asyncio.create_task(self._publish_logged(principal))
        self._publishing[key] = task

        def done(_: asyncio.Task[None]) -> None:
            self._publishing.pop(key, None)
            if key in self._again and not self._closed:
                self._again.discard(key)
                self._schedule(principal)

        task.add_done_callback(done)

    async def _publish_logged(self, principal: Principal) -> None:
        try:
            await self.publish(principal)
        except SlackCallError as err:
            log.warning("could not refresh a Home tab", extra={"code": err.code})
        except Exception:
            log.exception("could not refresh a Home tab")

    async def settle(self, grace: float = 2.0) -> None:
        """Wait (briefly) for the refreshes under way."""
        tasks = [t for t in (*self._background, *self._publishing.values()) if not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    async def close(self) -> None:
        self._closed = True
        await self.settle()
        for task in (*self._background, *self._publishing.values()):
            task.cancel()

    async def _permalinks(self, client: AsyncWebClient, sessions: set[str]) -> dict[str, str]:
        """A link to each session's thread (`chat.getPermalink`, cached: a message's permalink
        does not change)."""
        found: dict[str, str] = {}
        for key in sessions:
            try:
                _, channel, thread_ts = parse_session_key(key)
            except ValueError:
                continue
            if thread_ts is None:
                continue
            cached = self._links.get((channel, thread_ts))
            if cached is None:
                try:
                    cached = await self._permalink(client, channel, thread_ts)
                except SlackCallError:
                    continue
                self._links[(channel, thread_ts)] = cached
                while len(self._links) > 2048:
                    self._links.popitem(last=False)
            found[key] = cached
        return found

    async def _permalink(self, client: AsyncWebClient, channel: str, ts: str) -> str:
        answer = await call(
            "chat.getPermalink",
            lambda: client.chat_getPermalink(channel=channel, message_ts=ts),
        )
        return str(answer["permalink"])
