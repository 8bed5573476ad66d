"""What the console reads and does, for one operator at a time, within the workspaces it may see.

Reads go to the database (`storage.sql.console`) with the operator's session-key prefixes, so a
session of another workspace is never listed, never shown (a 404, the same as one that does not
exist) and never acted on. Actions are the CLI's own calls: a receipt is resolved by
`agent.resolve_receipt` (`bot receipts resolve`), a turn ended by
`bot.cli.operator.sessions.cancel_turn` (`bot cancel --turn`), waiting requests listed by the
runtime's `pending_approvals` (`bot approvals`), stuck turns by
`bot.cli.operator.turns.stuck_turns` (`bot turns --stuck`). Each action is audited
(`console_audit`) with the operator's name, never a token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agent import Agent, CancelReason, ReceiptStatus, Runtime, TurnRecord, resolve_receipt
from bot.cli.operator.approvals import answerers_text
from bot.cli.operator.output import OperatorError
from bot.cli.operator.sessions import cancel_turn
from bot.cli.operator.stores import Databases
from bot.cli.operator.turns import stuck_turns
from bot.console import views
from bot.console.tokens import ConsoleTokens, Operator
from bot.slack.stop_reasons import OPERATOR
from storage import SqlStore
from storage.delivery.store import DeliveryStore
from storage.sql import console as queries

FAILURES_IN_A_ROW = 2
"""What `bot turns --stuck` counts as a failing conversation (its `--failures` default)."""


class ConsoleError(Exception):
    """An answer other than 200: `status` and a message safe to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ConsoleService:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        store: SqlStore,
        delivery: DeliveryStore,
        tokens: ConsoleTokens,
        scrub: views.Scrub,
        clock: Callable[[], float] = time.time,
        heartbeat: float = 15.0,
        poll: float = 1.0,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.store = store
        self.delivery = delivery
        self.tokens = tokens
        self.scrub = scrub
        self.clock = clock
        self.heartbeat = heartbeat
        self.poll = poll
        self._open = True

    @property
    def open(self) -> bool:
        """False once the server is stopping: the event streams end (`bot.console.stream`)."""
        return self._open

    def close(self) -> None:
        self._open = False

    # -- reads ------------------------------------------------------------------------------

    async def sessions(
        self,
        op: Operator,
        *,
        q: str | None,
        status: str | None,
        limit: int,
        before: tuple[float, str] | None,
    ) -> tuple[list[dict[str, Any]], tuple[float, str] | None]:
        rows = await self.store.run_sync(
            lambda c: queries.list_sessions(
                c, op.prefixes, q=q, status=status, limit=limit + 1, before=before
            )
        )
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = (rows[-1].updated_at, rows[-1].key) if more and rows else None
        return [views.session_json(row) for row in rows], cursor

    async def session(self, op: Operator, key: str) -> dict[str, Any]:
        row = await self.store.run_sync(lambda c: queries.get_session(c, key, op.prefixes))
        if row is None:
            raise ConsoleError(404, "no such session")
        detail = await self.store.run_sync(lambda c: queries.session_detail(c, key))
        return {
            "session": views.session_json(row),
            "turns": views.turns_json(
                detail.turns, detail.steps, detail.messages, detail.events, self.scrub
            ),
            "receipts": [views.receipt_json(r) for r in detail.receipts],
            "waiting": await self.waiting(op, key),
        }

    async def require_session(self, op: Operator, key: str) -> None:
        """404 unless the session exists and the operator may see it."""
        if not op.sees(key) or await self.store.get_session(key) is None:
            raise ConsoleError(404, "no such session")

    async def waiting(self, op: Operator, key: str | None = None) -> list[dict[str, Any]]:
        now = self.clock()
        items = []
        for pending in await self.runtime.pending_approvals():
            if not op.sees(pending.session) or (key is not None and pending.session != key):
                continue
            items.append(
                {
                    "session": pending.session,
                    "turn_id": pending.turn_id,
                    "request_id": pending.request_id,
                    "kind": "approval" if pending.kind == "confirm" else pending.kind,
                    "tool": pending.tool,
                    "summary": self.scrub(pending.prompt),
                    "since": pending.created_at,
                    "age_s": None if pending.created_at is None else now - pending.created_at,
                    "expires_at": pending.expires_at,
                    "asked_by": pending.asked_by,
                    "answerers": answerers_text(pending),
                    "slack_url": views.slack_url(pending.session),
                }
            )
        return items

    async def receipts(self, op: Operator, status: str | None) -> list[dict[str, Any]]:
        try:
            wanted = ReceiptStatus(status) if status else None
        except ValueError:
            raise ConsoleError(400, "status must be a receipt status") from None
        rows = await self.store.list_receipts(status=wanted)
        return [
            {
                "session": r.session,
                "key": r.key,
                "tool": r.key.split(":", 1)[0],
                "status": r.status.value,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
                "fingerprint": r.fingerprint,
            }
            for r in rows
            if op.sees(r.session)
        ]

    async def stuck(self, op: Operator, older_than: float) -> list[dict[str, Any]]:
        now = self.clock()
        dbs = Databases(store=self.store, delivery=self.delivery)
        found = await stuck_turns(dbs, now, older_than, FAILURES_IN_A_ROW)
        return [
            {
                "session": item.turn.session,
                "turn_id": item.turn.turn_id,
                "status": item.turn.status.value,
                "created_at": item.turn.created_at,
                "age_s": now - item.turn.created_at,
                "lease_owner": item.session.lease_owner if item.session else None,
                "reasons": [{"code": r.code, "detail": r.detail} for r in item.reasons],
            }
            for item in found
            if op.sees(item.turn.session) and not _asked_to_stop(item.turn)
        ]

    async def daily(self, op: Operator, days: int) -> list[dict[str, Any]]:
        today = datetime.fromtimestamp(self.clock(), UTC).date()
        first = today - timedelta(days=days - 1)
        since = datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()
        rows = await self.store.run_sync(lambda c: queries.turns_since(c, since, op.prefixes))
        counts: dict[str, dict[str, int]] = {
            (first + timedelta(days=i)).isoformat(): {
                "turns": 0,
                "failed": 0,
                "input_tokens": 0,
                "output_tokens": 0,
            }
            for i in range(days)
        }
        for row in rows:
            day = datetime.fromtimestamp(float(row["created_at"]), UTC).date().isoformat()
            bucket = counts.get(day)
            if bucket is None:
                continue
            bucket["turns"] += 1
            bucket["failed"] += int(row["status"] == "failed")
            result = views.loads(row["result"])
            usage = result.get("usage") if isinstance(result, dict) else None
            if isinstance(usage, dict):
                bucket["input_tokens"] += int(usage.get("input_tokens") or 0)
                bucket["output_tokens"] += int(usage.get("output_tokens") or 0)
        return [{"day": day, **bucket} for day, bucket in counts.items()]

    async def audit_entries(self, op: Operator, limit: int) -> list[dict[str, Any]]:
        rows = await self.store.run_sync(
            lambda c: queries.read_audit(c, limit, op.prefixes, op.name)
        )
        return [
            {
                "at": row["at"],
                "who": row["who"],
                "action": row["action"],
                "target": row["target"],
                "detail": views.loads(row["detail"]),
            }
            for row in rows
        ]

    # -- actions ----------------------------------------------------------------------------

    async def audit(
        self, who: str, action: str, target: str | None = None, detail: Any = None
    ) -> None:
        at = self.clock()
        await self.store.run_sync(
            lambda c: queries.write_audit(
                c, at=at, who=who, action=action, target=target, detail=detail
            ),
            write=True,
        )

    async def resolve(self, op: Operator, session: str, key: str, outcome: str, note: str) -> None:
        """`bot receipts resolve SESSION KEY --completed|--failed`, audited."""
        await self.require_session(op, session)
        receipt = await self.store.get_receipt(session, key)
        if receipt is None:
            raise ConsoleError(404, "no such receipt")
        if receipt.status is not ReceiptStatus.UNCERTAIN:
            raise ConsoleError(409, f"the receipt is {receipt.status.value}, not uncertain")
        status = ReceiptStatus.COMPLETED if outcome == "completed" else ReceiptStatus.FAILED
        try:
            await resolve_receipt(self.store, session, key, status=status)
        except Exception as err:
            # Settled by someone else since it was read (the store refuses a second settle).
            current = await self.store.get_receipt(session, key)
            if current is not None and current.status is not ReceiptStatus.UNCERTAIN:
                raise ConsoleError(409, "the receipt was resolved meanwhile") from err
            raise
        await self.audit(
            op.name,
            "receipt.resolve",
            session,
            {"key": key, "outcome": status.value, "note": self.scrub(note)},
        )

    async def cancel(self, op: Operator, session: str, turn_id: str, reason: str) -> list[str]:
        """`bot cancel SESSION --turn ID --reason ...`, audited; the turns it ended."""
        await self.require_session(op, session)
        dbs = Databases(store=self.store, delivery=self.delivery)
        handle = self.runtime.session(self.agent, session)
        why = " ".join(reason.split()) or CancelReason.STOPPED
        try:
            asked = await cancel_turn(dbs, handle, turn_id, why, OPERATOR)
        except OperatorError as err:
            raise ConsoleError(409 if "no turn" not in str(err) else 404, str(err)) from None
        if not asked:
            raise ConsoleError(409, "the turn has already ended")
        await dbs.wake_renderer(session)
        await self.audit(
            op.name,
            "turn.cancel",
            session,
            {"turn_id": turn_id, "reason": self.scrub(why), "ended": asked},
        )
        return asked


def _asked_to_stop(turn: TurnRecord) -> bool:
    """An unfinished turn someone already asked to stop (`cancel_reason` set, waiting for the
    worker that takes its session up to end it): nothing more for the console to do, so the
    stuck view leaves it out (`bot turns --stuck` still lists it, with its reason)."""
    return not turn.status.finished and turn.cancel_reason is not None
