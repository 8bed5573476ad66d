"""The step commit's fast paths write exactly what the general path writes.

`storage.sql.driver` runs the hot statements on the driver's cursor, and on PostgreSQL
`storage.sql.commit_postgres` writes a whole step in one statement. Both are only an
optimisation: the rows a commit leaves, and what it refuses, must be the same as through the
general path of separate SQLAlchemy statements. The store contract (`test_session_store.py`)
covers the refusals on every backend; here the rows are compared side by side.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from sqlalchemy import (
    Column,
    Connection,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    insert,
    select,
    text,
    update,
)

from agent import (
    ActionCompleted,
    AssistantMessage,
    TextBlock,
    ToolCall,
    ToolMessage,
    TurnCompleted,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserMessage,
)
from agent.seams import SessionStatus, StepCommit
from storage import SqlStore
from storage.sql import commit_postgres as sql_commit_postgres
from storage.sql.driver import DriverStatement, integrity_errors
from storage.sql.schema import events, messages, sessions, steps, turns

TTL = 30.0
NOW = 1_000.0
MANY = sql_commit_postgres.MOST_ROWS + 2
"""Events in one commit: more than one statement takes."""


def _turn(session: str) -> list[StepCommit]:
    """A turn's commits, each shape the engine makes: the opening, a model step asking for a
    tool, the tool's result, a park, an answer's step, a commit of events only and more rows
    than one statement takes, and the end."""
    call = ToolCall(id="c1", name="lookup", input={"order": "A-1"})
    return [
        StepCommit(
            turn_id="t1",
            step_id="input:t1:open",
            step_value={"text": "hi"},
            messages=[(0, UserMessage(turn_id="t1", text="hi"))],
            events=[TurnStarted(session=session, turn_id="t1", text="hi")],
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
        ),
        StepCommit(
            turn_id="t1",
            step_id="model:1",
            step_value={"content": "ask"},
            messages=[(1, AssistantMessage(turn_id="t1", content=(call,), stop_reason="tool"))],
        ),
        StepCommit(
            turn_id="t1",
            step_id="tool:2:c1",
            step_value={"ok": True},
            messages=[(2, ToolMessage(turn_id="t1", call_id="c1", name="lookup", result=1))],
            events=[
                ActionCompleted(
                    session=session, turn_id="t1", call_id="c1", name="lookup", result=1
                )
            ],
        ),
        StepCommit(
            turn_id="t1",
            step_id="park:3",
            step_value={"asked": "approve?"},
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending={"turn_id": "t1", "step": "answer:3", "prompt": 'approve? "quoted" \\ ok'},
        ),
        StepCommit(
            turn_id="t1",
            step_id="answer:3",
            step_value={"approved": True},
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
            set_pending=True,
            pending=None,
        ),
        StepCommit(
            turn_id="t1",
            events=[
                ActionCompleted(
                    session=session, turn_id="t1", call_id=f"c{i}", name="lookup", result=i
                )
                for i in range(MANY)
            ],
        ),
        StepCommit(
            turn_id="t1",
            step_id="model:4",
            step_value={"content": "done"},
            messages=[
                (
                    3,
                    AssistantMessage(
                        turn_id="t1", content=(TextBlock(text="done ✓"),), stop_reason="end"
                    ),
                )
            ],
            events=[TurnCompleted(session=session, turn_id="t1", text="done ✓")],
            turn_status=TurnStatus.COMPLETED,
            turn_result={"text": "done ✓"},
            turn_fingerprint="fp-1",
            session_status=SessionStatus.IDLE,
        ),
    ]


async def _run_turn(store: SqlStore, session: str) -> list[list[int]]:
    await store.enqueue_turn(session, "t1", TurnInput(text="hi"))
    lease = await store.acquire_lease(session, "w1", TTL, NOW)
    assert lease is not None
    seqs = []
    for n, commit in enumerate(_turn(session)):
        committed = await store.commit(lease, commit, TTL, NOW + n)
        seqs.append([e.seq for e in committed])
    return seqs


def _rows(session: str) -> Callable[[Connection], dict[str, list[tuple[Any, ...]]]]:
    def read(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
        found = {}
        for table, order in (
            (steps, steps.c.id),
            (messages, messages.c.idx),
            (events, events.c.seq),
            (turns, turns.c.id),
            (sessions, sessions.c.key),
        ):
            columns = [
                c for c in table.c if c.name not in ("id", "key", "session_key", "created_at")
            ]
            key = sessions.c.key if table is sessions else table.c.session_key
            query = select(*columns).where(key == session).order_by(order)
            found[table.name] = [tuple(row) for row in conn.execute(query)]
        return found

    return read


@pytest.mark.postgres
async def test_one_statement_commits_write_what_separate_statements_write(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SqlStore.open(postgres_url)
    taken: list[str] = []
    one_statement = sql_commit_postgres.commit_step

    def counted(conn: Connection, lease: Any, commit: StepCommit, *rest: Any) -> int | None:
        taken.append(commit.step_id or "events")
        return one_statement(conn, lease, commit, *rest)

    try:
        monkeypatch.setattr(sql_commit_postgres, "commit_step", counted)
        fast = await _run_turn(store, "fast")
        # Every commit but the one with more rows than one statement takes went as one.
        assert len(taken) == len(_turn("fast")) - 1
        assert "events" not in taken

        monkeypatch.setattr(sql_commit_postgres, "MOST_ROWS", -1)  # nothing fits: general path
        taken.clear()
        general = await _run_turn(store, "general")
        assert taken == []

        assert fast == general
        fast_rows = await store.run_sync(_rows("fast"))
        general_rows = await store.run_sync(_rows("general"))
        # The events' bodies name their session; everything else must be byte for byte equal.
        for row_list in (fast_rows["events"], general_rows["events"]):
            row_list[:] = [(*row[:-1], row[-1].replace("fast", "general")) for row in row_list]
        assert fast_rows == general_rows
        assert [seq for (seq, *_) in fast_rows["events"]] == list(range(1, 1 + sum(map(len, fast))))
    finally:
        await store.close()


# -- DriverStatement -----------------------------------------------------------------------------

_log = text("CREATE TABLE driver_log (id INTEGER PRIMARY KEY, name TEXT NOT NULL, n INTEGER)")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def driver_url(request: pytest.FixtureRequest) -> str:
    """Sync, as `store_url` is (see tests/conftest.py)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def sql_store(driver_url: str) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(driver_url)
    await store.run_sync(lambda c: c.execute(_log), write=True)
    yield store
    await store.run_sync(lambda c: c.execute(text("DROP TABLE driver_log")), write=True)
    await store.close()


