"""Showing turns in Slack: each session's durable event log rendered into its thread.

`pool` runs one `SessionRenderer` per session with something to show, in whichever process
holds that session's delivery lease. The renderer (`renderer`) decides what each event means for
the thread; the parts it delegates to each do one job: `lease` (the delivery lease and the fence
before every Slack call), `thread` (those calls, and finding a post whose answer was lost),
`status` (the thread's status line), `replies` (the reply messages: streamed, rolled over,
taken over, closed; built of `parts`, showing `content`), `outcomes` (what a tool call's card
says it ended as), `waiting` (the cards that wait for a person, rewritten when their request
ends), `approval_posts` (Approve / Deny requests) and `recovery` (what a dead renderer left
half done). `backoff` is how long the pool waits before it tries a session that failed again.
"""

from bot.slack.rendering.lease import LeaseLost, RenderSettings
from bot.slack.rendering.pool import RendererPool
from bot.slack.rendering.renderer import SessionRenderer

__all__ = ["LeaseLost", "RenderSettings", "RendererPool", "SessionRenderer"]
