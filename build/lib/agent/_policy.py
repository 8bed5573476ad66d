"""Per-source turn policies: one agent, different prompt and tools per inbound channel.

The source comes from the channel that received the event (never from the user's text), and
`deny_tools` is enforced in code: a denied tool is not listed to the model and a call to it fails
as an unknown tool, so no prompt injection can talk the model into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from agent._errors import AssemblyError

Mode = Literal["append", "replace"]


class SurfaceSettings(TypedDict, total=False):
    """A `SurfacePolicy` written as a mapping (what an agent's `agent.py` holds)."""

    mode: Mode | None
    deny_tools: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class SurfacePolicy:
    mode: Mode | None = None
    """None: append the overlay if there is one. A mode set explicitly requires the overlay."""
    deny_tools: Sequence[str] = ()

    @classmethod
    def of(cls, value: SurfacePolicy | SurfaceSettings | Mapping[str, Any]) -> SurfacePolicy:
        if isinstance(value, SurfacePolicy):
            return value
        unknown = set(value) - {"mode", "deny_tools"}
        if unknown:
            raise AssemblyError(f"unknown surface policy keys: {sorted(unknown)}")
        mode = value.get("mode")
        if mode not in (None, "append", "replace"):
            raise AssemblyError(f"surface policy mode must be 'append' or 'replace', got {mode!r}")
        return cls(mode=mode, deny_tools=tuple(value.get("deny_tools", ())))


@dataclass(frozen=True, kw_only=True)
class TurnPolicy:
    """What one turn runs with; saved with a park so a resumed turn keeps it."""

    source: str | None
    system: str
    tools: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "system": self.system, "tools": list(self.tools)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnPolicy:
        return cls(source=data.get("source"), system=data["system"], tools=tuple(data["tools"]))


def build_policy(
    *,
    source: str | None,
    instructions: str,
    overlays: Mapping[str, str],
    surfaces: Mapping[str, SurfacePolicy],
    tool_names: Sequence[str],
) -> TurnPolicy:
    surface = surfaces.get(source) if source else None
    overlay = overlays.get(source) if source else None
    if surface is not None and surface.mode == "replace" and overlay is not None:
        system = overlay
    elif overlay is not None:
        system = f"{instructions.rstrip()}\n\n{overlay.strip()}"
    else:
        system = instructions
    denied = set(surface.deny_tools) if surface else set()
    return TurnPolicy(
        source=source, system=system, tools=tuple(n for n in tool_names if n not in denied)
    )


def check_surfaces(
    agent_name: str,
    surfaces: Mapping[str, SurfacePolicy],
    overlays: Mapping[str, str],
    tool_names: Sequence[str],
) -> None:
    for source, surface in surfaces.items():
        if surface.mode is not None and source not in overlays:
            raise AssemblyError(
                f"agent {agent_name!r}: surface {source!r} sets mode {surface.mode!r} but there "
                f"is no instructions.{source}.md"
            )
        unknown = set(surface.deny_tools) - set(tool_names)
        if unknown:
            raise AssemblyError(
                f"agent {agent_name!r}: surface {source!r} denies unknown tools {sorted(unknown)}"
            )
