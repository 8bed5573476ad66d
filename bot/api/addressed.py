"""A session as one API caller reaches it, and the guard around engine calls that may ask the
agent's `authorize_answer` hook: shared by the service and its answer endpoints."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from agent import AgentSession, ResumeError, StopAuthorizationError, StoreUnavailableError
from bot.api.auth import Caller
from bot.api.errors import HOOK_FAILED, ApiError

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Addressed:
    """A session as one caller reaches it: its path key and the engine's session."""

    caller: Caller
    key: str
    session: AgentSession

    @property
    def stored(self) -> str:
        return self.session.key

    def poll(self, turn_id: str) -> str:
        return f"/sessions/{self.key}/turns/{turn_id}"


async def hooked(call: Awaitable[T]) -> T:
    """Await an engine call that may ask the agent's `authorize_answer`: the engine's refusals
    and outages pass as they are; anything else is the hook failing (a 500, nothing applied)."""
    try:
        return await call
    except (ResumeError, StopAuthorizationError, StoreUnavailableError):
        raise
    except Exception:
        log.exception("the authorize_answer hook failed; nothing was applied")
        raise ApiError(500, HOOK_FAILED) from None
