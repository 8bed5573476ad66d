"""What a renderer settles, before reading any event, of what a previous one left half done.

The reply a crash left open is put back to its saved body and the turn's reply goes on in that
same message (edited from now on: its stream cannot be resumed), so a crash never splits one
reply over two messages. A post begun but never heard back from is looked for in Slack and
either adopted or sent (replies are written again by the log after the cursor). An approval
answered while the click's process died is shown as answered.

Only one message is open when a batch is saved, so of several found open the first is the one
the log after the cursor goes on in. The others were opened after that save (their saved bodies
are empty) and the same events open them again, so they are deleted; kept, they would end the
first message early, at its saved body, and send the rest of its reply to a new message below
what the dead renderer had posted after it.
"""

from __future__ import annotations

import time

from bot.slack.rendering.approval_posts import ApprovalPosts
from bot.slack.rendering.parts import PartContent, UpdatePart
from bot.slack.rendering.replies import ReplyWriter, TurnView, shows_nothing
from bot.slack.rendering.thread import SlackThread
from storage.delivery.store import DeliveryStore, Post, PostUpdate


async def recover(
    *,
    key: str,
    delivery: DeliveryStore,
    slack: SlackThread,
    replies: ReplyWriter,
    approvals: ApprovalPosts,
) -> None:
    continued: tuple[Post, UpdatePart] | None = None
    for post in await delivery.posts(key, states=("posting", "open", "answered")):
        if post.state == "answered":
            await approvals.show_answered(post)
            continue
        ts = post.ts
        if post.state == "posting":
            ts = await slack.find_posted(
                post.post_key,
                since=post.opened_at,
                streamed=post.kind == "reply" and post.mode == "stream",
            )
            if ts is None:
                if post.kind == "reply":
                    await delivery.update_post(
                        PostUpdate(post_key=post.post_key, state="empty"), time.time()
                    )
                else:
                    await slack.send_post(post)
                continue
        if post.kind != "reply" or ts is None:
            await delivery.update_post(
                PostUpdate(post_key=post.post_key, ts=ts, state="closed"), time.time()
            )
            continue
        empty = shows_nothing(PartContent.from_body(post.body))
        if continued is not None and empty:
            await slack.stop_stream(post.channel, ts)
            await slack.delete(post.post_key, ts)
            continue
        if continued is not None:
            await replies.close_restored(*continued)
        continued = (post, await replies.restore(post, ts))
    if continued is not None:
        post, part = continued
        replies.view = TurnView(turn_id=post.turn_id, part=part, shown_any=True)
