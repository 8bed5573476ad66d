"""Who may answer a parked request or a proposed write: one user, or whoever a policy admits.

The two kinds are checked in opposite ways (a user by the verified id alone, a policy only by a
grant from the agent's hook), so they are two types, tagged by `kind`, and every check matches
on them: a third kind cannot slip through a check written for two.

The JSON is the one the engine always stored, `{"user": id}` or `{"policy": p, "scope": s}`,
with no `kind` in it: event logs, checkpoints and confirmation rows written before these types
existed decode unchanged, and the keys themselves tell the kinds apart. The JSON is also what
`request_digest` hashes, and buttons already posted carry those digests, so a policy answerer
given without a scope stays without one (`{"policy": p}` and `{"policy": p, "scope": null}`
were two requests, with two digests, and still are).

A leaf module (pydantic only), so events, records and turn inputs can all hold answerers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
    model_validator,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UserAnswerer(_Frozen):
    """Only this person: the verified `by` of an answer must be `user` (inside the request's
    own workspace, since a user id names one person only there)."""

    kind: Literal["user"] = Field(default="user", exclude=True)
    user: str = Field(min_length=1)


class PolicyAnswerer(_Frozen):
    """Whoever the agent's `authorize_answer` hook admits for `policy` (and `scope`); `by`
    alone never answers it, a grant bound to the request's digest does."""

    kind: Literal["policy"] = Field(default="policy", exclude=True)
    policy: str
    scope: str | None = None

    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A scope never given stays out of the JSON: it is part of the request's digest.
        data: dict[str, Any] = handler(self)
        if "scope" not in self.model_fields_set:
            data.pop("scope", None)
        return data


class QuorumAnswerer(_Frozen):
    """Several people must approve: `quorum` approvals from different people resolve the
    request; a Deny resolves it at once (`deny="first"`, the default) or only once a majority of
    those who may answer denied (`deny="majority"`; see `agent._hitl_quorum`). Who may vote is
    `users` (by verified id, as `UserAnswerer`) or whoever `authorize_answer` admits for `policy`
    (and `scope`), asked per person, as `PolicyAnswerer`. Each vote is stored as it is cast.

    Stored as `{"quorum": n, "users": [...]}` or `{"quorum": n, "policy": p, "scope": s}`, with
    `"deny": "majority"` only when asked, so the digest of a request does not depend on
    defaults. Build one with `Quorum(2, users=[...])`."""

    kind: Literal["quorum"] = Field(default="quorum", exclude=True)
    quorum: int = Field(ge=1)
    users: tuple[str, ...] | None = None
    policy: str | None = None
    scope: str | None = None
    deny: Literal["first", "majority"] = "first"

    @model_validator(mode="after")
    def _one_source(self) -> QuorumAnswerer:
        if (self.users is None) == (self.policy is None):
            raise ValueError("a quorum names either `users` or a `policy`, not both or neither")
        if self.users is not None:
            if any(not user for user in self.users):
                raise ValueError("quorum users must be non-empty ids")
            if len(set(self.users)) != len(self.users):
                raise ValueError("quorum users must be different people")
            if self.quorum > len(self.users):
                raise ValueError(
                    f"a quorum of {self.quorum} cannot be reached by {len(self.users)} users"
                )
        if self.scope is not None and self.policy is None:
            raise ValueError("a scope needs a policy")
        return self

    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("users", "policy"):
            if data.get(key) is None:
                data.pop(key, None)
        if "scope" not in self.model_fields_set or self.policy is None:
            data.pop("scope", None)
        if self.deny == "first":
            data.pop("deny", None)
        return data


def Quorum(
    need: int,
    *,
    users: list[str] | tuple[str, ...] | None = None,
    policy: str | None = None,
    scope: str | None = None,
    deny: Literal["first", "majority"] = "first",
) -> QuorumAnswerer:
    """`need` approvals from different people among `users`, or among whoever the agent's
    `authorize_answer` admits for `policy` (and `scope`)."""
    fields: dict[str, Any] = {"quorum": need, "deny": deny}
    if users is not None:
        fields["users"] = tuple(users)
    if policy is not None:
        fields["policy"] = policy
    if scope is not None:
        fields["scope"] = scope
    return QuorumAnswerer.model_validate(fields)


def _kind(value: Any) -> str | None:
    """The tag of a stored answerer (its keys) or of a typed one (its `kind`). A quorum's keys
    may include `policy`, so `quorum` is looked for first."""
    if isinstance(value, Mapping):
        if "kind" in value:
            return str(value["kind"])
        if "quorum" in value:
            return "quorum"
        if "user" in value:
            return "user"
        if "policy" in value:
            return "policy"
        return None
    kind = getattr(value, "kind", None)
    return kind if isinstance(kind, str) else None


Answerer: TypeAlias = Annotated[
    Annotated[UserAnswerer, Tag("user")]
    | Annotated[PolicyAnswerer, Tag("policy")]
    | Annotated[QuorumAnswerer, Tag("quorum")],
    Discriminator(_kind),
]
"""Who may answer; `None` where an `Answerer | None` is expected means no restriction."""

AnswererField: TypeAlias = str | int | list[str] | tuple[str, ...] | None
"""A value of the stored dict shape: an id, a policy, a scope, a quorum's count or users."""

AnswererInput: TypeAlias = (
    UserAnswerer | PolicyAnswerer | QuorumAnswerer | Mapping[str, AnswererField]
)
"""What a host may pass where answerers are declared: a typed answerer or the stored dict
shape (`{"user": id}`, `{"policy": p, "scope": s}`, `{"quorum": n, "users": [...]}`),
normalised into an `Answerer`."""

_adapter: TypeAdapter[Answerer] = TypeAdapter(Answerer)


def parse_answerer(value: AnswererInput) -> Answerer:
    """A typed answerer from either shape; `pydantic.ValidationError` if it is neither."""
    return _adapter.validate_python(value)


def answerers_json(answerers: Answerer | None) -> dict[str, Any] | None:
    """The stored shape (the JSON the digest and the rows hold)."""
    return None if answerers is None else answerers.model_dump(mode="json")


def answerers_to_json(answerers: Answerer | None) -> str | None:
    """JSON text for a store's nullable column (None: SQL NULL, no restriction)."""
    return None if answerers is None else _adapter.dump_json(answerers).decode()


def answerers_from_json(raw: str | bytes | None) -> Answerer | None:
    """The typed answerer of a stored column, as `answerers_to_json` (or older code) wrote it."""
    return None if raw is None else _adapter.validate_json(raw)
