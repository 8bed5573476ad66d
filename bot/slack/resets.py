"""Resetting a conversation from Slack: the `/agent-reset` slash command and the "Reset this
conversation" message shortcut.

Two surfaces, one decision. Each only reads its payload into a `ResetRequest`; which
conversation that names, whether this person may reset it, the reset itself and the answer are
the same code for both, so the two cannot come to disagree. The shortcut exists because Slack
runs no app's slash command inside a thread: from a message's menu a person resets the very
thread they are looking at.

Both are acknowledged at once, before anything is read (Slack shows an error after three
seconds, and a reset archives a whole conversation), and reset in a lazy listener after the
response. The answer is ephemeral, to the person who asked, and names the thread it reset.

Who may reset: anyone in the conversation's workspace, as for the command. A user id names a
person only within their own workspace (as for Approve / Deny), so a person from another
workspace (a guest in a channel shared between workspaces) is told so and nothing is reset;
a request from another workspace looks up that workspace's conversations, never this one's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent import Agent, Runtime
from bot.slack.calls import SlackCallError, call
from bot.slack.clients import SlackClients
from bot.slack.identity import principal_of, workspace_of
from bot.slack.inbound import session_key
from storage.delivery.store import DeliveryStore, Target

log = logging.getLogger(__name__)

RESET_SHORTCUT = "reset_conversation"
"""The message shortcut's callback id, as `manifest.yml` declares it."""

Ack = Callable[..., Awaitable[Any]]
Say = Callable[[str], Awaitable[None]]

NO_CONVERSATION = "There is no conversation with me here to reset."
OTHER_WORKSPACE = (
    "This conversation belongs to another workspace than yours, so I can't take a reset from "
    "you here. Nothing was reset."
)
FAILED = "The reset failed; nothing was archived. Please try again."
_PERMALINK_TS = re.compile(r"p(\d{10})(\d{6})")
_TS = re.compile(r"\d{10}\.\d{6}")
_DOMAIN = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


@dataclass(frozen=True, kw_only=True)
class ResetRequest:
    """A person asking for a reset, read from a signed payload."""

    team: str
    """The workspace the request came from: its conversations are the ones looked up."""
    person_team: str
    """The asker's own workspace."""
    user: str
    channel: str
    thread: str | None
    """The thread named (a ts); None: the channel's most recent conversation."""
    or_latest: bool = False
    """No conversation in `thread`: reset the channel's most recent one instead."""
    domain: str | None = None
    """The workspace's domain, for a link to the thread in the answer."""
    reply_in: str | None = None
    """The thread to answer in where the answer cannot go to the `response_url`."""

    @classmethod
    def from_command(cls, command: dict[str, Any]) -> ResetRequest:
        """A slash command: no thread in the payload (Slack runs none inside threads), so the
        thread is whatever the text names (a ts or a link), else the channel's latest."""
        team = str(command.get("team_id"))
        asker = principal_of(command)
        return cls(
            team=team,
            person_team=str((asker or {}).get("team") or team),
            user=str(command.get("user_id")),
            channel=str(command.get("channel_id")),
            thread=thread_named_in(str(command.get("text") or "")),
            domain=_domain(command.get("team_domain")),
        )

    @classmethod
    def from_shortcut(cls, shortcut: dict[str, Any]) -> ResetRequest:
        """A message shortcut: the conversation is the message's thread, or the message's own
        if it starts one. A message outside any thread resets what the command would with no
        thread named: the channel's latest conversation.

        `bot.slack.payload_shape` has made sure `message`, `channel` and `user` are objects with
        ids.
        """
        message, user = shortcut["message"], shortcut["user"]
        team = shortcut.get("team") or {}
        team_id = str(workspace_of(shortcut).team or user.get("team_id"))
        thread_ts = message.get("thread_ts")
        # The asker's own workspace, as every surface reads it (`bot.slack.identity`): in Enterprise
        # Grid `user.team_id` is the org's id, and the workspace is the shortcut's `team`.
        asker = principal_of(shortcut)
        return cls(
            team=team_id,
            person_team=str((asker or {}).get("team")),
            user=str(user["id"]),
            channel=str(shortcut["channel"]["id"]),
            thread=str(thread_ts or message["ts"]),
            or_latest=not thread_ts,
            domain=_domain(team.get("domain")),
            reply_in=str(thread_ts) if thread_ts else None,
        )


