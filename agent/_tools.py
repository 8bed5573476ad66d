"""Tools: a function, a JSON schema derived from its type hints, and the delivery guarantee its
declaration implies.

A `def` tool is *local*: it runs inside the step's transaction, so its writes through
`ctx.store.unwrap()` commit or roll back with the step (exactly once). An `async def` tool is
*remote*: it cannot join the transaction, so it is at-least-once and may park or run durable
effects. Classifying by declaration, not by behaviour, is what makes the guarantee checkable.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, create_model

from agent._errors import AssemblyError, ToolError
from agent._hitl_answer_notes import check_expiry
from agent._hitl_answerers import Answerer, AnswererInput
from agent._hitl_checks import answerers_of
from agent._hitl_edits import EditableInput, editable_fields
from agent._hitl_reminders import NO_REMINDERS, EscalationInput, Reminders, reminders_of
from agent._tool_values import (
    MAX_ERROR_CHARS,
    SHAPES_ONLY,
    Confirmation,
    Effect,
    database_error_detail,
    describe_error,
    to_json_value,
)
from agent.seams import ToolSpec

AnswerersFor = Callable[[dict[str, Any]], AnswererInput | None]
"""Who may confirm one call, from its arguments (`@tool(answerers=...)`)."""

if TYPE_CHECKING:
    from agent._tool_context import ToolContext

__all__ = [
    "MAX_ERROR_CHARS",
    "SHAPES_ONLY",
    "Confirmation",
    "Effect",
    "Tool",
    "database_error_detail",
    "describe_error",
    "make_tool",
    "to_json_value",
    "tool",
]


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    description: str
    fn: Callable[..., Any]
    input_model: type[BaseModel]
    is_async: bool
    context_param: str | None
    effect: Effect = "read"
    confirmation: Confirmation = "none"
    answerers: Answerer | None = None
    """Who may confirm the call (`confirmation="required"`) or what the tool asks about
    (`"capability"`); default: the attested speaker."""
    answerers_for: AnswerersFor | None = None
    """Who may confirm, chosen per call from its arguments (`@tool(answerers=callable)`): a
    refund over $100 may need two approvers where a small one needs the asker."""
    input_schema: dict[str, Any] = field(default_factory=dict)
    expires_after: float | None = None
    """Seconds what the tool asks (its confirmation, its `request_input`) waits for an answer
    before it expires; None: the agent's `approval_expires_after`."""
    concurrency: int | None = None
    """At most this many calls of the tool run at once in one batch (an async tool's calls run
    side by side); 1 keeps a tool whose calls must not overlap serial. None: only the turn's
    bound (`Runtime(tool_concurrency=)`)."""
    grantable_for: float | None = None
    """Seconds, at most, for which a person approving a call may allow the tool's later calls
    again without asking (a standing grant, `agent._hitl_grants`); None: every call is asked."""
    reminders: Reminders = NO_REMINDERS
    """What the tool asks (its confirmation, its `request_input` calls that name none) is
    reminded of and escalated when nobody answers (`agent._hitl_reminders`)."""
    editable: tuple[str, ...] = ()
    """The arguments a person approving a call may change first (`agent._hitl_edits`)."""

    @property
    def may_ask(self) -> bool:
        """Whether a call may leave the turn waiting for a person: a write awaiting
        confirmation, or any async tool, since any async tool can `ctx.request_input`."""
        return self.is_async or self.confirmation != "none"

    @property
    def local(self) -> bool:
        return not self.is_async

    def answerers_of_call(self, arguments: dict[str, Any]) -> Answerer | None:
        """Who may confirm this call: the declared answerers, or what `answerers_for` picks
        from its arguments. A failing or malformed choice is a `ToolError` (the model reads
        that the call was not proposed), never a stack trace."""
        if self.answerers_for is None:
            return self.answerers
        try:
            chosen = self.answerers_for(dict(arguments))
        except Exception as exc:
            raise ToolError(
                f"could not choose who confirms this call ({type(exc).__name__}); "
                "it was not proposed"
            ) from None
        return answerers_of(chosen)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    def parse_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments; `ValidationError` becomes a tool error it can read."""
        parsed = self.input_model.model_validate(raw)
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Invoke the function; for an `async def` tool this returns the coroutine to await."""
        if self.context_param is not None:
            return self.fn(**arguments, **{self.context_param: ctx})
        return self.fn(**arguments)


def _context_param(fn: Callable[..., Any], hints: dict[str, Any]) -> str | None:
    for name, hint in hints.items():
        if name == "return":
            continue
        if getattr(hint, "__name__", None) == "ToolContext" or name == "ctx":
            return name
    return None


