"""Who acted, and for which workspace, read once from any signed Slack payload: every surface
(messages, clicks, the Deny modal, shortcuts and commands, Stop, the Home tab, feedback) takes
its principal from here, so the same person is the same principal wherever they act.

Two answers, as Bolt's own request context has them (`slack_bolt.request.internals`):
- `workspace_of`: the workspace (and Enterprise Grid org) the request was sent for, whose
  installation answers it and whose conversations it reaches. Bolt's `extract_team_id` and
  `extract_enterprise_id`: a modal's `view.app_installed_team_id`, an interaction's `team`
  (its `enterprise_id` in Grid, where `enterprise` may be null), an event's
  `authorizations[0]` before its envelope (in channels shared between workspaces the envelope
  can name the author's workspace instead).
- `principal_of`: the person, in their own workspace and org (`{team, enterprise, user}`). In
  an interaction that is `user.team_id`, except that in Enterprise Grid Slack reports the
  org's `E…` id there, and the workspace is then the interaction's `team`. In an event it is
  where the event says the author is from (`user_team`, else `team`; Bolt's "actor" ids),
  else the installation's workspace.

A user id names one person only inside their workspace, so where the payload does not say
which workspace a person is from, none is guessed: their principal has no team, and it matches
no request, which is what a person of another workspace must get.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from agent import Principal

Payload = Mapping[str, Any]
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Slack's ids (`T0123ABC`, `U…`, `C…`, `E…`) are short runs of ASCII capitals and digits; this
takes a little more so as never to refuse a real one. Nothing else names a team, a person or a
channel, and a `:` would split the session key."""


def is_slack_id(value: object) -> TypeGuard[str]:
    """A team, user, channel or enterprise id as Slack makes them (see `_ID`)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


_NAMED_PLACES = (("team_id", "enterprise_id"), ("context_team_id", "context_enterprise_id"))
"""Where an event names a workspace with its org: the envelope's, and the installation's
context in a channel shared between workspaces."""


@dataclass(frozen=True, kw_only=True)
class Workspace:
    """The workspace a request was sent for (None: the payload does not say)."""

    team: str | None
    enterprise: str | None


def workspace_of(body: Payload) -> Workspace:
    return Workspace(team=_installed_team(body), enterprise=_installed_org(body))


def _installed_team(body: Payload) -> str | None:
    """Bolt's `extract_team_id`, read in the same order."""
    view = body.get("view")
    if isinstance(view, Mapping) and view.get("app_installed_team_id") is not None:
        return _id(view["app_installed_team_id"])
    team = body.get("team")
    if team is not None:
        return _team_field(team)
    authorization = _authorization(body)
    if authorization is not None:
        return _installed_team(authorization)
    if "team_id" in body:
        return _id(body["team_id"])
    event = body.get("event")
    if isinstance(event, Mapping):
        return _installed_team(event)
    user = body.get("user")
    if isinstance(user, Mapping):
        return _id(user.get("team_id"))
    if isinstance(view, Mapping):
        return _id(view.get("team_id"))
    return None


def _installed_org(body: Payload) -> str | None:
    """Bolt's `extract_enterprise_id`, read in the same order (Grid's interactions name the
    org in `team.enterprise_id`, with `enterprise` null)."""
    org = body.get("enterprise")
    if isinstance(org, str):
        return _id(org)
    if isinstance(org, Mapping) and "id" in org:
        return _id(org["id"])
    authorization = _authorization(body)
    if authorization is not None:
        return _installed_org(authorization)
    if "enterprise_id" in body:
        return _id(body["enterprise_id"])
    team = body.get("team")
    if isinstance(team, Mapping) and "enterprise_id" in team:
        return _id(team["enterprise_id"])
    event = body.get("event")
    if isinstance(event, Mapping):
        return _installed_org(event)
    return None


def principal_of(body: Payload) -> Principal | None:
    """The person who acted; None when the payload names no one."""
    if isinstance(body.get("event"), Mapping):
        return _event_actor(body)
    user = body.get("user")
    if isinstance(user, Mapping):
        return _interaction_actor(body, user)
    if is_slack_id(body.get("user_id")):  # a slash command's form
        return _principal(body["user_id"], _id(body.get("team_id")), _id(body.get("enterprise_id")))
    return None


def _interaction_actor(body: Payload, user: Mapping[str, Any]) -> Principal | None:
    user_id = _id(user.get("id"))
    if user_id is None:
        return None
    own = _id(user.get("team_id"))
    place = workspace_of(body)
    team_field = _team_field(body.get("team"))
    if own is not None and not _is_org(own):
        # The person's own workspace; its org only where that is the workspace acted in.
        in_place = team_field in (None, own)
        return _principal(user_id, own, place.enterprise if in_place else None)
    if own is None:
        return _principal(user_id, team_field or place.team, place.enterprise)
    # Enterprise Grid: `user.team_id` is the person's org; the workspace is where they acted,
    # if it is of that org (otherwise which of the org's workspaces is theirs is not said).
    same_org = place.enterprise == own
    return _principal(user_id, (team_field or place.team) if same_org else None, own)


def _event_actor(body: Payload) -> Principal | None:
    event = body["event"]
    user = event.get("user")
    user_id = _id(user.get("id")) if isinstance(user, Mapping) else _id(user)
    if user_id is None:
        user_id = _id(event.get("user_id"))
    if user_id is None:
        return None
    installed = workspace_of(body)
    said = _id(event.get("user_team")) or _id(event.get("team"))
    if said is None:
        # The event does not say (a Stop, the Home tab): the workspace it occurred in, which
        # the envelope names (in a channel shared between workspaces, the author's, not
        # necessarily the installation's); the installation's where it names none.
        envelope = _id(body.get("team_id"))
        if envelope is not None and envelope != installed.team:
            return _principal(user_id, envelope, _id(body.get("enterprise_id")))
        return _principal(user_id, installed.team, installed.enterprise)
    if not _is_org(said):
        if said == installed.team:
            return _principal(user_id, said, installed.enterprise)
        envelope_org = _id(body.get("enterprise_id"))
        return _principal(user_id, said, envelope_org if said == _id(body.get("team_id")) else None)
    # An org id: the author is of that org; their workspace is known only where it is one the
    # payload names for that org.
    for team_key, org_key in _NAMED_PLACES:
        if said == _id(body.get(org_key)):
            return _principal(user_id, _id(body.get(team_key)), said)
    if said == installed.enterprise:
        return _principal(user_id, installed.team, said)
    return _principal(user_id, None, said)


def _principal(user: str, team: str | None, enterprise: str | None) -> Principal:
    return {"team": team, "enterprise": enterprise, "user": user}


def _authorization(body: Payload) -> Mapping[str, Any] | None:
    found = body.get("authorizations")
    if isinstance(found, list) and found and isinstance(found[0], Mapping):
        return found[0]
    return None


def _team_field(team: object) -> str | None:
    if isinstance(team, str):
        return _id(team)
    if isinstance(team, Mapping):
        return _id(team.get("id"))
    return None


def _is_org(ident: str) -> bool:
    """An Enterprise Grid org's id (`E…`), where a team's (`T…`) might be expected."""
    return ident.startswith("E")


def _id(value: Any) -> str | None:
    return value if is_slack_id(value) else None
