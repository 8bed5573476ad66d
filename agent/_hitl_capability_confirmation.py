"""Confirmation by the capability itself: `@tool(effect="write", confirmation="capability")`.

Such a tool runs before anybody is asked, so it can gather the domain details a person must see
(what a charge costs now, the lines of an order), and asks with
`return ctx.needs_confirmation(prompt=..., details=...)`. The engine records that interaction as
it records a `confirmation="required"` proposal (same answerers, event and store row, plus the
details). On an accepted answer the stored call runs again from the top, and
`ctx.confirmed(details)` is True only in that call and only for the details the person approved:
a price that moved meanwhile is asked for again, never charged on an old approval.

The mode hands the consent check to the tool's code, so the engine makes sure the check happened:
`run_effect` refuses to write until `ctx.confirmed` said yes in the same call. Forgetting the
check is then an error the model reads, not a write nobody approved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent._errors import ToolError
from agent._tool_values import Confirmation, to_json_value
from agent._turn_input import ConfirmationAnswer

CHECK_BEFORE_WRITING = (
    "a confirmation='capability' tool must get an accepted answer and check it with "
    "ctx.confirmed(details) before run_effect"
)


@dataclass(frozen=True, kw_only=True)
class NeedsConfirmation:
    """What a capability tool returns to ask a person; made by `ctx.needs_confirmation`."""

    prompt: str
    details: dict[str, Any]


def details_json(details: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """The details as the store keeps them: a JSON object, or a `ToolError` saying why not."""
    try:
        plain = to_json_value(details)
    except Exception as exc:
        raise ToolError(f"{what}: details must be JSON ({exc})") from None
    if not isinstance(plain, dict):
        raise ToolError(f"{what}: details must be a JSON object, got {type(details).__name__}")
    return plain


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON text: `1` is not `true`, and `42` is not `42.0` (when unsure, ask again)."""
    return _canonical(a) == _canonical(b)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Consent:
    """One tool call's standing: the accepted answer it runs under, if it is the confirmed call
    of one, and whether the tool checked that answer (which `run_effect` requires)."""

    def __init__(
        self,
        *,
        tool: str,
        mode: Confirmation,
        local: bool,
        answer: ConfirmationAnswer | None,
    ) -> None:
        self._tool = tool
        self._mode = mode
        self._local = local
        self._answer = answer if answer is not None and answer.accepted else None
        self.checked = False

    @property
    def capability(self) -> bool:
        return self._mode == "capability"

    def ask(self, prompt: str, details: Mapping[str, Any]) -> NeedsConfirmation:
        if self._local:
            raise ToolError(
                "needs_confirmation: only an async (remote) tool can ask; a local (def) tool runs "
                "inside the step's transaction, which cannot stay open while a person answers"
            )
        if not self.capability:
            raise ToolError(
                f"needs_confirmation: only a confirmation='capability' tool can ask; tool "
                f"{self._tool!r} is declared confirmation={self._mode!r}"
            )
        if not isinstance(prompt, str) or not prompt.strip():
            raise ToolError("needs_confirmation: the prompt must be a non-empty string")
        return NeedsConfirmation(
            prompt=prompt, details=details_json(details, what="needs_confirmation")
        )

    def confirmed(self, details: Mapping[str, Any]) -> bool:
        if not self.capability:
            raise ToolError(
                f"confirmed: only a confirmation='capability' tool checks an answer itself; tool "
                f"{self._tool!r} is declared confirmation={self._mode!r}"
            )
        shown = details_json(details, what="confirmed")
        answer = self._answer
        if answer is None or answer.details is None or not same_json(shown, answer.details):
            return False
        self.checked = True
        return True

    def require_checked(self) -> None:
        """Called by `run_effect` before it prepares a receipt."""
        if self.capability and not self.checked:
            raise ToolError(CHECK_BEFORE_WRITING)