class Resets:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        clients: SlackClients,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.clients = clients

    # the two surfaces ----------------------------------------------------------------------

    async def ack_command(self, ack: Ack) -> None:
        await ack(response_type="ephemeral", text="Resetting this conversation…")

    async def on_command(self, command: dict[str, Any], respond: Ack) -> None:
        await self.reset(ResetRequest.from_command(command), _responding(respond))

    async def ack_shortcut(self, ack: Ack) -> None:
        await ack()

    async def on_shortcut(self, shortcut: dict[str, Any], respond: Ack) -> None:
        request = ResetRequest.from_shortcut(shortcut)
        say = _responding(respond) if shortcut.get("response_url") else self._ephemeral(request)
        await self.reset(request, say)

    # the decision --------------------------------------------------------------------------

    async def reset(self, request: ResetRequest, say: Say) -> None:
        if request.person_team != request.team:
            await say(OTHER_WORKSPACE)
            return
        known = await self._conversation(request)
        if known is None:
            await say(NO_CONVERSATION)
            return
        key = known.session_key
        try:
            result = await self.runtime.session(self.agent, key).reset()
        except Exception:
            log.exception("reset failed", extra={"session": key})
            await say(FAILED)
            return
        log.info("conversation reset", extra={"session": key, "by": request.user})
        archived = await self._archived_messages(key, result.generation - 1)
        what = (
            f"{archived} message{'s' if archived != 1 else ''}"
            if archived is not None
            else "its history"
        )
        await say(
            f"Reset done: archived {what} of the conversation in "
            f"{_thread_ref(request.domain, known)} as `{result.previous_session}`. "
            "The next message starts fresh."
        )

    async def _conversation(self, request: ResetRequest) -> Target | None:
        if request.thread:
            key = session_key(request.team, request.channel, request.thread)
            known = await self.delivery.get_target(key)
            if known is not None or not request.or_latest:
                return known
        return await self.delivery.latest_in_channel(request.team, request.channel)

    async def _archived_messages(self, key: str, generation: int) -> int | None:
        read_archive = getattr(self.runtime.store, "read_archive", None)
        if read_archive is None:
            return None
        try:
            archive = await read_archive(key, generation)
        except Exception:
            log.warning("could not read the archive back", extra={"session": key})
            return None
        return len(archive.messages)

    def _ephemeral(self, request: ResetRequest) -> Say:
        """The answer without a `response_url`: an ephemeral message to the asker, in the
        thread the shortcut was used in."""

        async def say(text: str) -> None:
            try:
                client = await self.clients.for_team(request.team)
                await call(
                    "chat.postEphemeral",
                    lambda: client.chat_postEphemeral(
                        channel=request.channel,
                        user=request.user,
                        text=text,
                        thread_ts=request.reply_in,
                    ),
                )
            except SlackCallError as err:
                log.warning("could not answer a reset", extra={"code": err.code})

        return say


def _responding(respond: Ack) -> Say:
    async def say(text: str) -> None:
        await respond(response_type="ephemeral", replace_original=False, text=text)

    return say


def thread_named_in(text: str) -> str | None:
    """A thread named by its ts or by a permalink (`…/p1700000000000100`)."""
    found = _PERMALINK_TS.search(text)
    if found:
        return f"{found.group(1)}.{found.group(2)}"
    found = _TS.search(text)
    return found.group(0) if found else None


def _domain(value: Any) -> str | None:
    return value if isinstance(value, str) and _DOMAIN.fullmatch(value) else None


def _thread_ref(domain: str | None, target: Target) -> str:
    """The thread as a person can find it: a link to it where the workspace's domain is known,
    and its ts either way (which `/agent-reset` also takes)."""
    ts = target.thread_ts or ""
    where = f"<#{target.channel}>"
    if domain and ts:
        link = f"https://{domain}.slack.com/archives/{target.channel}/p{ts.replace('.', '')}"
        return f"<{link}|the thread {ts}> in {where}"
    return f"the thread {ts} in {where}"