def _schema_model(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], str | None]:
    from agent._tool_context import ToolContext

    # With its `Annotated` metadata: a `Field(gt=0)` on an argument is in the schema the model
    # reads and is checked on every call (and every edit), not dropped.
    hints = get_type_hints(fn, localns={"ToolContext": ToolContext}, include_extras=True)
    ctx_name = _context_param(fn, hints)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name == ctx_name:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args/**kwargs cannot be described to a model")
        hint = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hint, default)
    model = create_model(f"{name}_input", __config__=ConfigDict(extra="forbid"), **fields)
    return model, ctx_name


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["properties"] = {
            k: {kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) else v
            for k, v in props.items()
        }
    schema.setdefault("properties", {})
    return schema


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read",
    confirmation: Confirmation = "none",
    answerers: AnswererInput | AnswerersFor | None = None,
    expires_after: float | None = None,
    concurrency: int | None = None,
    grantable_for: float | None = None,
    remind_after: float | None = None,
    escalate_after: EscalationInput = None,
    editable: EditableInput = None,
) -> Tool:
    tool_name = name or fn.__name__
    answerers_for = answerers if callable(answerers) else None
    if answerers_for is not None:
        answerers = None
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise AssemblyError(
            f"tool {tool_name!r}: concurrency must be a whole number of at least 1, "
            f"not {concurrency!r}"
        )
    try:
        chosen = answerers_of(answerers)  # type: ignore[arg-type]  # not a callable by now
    except ToolError as err:
        # Found when the tool is declared, not each time the model proposes a call of it.
        raise AssemblyError(f"tool {tool_name!r}: {err}") from None
    try:
        lifetime = check_expiry(expires_after, what=f"tool {tool_name!r}")
    except ValueError as err:
        raise AssemblyError(str(err)) from None
    _check_grantable(tool_name, grantable_for, effect, confirmation)
    try:
        reminders = reminders_of(remind_after, escalate_after, what=f"tool {tool_name!r}")
    except ValueError as err:
        raise AssemblyError(str(err)) from None
    is_async = inspect.iscoroutinefunction(fn)
    if reminders and not is_async and confirmation == "none":
        raise AssemblyError(
            f"tool {tool_name!r}: remind_after and escalate_after are for tools that ask a "
            "person (a confirmation, or an async tool's request_input); this one never asks"
        )
    model, ctx_param = _schema_model(fn, tool_name)
    doc = inspect.getdoc(fn) or ""
    return Tool(
        name=tool_name,
        description=description or doc.split("\n\n")[0].strip() or tool_name,
        fn=fn,
        input_model=model,
        is_async=is_async,
        context_param=ctx_param,
        effect=effect,
        confirmation=confirmation,
        answerers=chosen,
        answerers_for=answerers_for,
        input_schema=_clean_schema(model.model_json_schema()),
        expires_after=lifetime if expires_after is None or lifetime is not None else math.inf,
        concurrency=concurrency,
        grantable_for=grantable_for,
        reminders=reminders,
        editable=_editable(tool_name, editable, model, confirmation),
    )


def _editable(
    name: str, editable: EditableInput, model: type[BaseModel], confirmation: Confirmation
) -> tuple[str, ...]:
    """Only a `confirmation="required"` write has a proposal a person approves as it stands,
    so only its arguments can be edited before it runs."""
    try:
        fields = editable_fields(editable, model.model_json_schema(), what=f"tool {name!r}")
    except ValueError as err:
        raise AssemblyError(str(err)) from None
    if fields and confirmation != "required":
        raise AssemblyError(
            f"tool {name!r}: editable is only for confirmation='required' tools (a person "
            "approves their call before it runs)"
        )
    return fields


def _check_grantable(
    name: str, grantable_for: float | None, effect: Effect, confirmation: Confirmation
) -> None:
    """A standing grant lets later calls skip the question a `confirmation="required"` write
    asks; on any other tool there is no question to skip, or (a capability) its details are
    checked per call, so a grant there would be a promise the engine does not keep."""
    if grantable_for is None:
        return
    if (
        isinstance(grantable_for, bool)
        or not isinstance(grantable_for, int | float)
        or not 0 < grantable_for < math.inf
    ):
        raise AssemblyError(
            f"tool {name!r}: grantable_for must be a positive, finite number of seconds, "
            f"not {grantable_for!r}"
        )
    if effect != "write" or confirmation != "required":
        raise AssemblyError(
            f"tool {name!r}: grantable_for is only for effect='write', "
            "confirmation='required' tools"
        )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read",
    confirmation: Confirmation = "none",
    answerers: AnswererInput | AnswerersFor | None = None,
    expires_after: float | None = None,
    concurrency: int | None = None,
    grantable_for: float | None = None,
    remind_after: float | None = None,
    escalate_after: EscalationInput = None,
    editable: EditableInput = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read",
    confirmation: Confirmation = "none",
    answerers: AnswererInput | AnswerersFor | None = None,
    expires_after: float | None = None,
    concurrency: int | None = None,
    grantable_for: float | None = None,
    remind_after: float | None = None,
    escalate_after: EscalationInput = None,
    editable: EditableInput = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool. `def` → local (exactly-once through the store), `async def` → remote.

    `answerers` (a `UserAnswerer` / `PolicyAnswerer`, or the same as a dict: `{"user": id}`,
    `{"policy": p, "scope": s}`, a `Quorum`) is normalised here; a malformed one is an
    `AssemblyError`. It may instead be a function of the call's arguments returning one (or
    None for the default), asked as each call is proposed; what it returns is checked then, a
    malformed one being the call's error.
    `expires_after` (seconds; `math.inf` for never) bounds how long what the tool asks waits
    for an answer: its confirmation, and its `ctx.request_input` calls that name no limit.
    `concurrency` caps how many of its calls run at once in one batch (1: never overlapping).
    `grantable_for` (seconds; a `confirmation="required"` write only) lets whoever approves a
    call also allow later ones, in the thread or the channel, for up to that long.
    `remind_after` (seconds) reminds whoever may answer what the tool asks, once, if nobody has;
    `escalate_after=(seconds, answerers)` then lets those answerers answer it too and tells them
    (`agent._hitl_reminders`); a call's `request_input` may name its own.
    `editable` (a `confirmation="required"` tool: True, or argument names) lets whoever approves
    a call change those arguments first; the call runs with what they approved
    (`agent._hitl_edits`)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return make_tool(
            f,
            name=name,
            description=description,
            effect=effect,
            confirmation=confirmation,
            answerers=answerers,
            expires_after=expires_after,
            concurrency=concurrency,
            grantable_for=grantable_for,
            remind_after=remind_after,
            escalate_after=escalate_after,
            editable=editable,
        )

    return wrap(fn) if fn is not None else wrap
