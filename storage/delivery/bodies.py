"""What a delivery post's `body` holds (`PostBody`), and its JSON: `to_json` / `from_json` are the
only code that writes or reads the stored text, so every other module reads attributes.

One model with an optional field per thing any kind of post keeps, not one model per kind,
because of what the posts are:

- A post's kind is its row's `kind` column, not something in its body, and the store returns
  posts of every kind together (`posts(key, states=...)`, recovery's list).
- Readers cross kinds: a whole message is sent the same way for a notice and an approval (its
  `prompt` and `blocks`, `SlackThread.send_post`).
- A post is begun before it has anything to keep (a reply's row goes in empty), and retention
  tells an emptied reply by its stored text being exactly `{}` (`EMPTY_BODY`).

With `None` meaning "not in the JSON", a body reads back as written and writes back key for key
(`{}` stays `{}`), whichever kind it is and whichever version wrote it. What each kind uses:

- reply: `text`, `tasks`, `footer`, `blocks` (what it closed with: an answer's feedback
  buttons); written whole from the renderer's `PartContent` at every save.
- approval: `prompt`, `blocks` (its Block Kit with the buttons), `audience`, then `answered`
  (a click's `AnswerMark`) or `settled` (what its message says it ended as: expired, stopped).
- notice: `prompt`, `claim` (which of two racing deliveries of one event stored the row).

Rows written by other versions: a missing key reads as None; a key this model does not name is
kept in `extra` (here and in an `AnswerMark`) and written back, as the old `{**body, ...}`
rewrites kept it; a value of the wrong type reads as absent (an item of the wrong type in a
list is left out). `blocks` and `tasks` stay JSON
objects: `blocks` is Block Kit passed through to Slack, and a task is the renderer's own card
(`bot.slack.rendering.content` says which of its keys go to Slack).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

EMPTY_BODY = "{}"
"""How `PostBody()` is stored: a post begun with nothing yet, and a reply retention emptied."""


@dataclass(frozen=True, kw_only=True)
class AnswerMark:
    """How an approval was answered, written by the click that answered it (`answered`): its
    message is shown as answered from this, by that click or by a renderer after a crash."""

    by: str | None
    accepted: bool
    reason: str | None = None
    """What a person denying said (only written when they said something)."""
    approved_by: list[str] | None = None
    """For a request that needed several approvals: who approved (only written then)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        known: dict[str, Any] = {"by": self.by, "accepted": self.accepted}
        if self.reason is not None:
            known["reason"] = self.reason
        if self.approved_by is not None:
            known["approved_by"] = list(self.approved_by)
        return _with_extra(known, self.extra)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerMark:
        approved = data.get("approved_by")
        return cls(
            by=_text(data.get("by")),
            accepted=bool(data.get("accepted")),
            reason=_text(data.get("reason")),
            approved_by=[str(u) for u in approved] if isinstance(approved, list) else None,
            extra=_unknown(data, ("by", "accepted", "reason", "approved_by")),
        )


@dataclass(frozen=True, kw_only=True)
class PostBody:
    """What one delivery post keeps; the module docstring says which fields each kind uses and
    why one model serves them all. None: not in the stored JSON."""

    text: str | None = None
    """A reply's words, as far as they were saved."""
    tasks: list[dict[str, Any]] | None = None
    """A reply's task cards (tool calls, progress), in order."""
    footer: str | None = None
    """A reply's last words, below its cards (set when it closes)."""
    prompt: str | None = None
    """An approval's question, or a notice's text: the message's notification text."""
    blocks: list[dict[str, Any]] | None = None
    """Block Kit: an approval's message, or what a reply closed with below everything."""
    audience: list[str] | None = None
    """Whose Home inbox lists an approval; None: everyone's with a Home tab (a policy)."""
    answered: AnswerMark | None = None
    settled: str | None = None
    """What an approval's message says it ended as, without an answer (expired, stopped)."""
    claim: str | None = None
    """A notice's claim: the delivery whose value is stored is the one that posts it."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys this model does not name (a row written by another version), written back as read."""

    def to_json(self) -> str:
        known: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None:
                known[name] = value.to_dict() if isinstance(value, AnswerMark) else value
        return json.dumps(_with_extra(known, self.extra))

    @classmethod
    def from_json(cls, stored: str | None) -> PostBody:
        data = json.loads(stored or EMPTY_BODY)
        if not isinstance(data, dict):
            return cls()
        answered = data.get("answered")
        mark = AnswerMark.from_dict(answered) if isinstance(answered, dict) and answered else None
        audience = data.get("audience")
        return cls(
            text=_text(data.get("text")),
            tasks=_objects(data.get("tasks")),
            footer=_text(data.get("footer")),
            prompt=_text(data.get("prompt")),
            blocks=_objects(data.get("blocks")),
            audience=[str(u) for u in audience] if isinstance(audience, list) else None,
            answered=mark,
            settled=_text(data.get("settled")),
            claim=_text(data.get("claim")),
            extra=_unknown(data, _FIELDS),
        )


_FIELDS = tuple(f.name for f in fields(PostBody) if f.name != "extra")
"""The body's keys in the order they are written (each kind's in the order it always had)."""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _objects(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    return [dict(item) for item in value if isinstance(item, dict)]


def _unknown(data: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key not in known}


def _with_extra(known: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """The known keys, then the unknown ones kept from the row (a known key always wins)."""
    return {**known, **{key: value for key, value in extra.items() if key not in known}}
