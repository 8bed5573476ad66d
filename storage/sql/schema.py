"""The SQL tables behind `SqlStore`, as SQLAlchemy Core objects.

These objects describe the schema the code expects; the schema itself is created and changed only
by the Alembic migrations in `storage/migrations`, so a change here needs a revision there (a test
compares the migrated database with these definitions).

Every JSON value (turn input, step memo, message, event, receipt value) is stored as text: the
store never queries inside them, and text behaves the same on SQLite and PostgreSQL. Tests and
operators may import the tables to inspect rows directly.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)

# SQLite only makes a column an alias of the rowid (and so auto-incrementing) when it is declared
# exactly INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity so the counters never run out.
RowId = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("key", Text, primary_key=True),
    Column("status", Text, nullable=False),
    # Bumped by each reset; the live tables only ever hold the current generation's rows.
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("lease_owner", Text, nullable=True),
    Column("lease_epoch", Integer, nullable=False, server_default="0"),
    Column("lease_expires_at", Double, nullable=False, server_default="0"),
    # The last seq handed out in this session's event log: bumped by the fence UPDATE, so the
    # seq range of a commit is decided under the same row lock that checks the lease. A reset
    # keeps it: seqs never restart, so a subscriber's Last-Event-ID stays meaningful.
    Column("event_seq", BigInteger, nullable=False, server_default="0"),
    # Canonical JSON (sorted keys): a resume compares it as text with what the resumer read.
    Column("pending", Text, nullable=True),
    Column("updated_at", Double, nullable=False, server_default="0"),
    # `list_parked`: the parked sessions, for who-may-answer-what across sessions.
    Index("ix_sessions_status", "status"),
)

turns = Table(
    "turns",
    metadata,
    # `TurnRecord.seq`: queue order is insertion order.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("kind", Text, nullable=False, server_default="turn"),
    Column("status", Text, nullable=False),
    Column("input", Text, nullable=False),
    Column("result", Text, nullable=True),
    Column("cancel_reason", Text, nullable=True),
    Column("fingerprint", Text, nullable=True),
    # The generation the turn runs in. Turn rows outlive resets (turn ids stay unique forever, so
    # a Slack retry of a message from before a reset is still recognised); this says which
    # generation's `list_turns` shows them.
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("created_at", Double, nullable=False),
    # Who asked the turn to stop, with `cancel_reason` (`AgentSession.stop(by=...)`).
    Column("cancelled_by", Text, nullable=True),
    # `TurnInput.speaker_key` (`<team>:<user>` of an attested speaker): a person's own recent
    # turns across sessions. Copied out of `input` because the store never queries inside JSON.
    Column("speaker", Text, nullable=True),
    # When the turn ended (completed, failed, cancelled): what retention measures its age by.
    # NULL while it is open.
    Column("finished_at", Double, nullable=True),
    # When `bot prune` removed its steps and events: the row stays as a tombstone (its id,
    # status and result), so a re-delivered turn id is still replayed, never run again.
    Column("pruned_at", Double, nullable=True),
    UniqueConstraint("session_key", "turn_id", name="uq_turns_session_turn"),
    Index("ix_turns_session_status_id", "session_key", "status", "id"),
    Index("ix_turns_speaker_id", "speaker", "id"),
    # Retention walks the turns not pruned yet, in queue order.
    Index("ix_turns_pruned_id", "pruned_at", "id"),
    # The backlog across sessions (the queued-turns gauge, its oldest age, stuck turns): a range
    # of this index, not a scan of every turn ever run.
    Index("ix_turns_status_created", "status", "created_at"),
)

messages = Table(
    "messages",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("body", Text, nullable=False),
    # True for a message holding the API's compaction of the thread before it (a compaction
    # block with content), NULL otherwise: a compacting session is loaded from the newest one,
    # found through the partial index below, which holds only these few rows.
    Column("compaction", Boolean, nullable=True),
    PrimaryKeyConstraint("session_key", "idx", name="pk_messages"),
    Index(
        "ix_messages_compaction",
        "session_key",
        "idx",
        sqlite_where=text("compaction IS NOT NULL"),
        postgresql_where=text("compaction IS NOT NULL"),
    ),
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
    # When the step committed (epoch seconds; NULL for rows from before revision 0015): the
    # console's timeline, and a step's duration (since the previous step of its turn).
    Column("created_at", Double, nullable=True),
    # Step ids carry their turn where they need to (`input:<turnId>:<id>`), and `model:<n>` /
    # `tool:<n>:<call>` are keyed by transcript index, which is unique per session generation.
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
    # When the event was logged (epoch seconds; NULL before revision 0015).
    Column("created_at", Double, nullable=True),
    PrimaryKeyConstraint("session_key", "seq", name="pk_events"),
)

confirmations = Table(
    "confirmations",
    metadata,
    # Listing order ("oldest first") is insertion order.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    Column("confirmation_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("call_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("arguments", Text, nullable=False),
    Column("prompt", Text, nullable=False),
    Column("answerers", Text, nullable=True),
    # What a confirmation="capability" tool showed with its prompt (JSON); NULL for "required".
    Column("details", Text, nullable=True),
    Column("status", Text, nullable=False),
    # `ConfirmationRecord.by`; BY is a reserved word, which would make every hand-written
    # operator query quote it.
    Column("answered_by", Text, nullable=True),
    Column("follow_up_turn", Text, nullable=True),
    Column("created_at", Double, nullable=False),
    Column("resolved_at", Double, nullable=True),
    # What the person said with their answer (scrubbed); NULL when they said nothing.
    Column("reason", Text, nullable=True),
    # When it expires if nobody answers (its timer's due time); NULL: never.
    Column("expires_at", Double, nullable=True),
    # The call as the approver edited it before approving (JSON), which is what ran; NULL: as
    # proposed.
    Column("approved_arguments", Text, nullable=True),
    UniqueConstraint("session_key", "confirmation_id", name="uq_confirmations_session_id"),
    # Pending confirmations across sessions: who may answer what.
    Index("ix_confirmations_status_id", "status", "id"),
)

approval_timers = Table(
    "approval_timers",
    metadata,
    # One row per request put to a person with a time limit, a reminder or an escalation,
    # committed with the request (the park's checkpoint, the proposal), deleted in the
    # transaction that ends it (an answer, a stop, a reset, its own expiry). Whichever process
    # sweeps first applies a due one.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    # `input` (a park: `request_id` is the input id) or `confirmation` (the confirmation id).
    Column("kind", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("due_at", Double, nullable=False),
    Column("expires_after", Double, nullable=False),
    Column("created_at", Double, nullable=False),
    # `expire`, `remind` or `escalate` (`TimerAction`); a request has at most one of each.
    Column("action", Text, nullable=False, server_default="expire"),
    # An escalation's answerers (JSON, `answerers_to_json`); NULL for the other actions.
    Column("answerers", Text, nullable=True),
    # When a reminder or an escalation fired (its claim); NULL until then, and for expiries,
    # which delete their row instead.
    Column("fired_at", Double, nullable=True),
    UniqueConstraint(
        "session_key",
        "kind",
        "turn_id",
        "request_id",
        "action",
        name="uq_approval_timers_request_action",
    ),
    Index("ix_approval_timers_due_at", "due_at"),
)

approval_votes = Table(
    "approval_votes",
    metadata,
    # One row per person's vote on a request that needs several approvals (a `Quorum`), cast
    # under the session row's lock; the request itself resolves through its own row (the park's
    # checkpoint, the confirmation). Listing order ("in the order cast") is insertion order.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    # `input` (a park: `request_id` is the input id) or `confirmation` (the confirmation id).
    Column("kind", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("voter", Text, nullable=False),
    Column("approve", Boolean, nullable=False),
    # What the voter said with it (scrubbed); NULL when they said nothing.
    Column("reason", Text, nullable=True),
    Column("voted_at", Double, nullable=False),
    # One person counts once.
    UniqueConstraint(
        "session_key", "kind", "turn_id", "request_id", "voter", name="uq_approval_votes_voter"
    ),
)

standing_grants = Table(
    "standing_grants",
    metadata,
    # "Approve, and allow this again": one row per grant, issued with the approval it came with
    # and kept after it lapses or is revoked (the timeline names it). Not a session's row: a
    # CHANNEL grant covers every session in its channel, so a reset archives none of them.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("grant_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("team", Text, nullable=False),
    Column("enterprise", Text, nullable=True),
    # `thread` (covers `session_key`) or `channel` (covers `channel`).
    Column("scope", Text, nullable=False),
    Column("session_key", Text, nullable=False),
    Column("channel", Text, nullable=True),
    Column("speaker", Text, nullable=False),
    Column("granted_by", Text, nullable=False),
    Column("confirmation_id", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    # Checked against the clock when a grant is used, so nothing has to fire for it to lapse.
    Column("expires_at", Double, nullable=False),
    Column("revoked_at", Double, nullable=True),
    Column("revoked_by", Text, nullable=True),
    UniqueConstraint("grant_id", name="uq_standing_grants_grant_id"),
    # One grant per approval: an answer retried after a crash inserts nothing the second time.
    UniqueConstraint("session_key", "confirmation_id", name="uq_standing_grants_approval"),
    # `find_grant`, asked before a grantable tool's proposed call: this workspace, tool, speaker.
    Index("ix_standing_grants_team_tool_speaker", "team", "tool", "speaker"),
)

receipts = Table(
    "receipts",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    # `<tool>:<key>`: one receipt per effect key and session, whatever turn wrote it, so a key
    # is deduplicated across turns (and across resets: receipts are never archived, an uncertain
    # write must stay visible until a person settles it).
    Column("key", Text, nullable=False),
    Column("receipt_id", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step_id", Text, nullable=False),
    Column("attempt", Integer, nullable=False, server_default="1"),
    Column("value", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    UniqueConstraint("session_key", "key", name="uq_receipts_session_key"),
    # Operators list receipts by status across sessions (`bot receipts list --status uncertain`).
    Index("ix_receipts_status_id", "status", "id"),
)

facts = Table(
    "facts",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("session_key", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("value", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step_id", Text, nullable=False),
    Column("call_id", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    # Versions are chosen by the writer; two writers choosing the same one is a step conflict.
    UniqueConstraint("session_key", "key", "version", name="uq_facts_session_key_version"),
)

# -- the archive: what a reset retired, one generation at a time ---------------------------------
# Same columns as the live tables plus `generation`; the live tables' row ids are kept as plain
# columns (they carry commit order) rather than regenerated.

archived_messages = Table(
    "archived_messages",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("compaction", Boolean, nullable=True),
    PrimaryKeyConstraint("session_key", "generation", "idx", name="pk_archived_messages"),
)

archived_steps = Table(
    "archived_steps",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("id", BigInteger, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step_id", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("created_at", Double, nullable=True),
    PrimaryKeyConstraint("session_key", "generation", "id", name="pk_archived_steps"),
)

archived_events = Table(
    "archived_events",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", Double, nullable=True),
    PrimaryKeyConstraint("session_key", "generation", "seq", name="pk_archived_events"),
)

archived_facts = Table(
    "archived_facts",
    metadata,
    Column("session_key", Text, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("id", BigInteger, nullable=False),
    Column("key", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("value", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step_id", Text, nullable=False),
    Column("call_id", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    PrimaryKeyConstraint("session_key", "generation", "id", name="pk_archived_facts"),
)

console_audit = Table(
    "console_audit",
    metadata,
    # One row per operator console action (`bot.console`): a login (ok or failed), a logout, a
    # receipt resolved, a turn cancelled. `who` is the operator's name, never a token.
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("at", Double, nullable=False),
    Column("who", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("target", Text, nullable=True),
    # JSON text: what the action said (outcome, note, reason).
    Column("detail", Text, nullable=True),
    Index("ix_console_audit_at", "at"),
)

ARCHIVED = (
    (messages, archived_messages),
    (steps, archived_steps),
    (events, archived_events),
    (facts, archived_facts),
)
"""Live table → its archive: everything a reset retires."""

STORE_TABLES = (
    sessions,
    turns,
    messages,
    steps,
    events,
    confirmations,
    receipts,
    facts,
    approval_timers,
    approval_votes,
    standing_grants,
    archived_messages,
    archived_steps,
    archived_events,
    archived_facts,
    console_audit,
)
"""Every table the store owns, for tests and tools that empty or inspect them all."""
