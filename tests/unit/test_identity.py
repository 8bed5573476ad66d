"""Who acted and for which workspace, from payloads in the shapes Slack sends (Slack's payload
references and bolt-python's own test fixtures): a plain workspace, an Enterprise Grid
workspace (where an interaction's `user.team_id` is the org's `E…` id, the org is in
`team.enterprise_id` and `enterprise` is null), and channels shared between workspaces (the
envelope naming the author's workspace, `authorizations` the installation's, `user_team`).

The same person is the same principal on every surface; the workspace a request is for is the
one Bolt's own request context names (`slack_bolt.request.internals`), checked against it."""

from __future__ import annotations

from typing import Any

import pytest
from slack_bolt.request.internals import extract_enterprise_id, extract_team_id

from bot.slack.identity import principal_of, workspace_of

TEAM, ORG, ALICE = "T0DEMO", "E0ORG", "W0ALICE"


def _authorizations(team: str, enterprise: str | None) -> list[dict[str, Any]]:
    return [
        {
            "enterprise_id": enterprise,
            "team_id": team,
            "user_id": "U0BOT",
            "is_bot": True,
            "is_enterprise_install": False,
        }
    ]


def _envelope(event: dict[str, Any], *, team: str, org: str | None) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "token": "x",
        "team_id": team,
        "api_app_id": "A0DEMO",
        "event": event,
        "type": "event_callback",
        "event_id": "Ev1",
        "event_time": 1,
        "authorizations": _authorizations(team, org),
        "is_ext_shared_channel": False,
    }
    if org:
        envelope["enterprise_id"] = org
    return envelope


def surfaces(org: str | None) -> dict[str, dict[str, Any]]:
    """What Slack sends when ALICE acts, in a workspace of the org `org` (None: of none)."""
    team: dict[str, Any] = {"id": TEAM, "domain": "demo"}
    if org:
        team.update(enterprise_id=org, enterprise_name="Demo Org")
    user = {"id": ALICE, "username": "alice", "name": "alice", "team_id": org or TEAM}
    events = {
        "app_mention": {
            "type": "app_mention",
            "user": ALICE,
            "text": "<@U0BOT> hi",
            "ts": "1.000001",
            "team": TEAM,
            "user_team": org or TEAM,
            "source_team": org or TEAM,
            "channel": "C0GRID",
        },
        "message": {"type": "message", "user": ALICE, "ts": "1.1", "team": TEAM, "channel": "C"},
        "app_home_opened": {"type": "app_home_opened", "user": ALICE, "tab": "home"},
        "agent_session_stopped": {
            "type": "agent_session_stopped",
            "channel": "C0GRID",
            "thread_ts": "1.000001",
            "user": ALICE,
            "streaming_message_ts": [],
        },
    }
    command: dict[str, Any] = {
        "team_id": TEAM,
        "team_domain": "demo",
        "channel_id": "C0GRID",
        "user_id": ALICE,
        "command": "/agent-reset",
    }
    if org:
        command.update(enterprise_id=org, enterprise_name="Demo Org")
    return {
        "block_actions": {
            "type": "block_actions",
            "user": user,
            "team": team,
            "enterprise": None,
            "is_enterprise_install": False,
            "container": {"type": "message", "message_ts": "1.000001", "channel_id": "C0GRID"},
            "channel": {"id": "C0GRID", "name": "grid"},
            "message": {"type": "message", "ts": "1.000001"},
            "actions": [{"type": "button", "action_id": "agent_approve", "value": "{}"}],
        },
        "home block_actions": {
            "type": "block_actions",
            "user": user,
            "team": team,
            "enterprise": None,
            "container": {"type": "view", "view_id": "V1"},
            "view": {"id": "V1", "type": "home", "team_id": TEAM, "app_installed_team_id": TEAM},
            "actions": [{"type": "button", "action_id": "agent_deny", "value": "{}"}],
        },
        "view_submission": {
            "type": "view_submission",
            "user": user,
            "team": team,
            "enterprise": None,
            "view": {
                "id": "V2",
                "type": "modal",
                "team_id": TEAM,
                "app_installed_team_id": TEAM,
                "callback_id": "agent_deny_reason",
            },
        },
        "message_action": {
            "type": "message_action",
            "team": team,
            "user": user,
            "channel": {"id": "C0GRID", "name": "grid"},
            "is_enterprise_install": False,
            "enterprise": {"id": org, "name": "Demo Org"} if org else None,
            "callback_id": "reset_conversation",
            "message_ts": "1.000001",
            "message": {"type": "message", "ts": "1.000001"},
        },
        "slash command": command,
        **{name: _envelope(event, team=TEAM, org=org) for name, event in events.items()},
    }


