"""The delivery store's statements, built once per store with bound parameters: `register` runs
before every ack, and building an INSERT ... ON CONFLICT and deriving its cache key on every call
costs about as much CPU as executing it (bench/README.md, "Why the store is built as it is")."""

from __future__ import annotations

from sqlalchemy import BindParameter, bindparam, func, select, update

from storage.delivery.schema import (
    delivery_posts,
    delivery_targets,
    slack_feedback,
    slack_home_viewers,
)
from storage.sql.dialects import SqlDialect


class Statements:
    """Built once per store: executing a prepared construct skips building it and deriving its
    cache key, which is most of what a small statement costs SQLAlchemy."""

    def __init__(self, dialect: SqlDialect) -> None:
        t, p = delivery_targets.c, delivery_posts.c
        insert = dialect.insert
        target = insert(delivery_targets)
        # Columns come from the parameters; `user_id` is kept when a registration has none.
        self.register = target.on_conflict_do_update(
            index_elements=[t.session_key],
            set_={
                "active": 1,
                "activity": t.activity + 1,
                "updated_at": target.excluded.updated_at,
                "user_id": func.coalesce(target.excluded.user_id, t.user_id),
            },
        )
        key = t.session_key == bindparam("b_key")
        self.mark_active = (
            update(delivery_targets)
            .where(key)
            .values(active=1, activity=t.activity + 1, updated_at=bindparam("b_now"))
        )
        self.get_target = select(delivery_targets).where(key)
        self.latest_in_channel = (
            select(delivery_targets)
            .where(
                t.team == bindparam("b_team"),
                t.channel == bindparam("b_channel"),
                t.thread_ts.is_not(None),
            )
            .order_by(t.updated_at.desc())
            .limit(1)
        )
        self.active_sessions = select(t.session_key).where(t.active == 1)
        owner: BindParameter[str] = bindparam("b_owner")
        self.acquire = (
            update(delivery_targets)
            .where(
                key,
                t.lease_owner.is_(None)
                | (t.lease_owner == owner)
                | (t.lease_expires_at < bindparam("b_now")),
            )
            .values(lease_owner=owner, lease_expires_at=bindparam("b_expires"))
        )
        self.release = (
            update(delivery_targets)
            .where(key, t.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=0)
        )
        self.go_idle = (
            update(delivery_targets)
            .where(key, t.activity == bindparam("b_activity"))
            .values(active=0)
        )
        cursor: BindParameter[int] = bindparam("b_cursor")
        self.advance = update(delivery_targets).where(key, t.cursor < cursor).values(cursor=cursor)
        post_key = p.post_key == bindparam("b_post")
        self.insert_post = insert(delivery_posts).on_conflict_do_nothing()
        self.get_post = select(delivery_posts).where(post_key)
        # SET takes whichever columns the parameters name besides `b_post`.
        self.update_post = update(delivery_posts).where(post_key)
        self.delete_post = delivery_posts.delete().where(post_key)
        feedback = insert(slack_feedback)
        f = slack_feedback.c
        # The buttons toggle: a person's later click replaces an earlier one, whichever of two
        # racing requests commits last.
        self.record_feedback = feedback.on_conflict_do_update(
            index_elements=[f.session_key, f.turn_id, f.team, f.user_id],
            set_={"value": feedback.excluded.value, "clicked_at": feedback.excluded.clicked_at},
            where=feedback.excluded.clicked_at >= f.clicked_at,
        )
        viewer = insert(slack_home_viewers)
        self.note_home_viewer = viewer.on_conflict_do_update(
            index_elements=[slack_home_viewers.c.team, slack_home_viewers.c.user_id],
            set_={"enterprise": viewer.excluded.enterprise, "opened_at": viewer.excluded.opened_at},
        )
