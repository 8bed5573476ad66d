"""An agent: instructions, tools and model settings, checked when it is assembled so a
misdeclared tool fails at start-up rather than in the middle of someone's turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.errors import AssemblyError
from agent.seams import ModelSettings
from agent.tools import Tool


@dataclass(frozen=True, kw_only=True)
class Agent:
    name: str
    instructions: str
    tools: Sequence[Tool] = ()
    model: ModelSettings = field(default_factory=ModelSettings)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for t in self.tools:
            if not isinstance(t, Tool):
                raise AssemblyError(f"agent {self.name!r}: {t!r} is not a @tool")
            if t.name in seen:
                raise AssemblyError(f"agent {self.name!r}: two tools are named {t.name!r}")
            seen.add(t.name)
            if t.effect == "write" and t.confirmation == "none":
                raise AssemblyError(
                    f"agent {self.name!r}: tool {t.name!r} is declared effect='write' with no "
                    "confirmation; declare confirmation='required' or 'capability'"
                )
        object.__setattr__(self, "tools", tuple(self.tools))

    def tool_named(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    @property
    def fingerprint(self) -> str:
        """Identifies the behaviour a checkpoint was made under: prompt, tool specs, settings."""
        body = {
            "instructions": self.instructions,
            "tools": [t.spec.model_dump() for t in self.tools],
            "model": self.model.model_dump(),
        }
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        return digest[:16]
