"""A stand-in for a payment provider's refunds API. No money moves: a refund is a row in
`ops_refunds`. Replace it with your provider's client; keep what the tool relies on.

What it does the way a real provider (Stripe, Adyen, ...) does, because the tool's guarantees
depend on it:
- It is remote: its own connection and transaction, never the turn step's. The tool reaches it
  through `ctx.run_effect`, which records a receipt before the call.
- It honours idempotency keys: the same key returns the first refund, never a second one, so a
  retry after a crash or a timeout cannot pay twice; the same key with a different refund is
  refused. `find(key)` looks a refund up by key, which is how an uncertain call is reconciled.
- It refuses a refund of an unknown order, or one that would take more than was paid, and then
  provably applies nothing (`RefundRefused` is an `EffectNotAppliedError`), so the receipt is
  `failed` and the model reads why.

It lives in the database `DATABASE_URL` names (see `config.py`), the bot's own by default.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Connection, func, select

from agent import EffectNotAppliedError
from storage.sql.dialects import dialect_for
from storage.sql.executor import TransactionExecutor

from .tables import ops_orders, ops_refunds


class RefundRefused(EffectNotAppliedError):
    """The provider turned the refund down; nothing was refunded."""


def dollars(cents: int) -> str:
    return f"${cents / 100:,.2f}"


class PaymentsStandIn:
    def __init__(self, transactions: TransactionExecutor) -> None:
        self._x = transactions

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[PaymentsStandIn]:
        """A connection for one call; SQLite and PostgreSQL set up as the store's (busy
        timeout, write transactions that take the lock up front)."""
        transactions = dialect_for(url).executor()
        try:
            yield cls(transactions)
        finally:
            await transactions.close()

    async def refund(
        self, *, order_id: str, amount_cents: int, idempotency_key: str
    ) -> dict[str, Any]:
        """Refund `amount_cents` of an order once per key; returns the receipt."""
        return await self._x.write(
            lambda conn: _refund(conn, order_id, amount_cents, idempotency_key)
        )

    async def refunded_cents(self, order_id: str) -> int:
        """How much of an order was refunded so far (0 for none, or no such order)."""
        return await self._x.read(lambda conn: _refunded(conn, order_id))

    async def find(self, idempotency_key: str) -> dict[str, Any] | None:
        """The refund made under this key, or None if the provider never made one."""
        return await self._x.read(lambda conn: _by_key(conn, idempotency_key))


def _receipt(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        name: row[name] for name in ("refund_id", "order_id", "amount_cents", "idempotency_key")
    }


def _by_key(conn: Connection, key: str) -> dict[str, Any] | None:
    row = conn.execute(select(ops_refunds).where(ops_refunds.c.idempotency_key == key)).first()
    return _receipt(row._mapping) if row is not None else None


def _refund(conn: Connection, order_id: str, amount_cents: int, key: str) -> dict[str, Any]:
    if amount_cents <= 0:
        raise RefundRefused(f"a refund must be positive, not {dollars(amount_cents)}")
    # Locking the order row serialises refunds of one order (on PostgreSQL; SQLite's write
    # transactions are serial anyway), so two at once cannot both fit under what was paid.
    paid = conn.execute(
        select(ops_orders.c.amount_cents).where(ops_orders.c.order_id == order_id).with_for_update()
    ).scalar_one_or_none()
    if paid is None:
        raise RefundRefused(f"no order {order_id}; nothing was refunded")
    existing = _by_key(conn, key)
    if existing is not None:
        if (existing["order_id"], existing["amount_cents"]) != (order_id, amount_cents):
            raise RefundRefused(
                f"idempotency key {key} was used for a different refund; nothing was refunded"
            )
        return existing
    refunded = _refunded(conn, order_id)
    left = paid - refunded
    if amount_cents > left:
        raise RefundRefused(
            f"{dollars(amount_cents)} is more than the {dollars(left)} left on order {order_id} "
            f"(paid {dollars(paid)}, refunded {dollars(refunded)}); nothing was refunded"
        )
    row = {
        "refund_id": f"re_{uuid.uuid4().hex[:16]}",
        "idempotency_key": key,
        "order_id": order_id,
        "amount_cents": amount_cents,
        "created_at": time.time(),
    }
    conn.execute(ops_refunds.insert().values(**row))
    return _receipt(row)


def _refunded(conn: Connection, order_id: str) -> int:
    total = conn.execute(
        select(func.coalesce(func.sum(ops_refunds.c.amount_cents), 0)).where(
            ops_refunds.c.order_id == order_id
        )
    ).scalar_one()
    return int(total)
