"""The host API is typed precisely: no `typing.Any` in the signatures a host calls.

A host checks its own code against these signatures (`mypy --strict`); an `Any` in one switches
that checking off for whatever passes through it, silently. So every public method and
constructor of the host API is read with `typing.get_type_hints`, and each annotation is walked
(generic arguments, callable parameters, the keys of a `TypedDict`) for `Any`. What must keep an
`Any` for now is listed in `ALLOWED`, with the reason; an entry that no longer applies fails too,
so the list only shrinks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any, ForwardRef, TypedDict, get_args, get_type_hints, is_typeddict

import agent

HOST_API: tuple[object, ...] = (
    agent.Runtime,
    agent.AgentSession,
    agent.Agent,
    agent.ScriptedModel,
    agent.ScriptedReply,
    agent.ResumeRequest,
    agent.load_agent,
    agent.resolve_receipt,
    agent.grant_answer,
    agent.grant_confirmation,
)

ALLOWED = {
    "resolve_receipt(value)": (
        "agent/_effects.py belongs to another change in flight; `AgentSession.resolve_receipt` "
        "is the typed way in"
    ),
}


def _signatures() -> Iterator[tuple[str, Callable[..., object]]]:
    """(name, function) for every public callable of the host API, constructors included."""
    for item in HOST_API:
        if not inspect.isclass(item):
            assert callable(item)
            yield item.__name__, item
            continue
        for name, member in inspect.getmembers(item):
            if name.startswith("_") and name != "__init__":
                continue
            if isinstance(member, property) and member.fget is not None:
                yield f"{item.__name__}.{name}", member.fget
            elif inspect.isfunction(member):
                yield f"{item.__name__}.{name}", member


def _mentions_any(annotation: object, seen: frozenset[int] = frozenset()) -> bool:
    if annotation is Any:
        return True
    if isinstance(annotation, ForwardRef):
        return False  # a recursive alias naming itself: the alias is walked where it is used
    if is_typeddict(annotation):
        if id(annotation) in seen:
            return False
        fields = get_type_hints(annotation)
        return any(_mentions_any(a, seen | {id(annotation)}) for a in fields.values())
    arguments: list[object] = []
    for argument in get_args(annotation):
        arguments.extend(argument if isinstance(argument, list) else [argument])
    return any(_mentions_any(a, seen) for a in arguments)


def _any_at() -> dict[str, object]:
    """Where an `Any` is, as `Owner.method(param)` or `Owner.method -> return`."""
    found: dict[str, object] = {}
    for name, function in _signatures():
        hints = get_type_hints(function, localns=vars(agent))
        for param, annotation in hints.items():
            where = f"{name} -> return" if param == "return" else f"{name}({param})"
            if _mentions_any(annotation):
                found[where] = annotation
    return found


def test_the_host_api_signatures_have_no_any_beyond_the_allowed() -> None:
    found = _any_at()
    unexpected = {where: hint for where, hint in found.items() if where not in ALLOWED}
    assert not unexpected, (
        f"`Any` in the host API (type it, or allow it with a reason): {unexpected}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"allowed `Any`s that are gone; drop them from ALLOWED: {stale}"


class _Inner(TypedDict):
    value: Any


class _Outer(TypedDict):
    inner: _Inner


def test_the_walk_sees_every_part_of_an_annotation() -> None:
    """The check itself: `Any` is found however deep it sits, and precise types pass."""
    for annotation in (
        Any,
        dict[str, Any],
        Callable[[dict[str, Any]], bool],
        Callable[[int], list[Any]],
        tuple[int, str | Any],
        _Outer,
    ):
        assert _mentions_any(annotation), annotation
    for annotation in (agent.JsonData, agent.Principal, agent.AnswerRequest, Callable[[int], str]):
        assert not _mentions_any(annotation), annotation


def test_every_host_api_entry_is_checked() -> None:
    checked = {name.split(".")[0] for name, _ in _signatures()}
    assert checked == {getattr(item, "__name__", "") for item in HOST_API}
    session_methods = {name for name, _ in _signatures() if name.startswith("AgentSession.")}
    for method in ("resume", "confirm", "turns", "steps", "confirmations", "receipts"):
        assert f"AgentSession.{method}" in session_methods
