"""Tables the Slack surface keeps beside the engine's: where each session's replies go, how far
its event log has been delivered, every message it posted, and what people said of the answers
(the feedback buttons).

They live in the same database as the engine's tables (created by migration 0002), but the
engine never reads them: delivery is the surface's business, and a renderer that crashed must
find, in SQL, exactly what it had already shown so it neither loses nor repeats a post.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
)

DELIVERY_REVISION = "0002"
"""The migration that creates these tables; a database below it cannot deliver."""

delivery_metadata = MetaData()

delivery_targets = Table(
    "delivery_targets",
    delivery_metadata,
    Column("session_key", Text, primary_key=True),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    # NULL for a proactive post at the top of a channel.
    Column("thread_ts", Text, nullable=True),
    Column("user_id", Text, nullable=True),
    # The last event seq whose effect on Slack is recorded below (posts' bodies included).
    Column("cursor", BigInteger, nullable=False, server_default="0"),
    # 1 while there may be something left to render. `activity` grows with every registration so
    # a renderer going idle cannot clear a flag set after it last looked.
    Column("active", Integer, nullable=False, server_default="1"),
    Column("activity", BigInteger, nullable=False, server_default="0"),
    Column("lease_owner", Text, nullable=True),
    Column("lease_expires_at", Double, nullable=False, server_default="0"),
    Column("updated_at", Double, nullable=False, server_default="0"),
    Index("ix_delivery_targets_active", "active"),
    Index("ix_delivery_targets_channel", "team", "channel", "updated_at"),
)

delivery_posts = Table(
    "delivery_posts",
    delivery_metadata,
    # Also written into the Slack message's metadata, which is how an uncertain post is found.
    Column("post_key", Text, primary_key=True),
    Column("session_key", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("part", Integer, nullable=False, server_default="0"),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=True),
    Column("ts", Text, nullable=True),
    # posting (sent, outcome unknown until ts is recorded) → open → closed
    Column("state", Text, nullable=False),
    Column("mode", Text, nullable=False, server_default="stream"),
    Column("body", Text, nullable=False, server_default="{}"),
    Column("opened_at", Double, nullable=False, server_default="0"),
    Column("updated_at", Double, nullable=False, server_default="0"),
    Index("ix_delivery_posts_session_turn", "session_key", "turn_id", "kind"),
    Index("ix_delivery_posts_session_state", "session_key", "state"),
)

slack_feedback = Table(
    "slack_feedback",
    delivery_metadata,
    # One row per person and answer: the buttons toggle, so the last click wins (migration 0006).
    Column("session_key", Text, primary_key=True),
    Column("turn_id", Text, primary_key=True),
    Column("team", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("value", Text, nullable=False),  # positive | negative
    Column("clicked_at", Double, nullable=False),
    Index("ix_slack_feedback_clicked_at", "clicked_at"),
)

slack_home_viewers = Table(
    "slack_home_viewers",
    delivery_metadata,
    # Who has a Home tab (the approval inbox) to keep fresh, with the org their principal names
    # (migration 0006): republished when a request they may answer appears or goes.
    Column("team", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("enterprise", Text, nullable=True),
    Column("opened_at", Double, nullable=False),
)

DELIVERY_TABLES = (delivery_targets, delivery_posts, slack_feedback, slack_home_viewers)