SURFACES = list(surfaces(ORG))


@pytest.mark.parametrize("surface", SURFACES)
def test_a_grid_person_is_one_principal_on_every_surface(surface: str) -> None:
    body = surfaces(ORG)[surface]
    assert principal_of(body) == {"team": TEAM, "enterprise": ORG, "user": ALICE}


@pytest.mark.parametrize("surface", SURFACES)
def test_a_person_of_a_plain_workspace_too(surface: str) -> None:
    body = surfaces(None)[surface]
    assert principal_of(body) == {"team": TEAM, "enterprise": None, "user": ALICE}


def _shared(event: dict[str, Any], *, actor_team: str, actor_org: str | None) -> dict[str, Any]:
    """A Slack Connect delivery (bolt-python's fixtures): the envelope names the author's
    workspace, `context_*` and `authorizations` the installation's."""
    envelope = _envelope(event, team=actor_team, org=actor_org)
    envelope.update(
        context_team_id=TEAM,
        context_enterprise_id=None,
        authorizations=_authorizations(TEAM, None),
        is_ext_shared_channel=True,
    )
    return envelope


def test_in_a_shared_channel_a_guest_is_of_their_own_workspace() -> None:
    guest = _shared(
        {"type": "message", "user": "U0GUEST", "text": "hi", "ts": "1.1", "team": "T0EXT"},
        actor_team="T0EXT",
        actor_org="E0EXT",
    )
    assert principal_of(guest) == {"team": "T0EXT", "enterprise": "E0EXT", "user": "U0GUEST"}
    assert workspace_of(guest).team == TEAM, "the turn is the installation's, not the guest's"

    grid_guest = _shared(
        {"type": "app_mention", "user": "W0GUEST", "team": TEAM, "user_team": "E0EXT"},
        actor_team=TEAM,
        actor_org=None,
    )
    assert principal_of(grid_guest) == {"team": None, "enterprise": "E0EXT", "user": "W0GUEST"}

    member = _shared(
        {"type": "message", "user": "U0ALICE", "text": "hi", "ts": "1.2", "team": TEAM},
        actor_team=TEAM,
        actor_org=None,
    )
    assert principal_of(member) == {"team": TEAM, "enterprise": None, "user": "U0ALICE"}

    stop = _shared(
        {"type": "agent_session_stopped", "channel": "C", "thread_ts": "1.1", "user": "U0GUEST"},
        actor_team="T0EXT",
        actor_org=None,
    )
    assert principal_of(stop) == {"team": "T0EXT", "enterprise": None, "user": "U0GUEST"}


def test_a_click_by_someone_of_another_workspace_or_org_is_not_of_this_one() -> None:
    click = surfaces(ORG)["block_actions"]
    click["user"] = {"id": "U0EVE", "team_id": "T0OTHER"}
    assert principal_of(click)["team"] == "T0OTHER"  # type: ignore[index]
    click["user"] = {"id": "W0EVE", "team_id": "E0ELSEWHERE"}
    assert principal_of(click) == {"team": None, "enterprise": "E0ELSEWHERE", "user": "W0EVE"}
    assert principal_of({"type": "block_actions", "team": {"id": TEAM}}) is None


ALL = [*surfaces(ORG).values(), *surfaces(None).values()]


@pytest.mark.parametrize("body", ALL)
def test_the_workspace_a_request_is_for_is_the_one_bolt_names(body: dict[str, Any]) -> None:
    found = workspace_of(body)
    assert (found.team, found.enterprise) == (extract_team_id(body), extract_enterprise_id(body))
