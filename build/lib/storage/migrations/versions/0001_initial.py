"""Initial schema: sessions, turns, the message log, steps, events, confirmations, receipts, facts
and the archive a reset moves a generation's rows into.

Written out by hand rather than imported from `storage.sql.schema`: a migration must keep creating
exactly what it created on the day it shipped, whatever the live schema module says later.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("key", sa.Text(), primary_key=True),
        _text("status"),
        sa.Column("generation", sa.Integer(), nullable=False, server_default="0"),
        _text("lease_owner", nullable=True),
        sa.Column("lease_epoch", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("lease_expires_at", sa.Double(), nullable=False, server_default="0"),
        sa.Column("event_seq", sa.BigInteger(), nullable=False, server_default="0"),
        _text("pending", nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False, server_default="0"),
    )
    op.create_table(
        "turns",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        _text("session_key"),
        _text("turn_id"),
        sa.Column("kind", sa.Text(), nullable=False, server_default="turn"),
        _text("status"),
        _text("input"),
        _text("result", nullable=True),
        _text("cancel_reason", nullable=True),
        _text("fingerprint", nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("session_key", "turn_id", name="uq_turns_session_turn"),
    )
    op.create_index("ix_turns_session_status_id", "turns", ["session_key", "status", "id"])
    op.create_table(
        "messages",
        _text("session_key"),
        sa.Column("idx", sa.Integer(), nullable=False),
        _text("turn_id"),
        _text("role"),
        _text("body"),
        sa.PrimaryKeyConstraint("session_key", "idx", name="pk_messages"),
    )
    op.create_table(
        "steps",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        _text("session_key"),
        _text("turn_id"),
        _text("step_id"),
        _text("value"),
        sa.UniqueConstraint("session_key", "step_id", name="uq_steps_session_step"),
    )
    op.create_index("ix_steps_session_turn_id", "steps", ["session_key", "turn_id", "id"])
    op.create_table(
        "events",
        _text("session_key"),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        _text("turn_id"),
        _text("type"),
        _text("body"),
        sa.PrimaryKeyConstraint("session_key", "seq", name="pk_events"),
    )
    op.create_table(
        "confirmations",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        _text("session_key"),
        _text("confirmation_id"),
        _text("turn_id"),
        _text("call_id"),
        _text("tool"),
        _text("arguments"),
        _text("prompt"),
        _text("answerers", nullable=True),
        _text("status"),
        _text("answered_by", nullable=True),
        _text("follow_up_turn", nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("resolved_at", sa.Double(), nullable=True),
        sa.UniqueConstraint("session_key", "confirmation_id", name="uq_confirmations_session_id"),
    )
    op.create_table(
        "receipts",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        _text("session_key"),
        _text("key"),
        _text("receipt_id"),
        _text("fingerprint"),
        _text("status"),
        _text("turn_id"),
        _text("step_id"),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"),
        _text("value", nullable=True),
        _text("error", nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("session_key", "key", name="uq_receipts_session_key"),
    )
    op.create_index("ix_receipts_status_id", "receipts", ["status", "id"])
    op.create_table(
        "facts",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        *_fact_columns(),
        sa.UniqueConstraint("session_key", "key", "version", name="uq_facts_session_key_version"),
    )
    _create_archive()


def _fact_columns() -> list[sa.Column[Any]]:
    return [
        _text("session_key"),
        _text("key"),
        sa.Column("version", sa.Integer(), nullable=False),
        _text("value"),
        _text("turn_id"),
        _text("step_id"),
        _text("call_id"),
        sa.Column("created_at", sa.Double(), nullable=False),
    ]


def _create_archive() -> None:
    def generation() -> sa.Column[int]:
        return sa.Column("generation", sa.Integer(), nullable=False)

    op.create_table(
        "archived_messages",
        _text("session_key"),
        generation(),
        sa.Column("idx", sa.Integer(), nullable=False),
        _text("turn_id"),
        _text("role"),
        _text("body"),
        sa.PrimaryKeyConstraint("session_key", "generation", "idx", name="pk_archived_messages"),
    )
    op.create_table(
        "archived_steps",
        _text("session_key"),
        generation(),
        sa.Column("id", sa.BigInteger(), nullable=False),
        _text("turn_id"),
        _text("step_id"),
        _text("value"),
        sa.PrimaryKeyConstraint("session_key", "generation", "id", name="pk_archived_steps"),
    )
    op.create_table(
        "archived_events",
        _text("session_key"),
        generation(),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        _text("turn_id"),
        _text("type"),
        _text("body"),
        sa.PrimaryKeyConstraint("session_key", "generation", "seq", name="pk_archived_events"),
    )
    op.create_table(
        "archived_facts",
        generation(),
        sa.Column("id", sa.BigInteger(), nullable=False),
        *_fact_columns(),
        sa.PrimaryKeyConstraint("session_key", "generation", "id", name="pk_archived_facts"),
    )


def downgrade() -> None:
    for table in (
        "archived_facts",
        "archived_events",
        "archived_steps",
        "archived_messages",
        "facts",
        "receipts",
        "confirmations",
        "events",
        "steps",
        "messages",
        "turns",
        "sessions",
    ):
        op.drop_table(table)
