"""Versioned session facts a tool records, each with its evidence: which turn, step and call.

Business workflow state belongs here rather than in ad-hoc fields: a fact commits with the tool
step that produced it (so a replay never records it twice) and is archived with the session.
"""

from __future__ import annotations

from typing import Any

from agent._errors import ToolError
from agent._messages import JsonValue
from agent._tool_values import to_json_value
from agent.seams import FactRecord, Ledgers


class FactsView:
    def __init__(
        self,
        store: Ledgers,
        *,
        session: str,
        turn_id: str,
        step_id: str,
        call_id: str,
        local: bool,
    ) -> None:
        self._store = store
        self._session = session
        self._turn_id = turn_id
        self._step_id = step_id
        self._call_id = call_id
        self._local = local
        self._pending: list[tuple[str, JsonValue]] = []

    def put(self, key: str, value: Any) -> None:
        """Record a new version; it commits with this tool call's step."""
        if self._local:
            raise ToolError(
                "facts.put is for async tools; a local tool writes its own rows through "
                "ctx.store.unwrap() inside the step's transaction"
            )
        if not key:
            raise ToolError("facts.put: the key must not be empty")
        self._pending.append((key, to_json_value(value)))

    async def get(self, key: str) -> FactRecord | None:
        """The latest committed version (puts of this call are not visible until it commits)."""
        return await self._store.get_fact(self._session, key)

    async def history(self, key: str) -> list[FactRecord]:
        return await self._store.fact_history(self._session, key)

    async def records(self, now: float) -> list[FactRecord]:
        """The puts of this call, numbered after the latest committed versions."""
        records: list[FactRecord] = []
        latest: dict[str, int] = {}
        for key, value in self._pending:
            if key not in latest:
                current = await self._store.get_fact(self._session, key)
                latest[key] = current.version if current else 0
            latest[key] += 1
            records.append(
                FactRecord(
                    session=self._session,
                    key=key,
                    version=latest[key],
                    value=value,
                    turn_id=self._turn_id,
                    step_id=self._step_id,
                    call_id=self._call_id,
                    created_at=now,
                )
            )
        return records