async def test_driver_statements_bind_names_literals_and_many_rows(sql_store: SqlStore) -> None:
    log = Table(
        "driver_log",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("name", Text),
        Column("n", Integer),
    )
    add = DriverStatement(insert(log))
    # `n + 1` binds its 1 as a literal the statement carries; `name` is used twice.
    bump = DriverStatement(
        update(log)
        .where(log.c.name == bindparam("who"), log.c.n < bindparam("below"))
        .values(n=log.c.n + 1, name=bindparam("who"))
        .returning(log.c.n)
    )

    def body(conn: Connection) -> tuple[Any, ...]:
        add.execute_many(conn, [{"id": i, "name": f"r{i}", "n": i} for i in range(3)])
        add.execute_many(conn, [{"id": 9, "name": "single", "n": 5}])
        add.execute_many(conn, [])
        return (
            bump.first(conn, {"who": "single", "below": 10}),
            bump.first(conn, {"who": "single", "below": 0}),
            bump.count(conn, {"who": "r1", "below": 10}),
        )

    assert await sql_store.run_sync(body, write=True) == ((6,), None, 1)
    rows = await sql_store.run_sync(
        lambda c: [tuple(r) for r in c.execute(select(log).order_by(log.c.id))]
    )
    assert rows == [(0, "r0", 0), (1, "r1", 2), (2, "r2", 2), (9, "single", 6)]

    def duplicate(conn: Connection) -> None:
        add.execute_many(conn, [{"id": 0, "name": "again", "n": 0}])

    with pytest.raises(integrity_errors()) as raised:
        await sql_store.run_sync(duplicate, write=True)
    assert isinstance(raised.value, sqlite3.IntegrityError | psycopg.IntegrityError)
