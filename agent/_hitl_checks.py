"""Human in the loop: what a parked request looks like, who may answer it, and the checks a
resume or a confirmation must pass before anything is written.

An approval that the wrong person can give is worse than none, so every rule here fails closed:
no `by` never matches a user, `by` alone never answers a policy, a grant never answers a user, and
a grant is bound to the digest of the exact request it was issued for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, assert_never

import jsonschema
import pydantic

from agent._errors import (
    ResumeAuthorizationError,
    ResumeValidationError,
    ToolError,
)
from agent._hitl_answerers import (
    Answerer,
    AnswererInput,
    PolicyAnswerer,
    QuorumAnswerer,
    UserAnswerer,
    answerers_json,
    parse_answerer,
)
from agent._messages import JsonValue
from agent._turn_input import TurnInput


class Principal(TypedDict, total=False):
    """Who is answering, as the surface verified them (for Slack, the signed `user` of a click):
    the person's id and the workspace (team, Enterprise Grid org) inside which that id names
    them. Any key may be left out; a `team` or `enterprise` of None says there is none (a
    workspace outside any Enterprise Grid org, say). `by` and `user` name the same person, see
    `answering_user`."""

    user: str
    team: str | None
    enterprise: str | None


class AnswerRequest(TypedDict):
    """What the agent's `authorize_answer` hook is asked: may `by` answer for `policy`?"""

    policy: str
    scope: str | None
    by: str | None
    principal: Principal
    """As the surface passed it (empty when it passed none)."""


AuthorizeAnswer = Callable[[AnswerRequest], Awaitable[bool]]
"""The agent's hook: given {policy, scope, by, principal}, may this person answer?"""


def answer_step_id(turn_id: str, input_id: str) -> str:
    return f"input:{turn_id}:{input_id}"


def request_digest(
    turn_id: str, input_id: str, prompt: str, schema: JsonValue, answerers: Answerer | None
) -> str:
    """Binds an answer (and a grant) to one exact request, not merely to its id.

    Hashed over the answerers' stored JSON, the dict this digest was always computed from:
    answers, grants and buttons already posted in Slack carry digests made that way."""
    body = json.dumps(
        [turn_id, input_id, prompt, schema, answerers_json(answerers)],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


WORKSPACE_KEYS = ("team", "enterprise")
WORKSPACE_NOUNS = {"team": "workspace", "enterprise": "Enterprise Grid organization"}
"""What each key is called where a person reads why they may not answer."""
"""What makes a user id mean one person: Slack user ids are unique within a workspace (and an
Enterprise Grid org), so `{"user": id}` names somebody only inside the request's own workspace."""


def default_answerers(turn_input: TurnInput | None, *, what: str) -> Answerer | None:
    """Who answers when the tool names nobody.

    - A message: its speaker, only when the channel attests it (otherwise anyone could answer
      as them).
    - A turn started by a trigger (a schedule, a proactive post): the trigger's answerers.
      Nobody spoke, so "the speaker" does not exist and "anyone in the channel" is not an
      answer: without answerers the turn cannot ask.
    - A confirmation follow-up answered by the host itself (no `by`), or a turn started by host
      code with neither: no restriction, since the host is trusted and drives its own resume.
    """
    inbound = turn_input.inbound if turn_input is not None else None
    if inbound is not None:
        if inbound.user is not None and inbound.user.attested:
            return UserAnswerer(user=inbound.user.id)
        raise ToolError(
            f"cannot {what}: this turn's speaker is not attested by its channel, so anyone could "
            "answer as them; name the answerers explicitly (answerers={'user': ...} or "
            "{'policy': ..., 'scope': ...})"
        )
    trigger = turn_input.trigger if turn_input is not None else None
    if trigger is None:
        return None
    if trigger.answerers is not None:
        return trigger.answerers
    if trigger.kind == "confirmation":
        return None
    raise ToolError(
        f"cannot {what}: this turn was started by {trigger.by!r}, not by a person, so there is "
        "no speaker to answer; name the answerers (answerers={'user': ...} or "
        "{'policy': ..., 'scope': ...}) in the call, or in the schedule that starts the turn"
    )


def workspace_of(turn_input: TurnInput | None) -> dict[str, str]:
    """The workspace a turn belongs to: its message's, or for a triggered turn the one it
    posts into; empty when the surface has no such notion."""
    if turn_input is None:
        return {}
    if turn_input.inbound is not None:
        context = turn_input.inbound.context
    elif turn_input.trigger is not None:
        context = turn_input.trigger.context
    else:
        return {}
    return {key: str(context[key]) for key in WORKSPACE_KEYS if context.get(key)}


def check_workspace(workspace: Mapping[str, str], principal: Principal | None) -> None:
    """Refuse an answerer from another workspace (or org) than the request's.

    The same user id in another workspace is another person, so a click from there must not
    answer, whatever the answerers say. No principal means host code answering, which is
    trusted; a surface that verifies people passes their principal.
    """
    if principal is None:
        return
    for key, expected in workspace.items():
        if principal.get(key) != expected:
            where = WORKSPACE_NOUNS.get(key, key)
            raise ResumeAuthorizationError(
                f"it belongs to another {where}, and only people there can answer it"
            )


def answering_user(by: str | None, principal: Principal | None) -> str | None:
    """The person answering, from the two ways a host can name them.

    `by` and the principal's `user` state one fact, the verified person, so neither is dropped:
    when both are given they must agree (`ResumeAuthorizationError` otherwise: a surface that
    mixed up two people must not have either's answer applied), and either one alone supplies
    the other. A principal with no `user` only places the answerer in a workspace.
    """
    user = principal.get("user") if principal is not None else None
    if user is None:
        return by
    if by is not None and by != user:
        raise ResumeAuthorizationError(
            f"`by` ({by!r}) and the principal ({user!r}) name different people"
        )
    return user


def answerers_of(answerers: AnswererInput | None) -> Answerer | None:
    """Normalise what a host or a tool passed (a typed answerer, or the dict shape the engine
    has always taken) into an `Answerer`; a `ToolError` naming the accepted shapes otherwise.

    A `ToolError` because inside a tool (`ctx.request_input`) the model must read why the call
    failed; callers outside a tool (a declaration, a schedule) re-raise it as their own error."""
    if answerers is None:
        return None
    try:
        return parse_answerer(answerers)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:])
        reason = f"{where}: {first['msg']}" if where else first["msg"]
        raise ToolError(
            "answerers must be {'user': id} (a non-empty string), {'policy': p, 'scope': s} "
            "(scope optional) or {'quorum': n, 'users': [...]} / {'quorum': n, 'policy': p}, "
            f"or a UserAnswerer / PolicyAnswerer / Quorum; got {answerers!r} ({reason})"
        ) from None


