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
from typing import Any

import jsonschema

from agent.errors import (
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeValidationError,
    ToolError,
)
from agent.turn_input import InboundEvent

Answerers = Mapping[str, Any]
"""`{"user": id}` or `{"policy": name, "scope": scope}`; None means no restriction."""

AuthorizeAnswer = Callable[[dict[str, Any]], Awaitable[bool]]
"""The agent's hook: given {policy, scope, by, principal}, may this person answer?"""


def answer_step_id(turn_id: str, input_id: str) -> str:
    return f"input:{turn_id}:{input_id}"


def request_digest(
    turn_id: str, input_id: str, prompt: str, schema: Any, answerers: Answerers | None
) -> str:
    """Binds an answer (and a grant) to one exact request, not merely to its id."""
    body = json.dumps(
        [turn_id, input_id, prompt, schema, dict(answerers) if answerers else None],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


def default_answerers(inbound: InboundEvent | None, *, what: str) -> Answerers | None:
    """The turn's speaker, only when the channel attests it; no restriction without an inbound
    event (programmatic and proactive turns drive their own resume)."""
    if inbound is None:
        return None
    if inbound.user is not None and inbound.user.attested:
        return {"user": inbound.user.id}
    raise ToolError(
        f"cannot {what}: this turn's speaker is not attested by its channel, so anyone could "
        "answer as them; name the answerers explicitly (answerers={'user': ...} or "
        "{'policy': ..., 'scope': ...})"
    )


def check_answerers(answerers: Answerers | None) -> None:
    if answerers is None:
        return
    keys = set(answerers)
    if keys == {"user"} and isinstance(answerers["user"], str) and answerers["user"]:
        return
    if "policy" in keys and keys <= {"policy", "scope"}:
        return
    raise ToolError(
        f"answerers must be {{'user': id}} or {{'policy': p, 'scope': s}}, got {answerers!r}"
    )


@dataclass(frozen=True, kw_only=True)
class ResumeRequest:
    """Who is answering what: what a host knows before it asks the agent's hook."""

    turn_id: str
    input_id: str
    by: str | None = None
    principal: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Grant:
    """Permission from `authorize_answer` for one policy answer to one exact request."""

    policy: str
    scope: str | None
    by: str | None
    digest: str


def authorize(
    answerers: Answerers | None, *, by: str | None, granted: Grant | None, digest: str
) -> None:
    """Raise `ResumeAuthorizationError` unless this resumer may answer."""
    if answerers is None:
        return
    if "user" in answerers:
        if by is None or by != answerers["user"]:
            raise ResumeAuthorizationError("only the requested user may answer this request")
        return
    policy, scope = answerers.get("policy"), answerers.get("scope")
    if granted is None:
        raise ResumeAuthorizationError(
            f"answering needs a grant for policy {policy!r} (scope {scope!r}); `by` alone is "
            "not enough"
        )
    if (granted.policy, granted.scope) != (policy, scope):
        raise ResumeAuthorizationError("the grant is for a different policy or scope")
    if granted.digest != digest:
        raise ResumeAuthorizationError("the grant was issued for a different request")
    if granted.by != by:
        raise ResumeAuthorizationError("the grant was issued to someone else")


async def issue_grant(
    answerers: Answerers | None,
    *,
    by: str | None,
    principal: Mapping[str, Any] | None,
    digest: str,
    authorize_answer: AuthorizeAnswer | None,
) -> Grant | None:
    """Ask the agent's hook. Its exceptions propagate (a 500: the answer is not applied and the
    same answer can be retried); None means the hook said no or no grant applies."""
    if answerers is None or "policy" not in answerers:
        return None
    if authorize_answer is None:
        return None
    policy, scope = answerers["policy"], answerers.get("scope")
    allowed = await authorize_answer(
        {"policy": policy, "scope": scope, "by": by, "principal": dict(principal or {})}
    )
    if allowed is not True:
        return None
    return Grant(policy=policy, scope=scope, by=by, digest=digest)


def validate_answer(value: Any, schema: Mapping[str, Any] | None) -> None:
    if schema is None:
        return
    try:
        jsonschema.validate(value, dict(schema))
    except jsonschema.ValidationError as err:
        raise ResumeValidationError(f"the answer does not fit the request: {err.message}") from None


def pending_request(pending: Any) -> dict[str, Any]:
    if not isinstance(pending, dict) or not isinstance(pending.get("request"), dict):
        raise ResumeConflictError("the session is not parked on a request")
    request: dict[str, Any] = pending["request"]
    return request
