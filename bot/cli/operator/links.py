"""A link to a conversation's Slack thread, built from what the database holds.

The operator's commands never call Slack, so `chat.getPermalink` is out of reach; what is
stored is where the bot posts a session's replies (the delivery target: workspace, channel,
thread ts; else the session key `slack:<team>:<channel>:<thread_ts>` says it) and the ts of
each approval message it posted. Two links can be made from that:

- with the workspace's domain (`--slack-domain acme`), the permalink Slack itself returns from
  `chat.getPermalink` (https://docs.slack.dev/reference/methods/chat.getPermalink):
  `https://acme.slack.com/archives/<channel>/p<ts without the dot>` for the thread's first
  message, and for a message inside the thread (the approval request) the same with
  `?thread_ts=<thread ts>&cid=<channel>`;
- without it, Slack's documented deep link that opens the channel in the right workspace,
  `https://slack.com/app_redirect?team=<team>&channel=<channel>`
  (https://docs.slack.dev/interactivity/deep-linking): it cannot name a thread, so the thread's
  ts is printed beside it (`/agent-reset` takes it too).

The domain is not stored anywhere (Slack sends it only with slash commands), hence the flag
(`--slack-domain`, read by `bot.cli.operator.arguments.slack_domain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.slack.inbound import parse_session_key
from storage.delivery.store import DeliveryStore


@dataclass(frozen=True, kw_only=True)
class ThreadPlace:
    team: str
    channel: str
    thread_ts: str | None
    """None: a proactive post at the top of the channel."""

    def link(self, domain: str | None, message_ts: str | None = None) -> str:
        """The message's permalink where the domain is known (the thread's first message if no
        `message_ts`); otherwise the channel's deep link."""
        ts = message_ts or self.thread_ts
        if domain and ts:
            link = f"https://{domain}.slack.com/archives/{self.channel}/p{ts.replace('.', '')}"
            if self.thread_ts and ts != self.thread_ts:
                link += f"?thread_ts={self.thread_ts}&cid={self.channel}"
            return link
        return f"https://slack.com/app_redirect?team={self.team}&channel={self.channel}"

    def to_json(self) -> dict[str, Any]:
        return {"team": self.team, "channel": self.channel, "thread_ts": self.thread_ts}


async def thread_place(delivery: DeliveryStore, session: str) -> ThreadPlace | None:
    """Where the session's replies go: the delivery target, or what its key says; None for a
    session that is not a Slack conversation."""
    target = await delivery.get_target(session)
    if target is not None:
        return ThreadPlace(team=target.team, channel=target.channel, thread_ts=target.thread_ts)
    try:
        team, channel, thread_ts = parse_session_key(session)
    except ValueError:
        return None
    return ThreadPlace(team=team, channel=channel, thread_ts=thread_ts)


async def approval_message_ts(
    delivery: DeliveryStore, session: str, kind: str, request_id: str
) -> str | None:
    """The ts of the approval message the renderer posted for this request, if it did."""
    suffix = f"|{kind}|{request_id}"
    posts = await delivery.posts(session, kind="approval")
    post = next((p for p in reversed(posts) if p.post_key.endswith(suffix)), None)
    return post.ts if post is not None else None
