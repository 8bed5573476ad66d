"""The SQL tables behind `SqlStore`, as SQLAlchemy Core objects.

These objects describe the schema the code expects; the schema itself is created and changed only
by the Alembic migrations in `storage/migrations`, so a change here needs a new revision there
(and `HEAD_REVISION` bumped with it; a test compares the two).

Every JSON value (turn input, step memo, message, event) is stored as text: the store never
queries inside them, and text behaves the same on SQLite and PostgreSQL. Tests and operators may
import the tables to inspect rows directly.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
)

HEAD_REVISION = "0001"
"""The Alembic revision this code was written against; `SqlStore.open` refuses any other."""

# SQLite only makes a column an alias of the rowid (and so auto-incrementing) when it is declared
# exactly INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity so the counters never run out.
RowId = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("key", Text, primary_key=True),
    Column("status", Text, nullable=False),
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("lease_owner", Text, nullable=True),
    Column("lease_epoch", Integer, nullable=False, server_default="0"),
    Column("lease_expires_at", Double, nullable=False, server_default="0"),
    # The last seq handed out in this session's event log: bumped by the fence UPDATE, so the
    # seq range of a commit is decided under the same row lock that checks the lease.
    Column("event_seq", BigInteger, nullable=False, server_default="0"),
    Column("pending", Text, nullable=True),
    Column("updated_at", Double, nullable=False, server_default="0"),
)

turns = Table(
    "turns",
    metadata,
    # `TurnRecord.seq`: queue order is insertion order.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("input", Text, nullable=False),
    Column("result", Text, nullable=True),
    Column("cancel_reason", Text, nullable=True),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("session_key", "turn_id", name="uq_turns_session_turn"),
    Index("ix_turns_session_status_id", "session_key", "status", "id"),
)

messages = Table(
    "messages",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("body", Text, nullable=False),
    PrimaryKeyConstraint("session_key", "idx", name="pk_messages"),
)

steps = Table(
    "steps",
    metadata,
    # Commit order: `load_steps` returns memos in the order they were written.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step_id", Text, nullable=False),
    Column("value", Text, nullable=False),
    # Step ids carry their turn where they need to (`input:<turnId>:<id>`), and `model:<n>` /
    # `tool:<n>:<call>` are keyed by transcript index, which is unique per session.
    UniqueConstraint("session_key", "step_id", name="uq_steps_session_step"),
    Index("ix_steps_session_turn_id", "session_key", "turn_id", "id"),
)

events = Table(
    "events",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("body", Text, nullable=False),
    PrimaryKeyConstraint("session_key", "seq", name="pk_events"),
)

STORE_TABLES = (sessions, turns, messages, steps, events)
"""Every table the store owns, for tests and tools that empty or inspect them all."""
