"""The example's own tables, as its code reads and writes them. Migration 0003
(`storage/migrations/versions/0003_ops_example.py`) creates them; nothing here runs DDL, since
`create table if not exists` inside a step races with itself on PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Column, Double, Index, Integer, MetaData, Table, Text, UniqueConstraint

metadata = MetaData()

ops_orders = Table(
    "ops_orders",
    metadata,
    Column("order_id", Text, primary_key=True),
    Column("item", Text, nullable=False),
    Column("quantity", Integer, nullable=False),
    # What the customer paid, in cents: the most any refunds of the order may add up to.
    Column("amount_cents", Integer, nullable=False),
)

ops_refunds = Table(
    "ops_refunds",
    metadata,
    Column("refund_id", Text, primary_key=True),
    Column("idempotency_key", Text, nullable=False),
    Column("order_id", Text, nullable=False),
    Column("amount_cents", Integer, nullable=False),
    Column("created_at", Double, nullable=False),
    # The provider's promise: one refund per idempotency key.
    UniqueConstraint("idempotency_key", name="uq_ops_refunds_idempotency_key"),
    Index("ix_ops_refunds_order_id", "order_id"),
)
