"""Task cards that wait for a person, and what they say once the request ends.

A call that parks for an answer, or a write proposed for a person to confirm, shows "waiting for
approval" in the reply message the turn was writing; that message is closed when the request
is posted, and the turn (or the one acting on the answer) goes on in new messages. Whatever
ends the request (a click in the thread or on the Home tab, the HTTP API, the CLI, an expiry,
a Stop), the engine logs `input.resolved` / `confirmation.resolved`; on it the earlier message
is edited so that line says how the request ended ("approved by @alice", "denied by @alice:
…", "expired: …", "stopped by @bob"), and the call's later card, when it runs after the
answer, says the same (a denied call that returned is not "✓").

The card is found by its note (`waits`: `input:<request>` or `confirm:<confirmation>`) in the
saved bodies of the turn's messages (the delivery store keeps each message's body): so it is
found however long ago it was posted and by whichever process renders now. The edited body is
saved with the events' cursor, like every other change a batch makes; a renderer that dies
before that save edits it again when it re-applies the event (the same edit, made twice).
"""

from __future__ import annotations

from typing import Any

from agent.seams import SessionStore
from bot.slack.rendering.content import PartContent, message_body
from bot.slack.rendering.outcomes import Verdict
from bot.slack.rendering.replies import ReplyWriter
from bot.slack.rendering.thread import SlackThread
from storage.delivery.store import DeliveryStore


def input_waits(input_id: str) -> str:
    return f"input:{input_id}"


def confirm_waits(confirmation_id: str) -> str:
    return f"confirm:{confirmation_id}"


class WaitingTasks:
    def __init__(
        self,
        *,
        key: str,
        store: SessionStore,
        delivery: DeliveryStore,
        slack: SlackThread,
        replies: ReplyWriter,
    ) -> None:
        self.key = key
        self.store = store
        self.delivery = delivery
        self.slack = slack
        self.replies = replies
        self._verdicts: dict[tuple[str, str], Verdict] = {}
        self._read: set[str] = set()
        """Turns whose saved verdicts were read into `_verdicts` (once per turn)."""

    async def answer_of(self, turn_id: str, input_id: str) -> Any:
        """The value a park was answered with (`False` is a denial): the engine's answer step."""
        steps = await self.store.load_steps(self.key, turn_id)
        return steps.get(f"input:{turn_id}:{input_id}")

    async def resolved(self, turn_id: str, waits: str, verdict: Verdict) -> None:
        """The request `waits` of `turn_id` ended as `verdict`: every card waiting on it (in
        the message open now, or in a closed one, which is edited) says so."""
        status, output = verdict
        view = self.replies.view
        current = view.part if view is not None else None
        if current is not None:
            for task_id, task in list(current.content.tasks.items()):
                if task.get("waits") == waits:
                    current.task(task_id, task["title"], status, output, verdict=list(verdict))
                    self._verdicts[(turn_id, task_id)] = verdict
        for post in await self.delivery.posts(self.key, turn_id=turn_id, kind="reply"):
            if current is not None and post.post_key == current.post_key:
                continue
            content = PartContent.from_body(self.replies.saved_body(post))
            waiting = [t for t in content.tasks.values() if t.get("waits") == waits]
            if not waiting:
                continue
            for task in waiting:
                task.update(status=status, verdict=list(verdict))
                task.pop("output", None)
                if output:
                    task["output"] = output
                self._verdicts[(turn_id, str(task["id"]))] = verdict
            if post.ts is not None:
                await self._edit(post.channel, post.ts, content)
            self.replies.keep(post.post_key, content.body())

    async def _edit(self, channel: str, ts: str, content: PartContent) -> None:
        """A closed message (streamed and stopped, or posted) shown anew: `chat.update` with
        its words and task cards as blocks (`message_body`), as Slack edits any message."""
        shown = message_body(content)
        await self.slack.patient(
            "chat.update",
            lambda: self.slack.client.chat_update(channel=channel, ts=ts, **shown),
        )

    def remember(self, turn_id: str, call_id: str, verdict: Verdict) -> None:
        """A call that needed no person (a policy approved it) still ends with its verdict."""
        self._verdicts[(turn_id, call_id)] = verdict

    async def verdict(self, turn_id: str, call_id: str) -> Verdict | None:
        """How the request of a call that waited ended, if it did: from this renderer's memory,
        or the turn's saved messages (a renderer that started after the request ended)."""
        if turn_id not in self._read:
            self._read.add(turn_id)
            for post in await self.delivery.posts(self.key, turn_id=turn_id, kind="reply"):
                for task in PartContent.from_body(self.replies.saved_body(post)).tasks.values():
                    said = task.get("verdict")
                    if isinstance(said, list) and len(said) == 2:
                        self._verdicts.setdefault((turn_id, str(task["id"])), (said[0], said[1]))
        return self._verdicts.get((turn_id, call_id))
