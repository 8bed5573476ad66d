"""What a running tool can see: where it runs (session, turn, call), who asked, the store handle
and the cancellation signal. Parking and durable effects are reached through here as well, so a
tool never needs the engine itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.seams import StoreHandle
from agent.signals import CancellationSignal
from agent.turn_input import InboundEvent, Speaker


@dataclass(kw_only=True)
class ToolContext:
    store: StoreHandle
    session: str
    turn_id: str
    call_id: str
    tool_name: str
    user: Speaker | None
    inbound: InboundEvent | None
    cancellation: CancellationSignal
    local: bool

    @property
    def cancelled(self) -> bool:
        """True once the turn was asked to stop; a long remote tool may check and return early."""
        return self.cancellation.cancelled

    def details(self) -> dict[str, Any]:
        return {"session": self.session, "turn_id": self.turn_id, "call_id": self.call_id}
