"""The default agent's tables: `ops_orders` (written by `create_order` in its step's transaction)
and `ops_refunds` (the payments stand-in's refunds), both in `examples/ops_agent/`.

Why here, in the store's own chain, and not a migration mechanism for agent directories: the
example ships with the package and is what `bot serve` runs by default, so `bot db upgrade`
(the one command an operator already runs, under the same lock and checks) must create its
tables. A second version table or an Alembic branch per agent directory would be machinery for
agents that do not exist yet. The cost: an agent directory that is not the example brings its
own migrations (or none) and these two tables sit unused in its database, which is harmless.
Until now `create_order` ran `create table if not exists` inside the step, which collides on
PostgreSQL when first steps run concurrently (a unique violation on the catalog): tables come
from a migration, never from tool code.

An `ops_orders` made that way by older code (no order id, no amount) is kept as
`ops_orders_before_0003`: its rows cannot be refunded, but nothing an operator wrote is dropped.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

LEGACY_ORDERS = "ops_orders_before_0003"


def upgrade() -> None:
    if "ops_orders" in sa.inspect(op.get_bind()).get_table_names():
        op.rename_table("ops_orders", LEGACY_ORDERS)
    op.create_table(
        "ops_orders",
        sa.Column("order_id", sa.Text(), primary_key=True),
        sa.Column("item", sa.Text(), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
    )
    op.create_table(
        "ops_refunds",
        sa.Column("refund_id", sa.Text(), primary_key=True),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("order_id", sa.Text(), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("idempotency_key", name="uq_ops_refunds_idempotency_key"),
    )
    op.create_index("ix_ops_refunds_order_id", "ops_refunds", ["order_id"])


def downgrade() -> None:
    op.drop_table("ops_refunds")
    op.drop_table("ops_orders")
    if LEGACY_ORDERS in sa.inspect(op.get_bind()).get_table_names():
        op.rename_table(LEGACY_ORDERS, "ops_orders")