@dataclass(frozen=True, kw_only=True)
class ResumeRequest:
    """Who is answering what: what a host knows before it asks the agent's hook."""

    turn_id: str
    input_id: str
    by: str | None = None
    principal: Principal | None = None


@dataclass(frozen=True, kw_only=True)
class Grant:
    """Permission from `authorize_answer` for one policy answer to one exact request."""

    policy: str
    scope: str | None
    by: str | None
    digest: str


def authorize(
    answerers: Answerer | None, *, by: str | None, granted: Grant | None, digest: str
) -> None:
    """Raise `ResumeAuthorizationError` unless this resumer may answer."""
    match answerers:
        case None:
            return
        case UserAnswerer(user=user):
            if by is None or by != user:
                raise ResumeAuthorizationError("only the person it asks can answer it")
            return
        case PolicyAnswerer(policy=policy, scope=scope):
            _check_grant(policy, scope, by=by, granted=granted, digest=digest)
        case QuorumAnswerer(users=users, policy=policy, scope=scope):
            # One person counts once, so a vote needs the voter named, whoever admits them.
            if by is None:
                raise ResumeAuthorizationError("a vote needs the voter's id")
            if users is not None:
                if by not in users:
                    raise ResumeAuthorizationError("only the people it asks can answer it")
                return
            _check_grant(str(policy), scope, by=by, granted=granted, digest=digest)
        case _:
            assert_never(answerers)


def _check_grant(
    policy: str, scope: str | None, *, by: str | None, granted: Grant | None, digest: str
) -> None:
    if granted is None:
        within = f" for {scope}" if scope else ""
        raise ResumeAuthorizationError(
            f"only people the {policy!r} policy allows{within} can answer it"
        )
    if (granted.policy, granted.scope) != (policy, scope):
        raise ResumeAuthorizationError("the grant is for a different policy or scope")
    if granted.digest != digest:
        raise ResumeAuthorizationError("the grant was issued for a different request")
    if granted.by != by:
        raise ResumeAuthorizationError("the grant was issued to someone else")


async def issue_grant(
    answerers: Answerer | None,
    *,
    by: str | None,
    principal: Principal | None,
    digest: str,
    authorize_answer: AuthorizeAnswer | None,
) -> Grant | None:
    """Ask the agent's hook. Its exceptions propagate (a 500: the answer is not applied and the
    same answer can be retried); None means the hook said no or no grant applies."""
    if authorize_answer is None:
        return None
    admitted = _policy_of(answerers)
    if admitted is None:
        return None  # nobody's grant can answer for a user: the hook is not asked
    policy, scope = admitted
    asked = AnswerRequest(
        policy=policy,
        scope=scope,
        by=by,
        principal=principal.copy() if principal is not None else Principal(),
    )
    allowed = await authorize_answer(asked)
    if allowed is not True:
        return None
    return Grant(policy=policy, scope=scope, by=by, digest=digest)


def _policy_of(answerers: Answerer | None) -> tuple[str, str | None] | None:
    """The policy (and scope) the hook decides for these answerers; None where no hook does."""
    match answerers:
        case None | UserAnswerer():
            return None
        case PolicyAnswerer(policy=policy, scope=scope):
            return policy, scope
        case QuorumAnswerer(policy=policy, scope=scope):
            return None if policy is None else (policy, scope)
        case _:
            assert_never(answerers)


def validate_answer(value: Any, schema: Mapping[str, Any] | None) -> None:
    if schema is None:
        return
    try:
        jsonschema.validate(value, dict(schema))
    except jsonschema.ValidationError as err:
        raise ResumeValidationError(f"the answer does not fit the request: {err.message}") from None
