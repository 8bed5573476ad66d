"""What only the SQL store promises: schema verification, migrations, SQLite's durability and
locking setup, and several OS processes sharing one database file."""

from __future__ import annotations

import asyncio
import contextvars
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from psycopg import sql
from sqlalchemy import Connection, create_engine, inspect, text
from sqlalchemy.engine import make_url

import storage
from agent import (
    AssistantMessage,
    FatalToolError,
    SchemaMismatchError,
    StoreUnavailableError,
    TextBlock,
    TurnInput,
    UserMessage,
)
from agent._messages import CompactionBlock
from agent.seams import StepCommit, StoreHandle
from examples.ops_agent.tables import metadata as ops_metadata
from storage import MemoryStore, SqlStore, current_revision, open_store, upgrade_database
from storage.delivery.schema import delivery_metadata
from storage.installations.schema import installation_metadata
from storage.migrate import MIGRATIONS_DIR, alembic_config, head_revision, script_revisions
from storage.sql.dialects import WRITE_OPTION, PostgresDialect, SqliteDialect, dialect_for
from storage.sql.schema import metadata
from tests.support import pg_databases

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def empty_postgres_url(postgres_database: str, scratch_databases: list[str]) -> str:
    """A second, never-migrated PostgreSQL database on the test server (dropped after the run,
    never by this test: see `tests.support.pg_databases`)."""
    base = make_url(postgres_database)
    name = pg_databases.new_name("empty")
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    scratch_databases.append(name)
    return base.set(database=name).render_as_string(hide_password=False)


def test_public_api_is_exactly_what_all_lists() -> None:
    # each name is imported on first use (`storage.__getattr__`): resolving it is holding it
    public = {name for name in storage.__all__ if hasattr(storage, name)}
    assert set(storage.__all__) == public
    assert sorted(storage.__all__) == storage.__all__


def test_the_head_revision_comes_from_the_migration_scripts() -> None:
    scripts = sorted((MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))
    assert head_revision() == scripts[-1].name.split("_")[0]


def test_the_scripts_are_read_as_alembic_reads_them() -> None:
    """Opening a store verifies the schema without importing Alembic (`script_revisions`): it
    must see the same revisions, the same order and the same head as Alembic does."""
    from alembic.script import ScriptDirectory

    directory = ScriptDirectory.from_config(alembic_config())
    assert script_revisions() == {
        script.revision: script.down_revision for script in directory.walk_revisions()
    }
    assert head_revision() == directory.get_current_head()


def test_opening_a_store_does_not_import_alembic() -> None:
    """Every web, worker and crash-test child opens a store; Alembic costs it ~0.1 s of CPU."""
    probe = (
        "import sys, storage.sql.store, storage.migrate\n"
        "storage.migrate.head_revision()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


SCHEMAS = {
    "store": metadata,
    "slack delivery": delivery_metadata,
    "ops example": ops_metadata,
    "slack installations": installation_metadata,
}
"""Every table the migrations create, by the code that defines it."""


@pytest.mark.parametrize("schema", list(SCHEMAS))
async def test_migrated_schema_matches_the_table_definitions(sql_url: str, schema: str) -> None:
    defined = SCHEMAS[schema]

    def only_these(name: str | None, type_: str, _parents: object) -> bool:
        return type_ != "table" or name in defined.tables

    store = await SqlStore.open(sql_url)
    try:
        diff = await store.run_sync(
            lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"include_name": only_these}), defined
            )
        )
    finally:
        await store.close()
    assert diff == []


async def test_every_migrated_table_has_a_definition(tmp_path: Path) -> None:
    """A table a migration makes that no schema above defines would escape the drift check.
    (A fresh database: the shared test database also holds tables tests make for themselves.)"""
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        tables = set(await store.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await store.close()
    defined = {name for schema in SCHEMAS.values() for name in schema.tables}
    assert tables - {"alembic_version"} == defined


async def test_open_refuses_an_unmigrated_sqlite_file_and_upgrade_fixes_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'not' / 'yet' / 'bot.db'}"
    with pytest.raises(SchemaMismatchError, match="bot db upgrade"):
        await SqlStore.open(url)
    assert await current_revision(url) is None

    await upgrade_database(url)
    await upgrade_database(url)  # a second run is a no-op
    assert await current_revision(url) == head_revision()
    store = await SqlStore.open(url)
    await store.close()


@pytest.mark.postgres
async def test_open_refuses_an_unmigrated_postgres_database(empty_postgres_url: str) -> None:
    with pytest.raises(SchemaMismatchError, match="bot db upgrade"):
        await SqlStore.open(empty_postgres_url)
    await upgrade_database(empty_postgres_url)
    assert await current_revision(empty_postgres_url) == head_revision()
    store = await SqlStore.open(empty_postgres_url)
    await store.close()


async def test_open_refuses_a_revision_it_does_not_know(sqlite_url: str) -> None:
    store = await SqlStore.open(sqlite_url)
    await store.run_sync(
        lambda c: c.execute(text("UPDATE alembic_version SET version_num = 'ffff'")), write=True
    )
    await store.close()
    with pytest.raises(SchemaMismatchError, match="does not know"):
        await SqlStore.open(sqlite_url)


async def test_open_refuses_a_schema_with_missing_tables(sqlite_url: str) -> None:
    store = await SqlStore.open(sqlite_url)
    await store.run_sync(lambda c: c.execute(text("DROP TABLE events")), write=True)
    await store.close()
    with pytest.raises(SchemaMismatchError, match="events"):
        await SqlStore.open(sqlite_url)


async def test_open_store_picks_the_backend(sqlite_url: str) -> None:
    assert isinstance(await open_store(None), MemoryStore)
    assert isinstance(await open_store("memory"), MemoryStore)
    store = await open_store(sqlite_url)
    assert isinstance(store, SqlStore)
    await store.close()


def test_dialect_for_maps_urls_and_refuses_unknown_drivers() -> None:
    for url in ("sqlite:///x.db", "sqlite+aiosqlite:///x.db", "sqlite+pysqlite:///x.db"):
        dialect = dialect_for(url)
        assert isinstance(dialect, SqliteDialect)
        assert dialect.url.drivername == "sqlite+pysqlite", "the store's SQLite is sync on a thread"
        assert dialect.url.database == "x.db"
    assert isinstance(dialect_for("postgresql://u@h/db"), PostgresDialect)
    assert dialect_for("postgresql://u@h/db").url.drivername == "postgresql+psycopg"
    with pytest.raises(ValueError, match="unsupported"):
        dialect_for("mysql+aiomysql://u@h/db")


_LATER_REVISION = """
from alembic import op
import sqlalchemy as sa

revision = "9999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("later_things", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade():
    op.drop_table("later_things")
"""


async def test_a_revision_added_later_is_applied_by_upgrade_and_required_by_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No constant names the head: a new script is all a later migration takes."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    await upgrade_database(url)
    shipped = head_revision()
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "9999_later.py").write_text(_LATER_REVISION.format(head=shipped))

    monkeypatch.setattr(storage.migrate, "MIGRATIONS_DIR", scripts)
    with pytest.raises(SchemaMismatchError, match=f"at revision {shipped}, this code needs 9999"):
        await SqlStore.open(url)
    await upgrade_database(url)
    assert await current_revision(url) == "9999"
    store = await SqlStore.open(url)
    await store.close()

    monkeypatch.undo()
    with pytest.raises(SchemaMismatchError, match="does not know"):
        await SqlStore.open(url)


def _migrate(url: str, revision: str, *, down: bool = False) -> None:
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(config, revision)
    finally:
        engine.dispose()


def _confirmation_columns(url: str) -> set[str]:
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.connect() as conn:
            return {c["name"] for c in inspect(conn).get_columns("confirmations")}
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bot.db'}"
    url: str = request.getfixturevalue("empty_postgres_url")
    return url


async def test_revision_0004_adds_confirmation_details_and_keeps_older_proposals(
    unmigrated_url: str,
) -> None:
    """A proposal made before the column existed reads back without details (a
    confirmation="required" one, as every proposal then was); the downgrade drops only it."""
    url = unmigrated_url
    await asyncio.to_thread(_migrate, url, "0003")
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "insert into confirmations (session_key, confirmation_id, turn_id, call_id, "
                    "tool, arguments, prompt, answerers, status, created_at) values ('s', 't:c', "
                    "'t', 'c', 'refund', :arguments, 'Allow refund?', null, 'pending', 1)"
                ),
                {"arguments": '{"order": "A-1"}'},
            )
    finally:
        engine.dispose()

    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        old = await store.get_confirmation("s", "t:c")
    finally:
        await store.close()
    assert old is not None
    assert (old.arguments, old.prompt, old.details) == ({"order": "A-1"}, "Allow refund?", None)
    assert "details" in await asyncio.to_thread(_confirmation_columns, url)

    await asyncio.to_thread(_migrate, url, "0003", down=True)
    assert "details" not in await asyncio.to_thread(_confirmation_columns, url)
    assert await current_revision(url) == "0003"


def _columns(url: str, table: str) -> set[str]:
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.connect() as conn:
            return {c["name"] for c in inspect(conn).get_columns(table)}
    finally:
        engine.dispose()


async def test_revision_0005_adds_timers_and_answer_columns_and_keeps_older_rows(
    unmigrated_url: str,
) -> None:
    """Rows from before it (a queued turn, a pending proposal) read back with the new columns
    empty: no speaker (so not among anyone's recent turns), nobody who stopped it, no reason,
    no expiry; the downgrade removes exactly what it added."""
    url = unmigrated_url
    await asyncio.to_thread(_migrate, url, "0004")
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "insert into turns (session_key, turn_id, kind, status, input, created_at) "
                    "values ('s', 't', 'turn', 'queued', :input, 5)"
                ),
                {"input": TurnInput(text="old").model_dump_json()},
            )
            conn.execute(
                text(
                    "insert into confirmations (session_key, confirmation_id, turn_id, call_id, "
                    "tool, arguments, prompt, status, created_at) values ('s', 't:c', 't', 'c', "
                    "'refund', '{}', 'Allow refund?', 'pending', 1)"
                )
            )
    finally:
        engine.dispose()

    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        turn = await store.get_turn("s", "t")
        [pending] = await store.pending_confirmations()
        assert await store.due_timers(1e12) == []
    finally:
        await store.close()
    assert turn is not None
    assert (turn.cancelled_by, turn.created_at) == (None, 5.0)
    assert (pending.confirmation_id, pending.reason, pending.expires_at) == ("t:c", None, None)

    await asyncio.to_thread(_migrate, url, "0004", down=True)
    assert {"cancelled_by", "speaker"} & await asyncio.to_thread(_columns, url, "turns") == set()
    added = {"reason", "expires_at"}
    assert added & await asyncio.to_thread(_columns, url, "confirmations") == set()
    assert await current_revision(url) == "0004"
    await upgrade_database(url)  # and up again
    assert await current_revision(url) == head_revision()


def _marked(url: str) -> dict[str, list[tuple[object, ...]]]:
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.connect() as conn:
            indexes = {i["name"] for i in inspect(conn).get_indexes("messages")}
            return {
                table: [tuple(row) for row in conn.execute(text(query))]
                for table, query in {
                    "messages": "select idx from messages where compaction order by idx",
                    "archived_messages": "select idx from archived_messages where compaction",
                }.items()
            } | {"indexes": [(name,) for name in sorted(indexes)]}
    finally:
        engine.dispose()


async def test_revision_0010_marks_the_compactions_stored_before_it(unmigrated_url: str) -> None:
    """A compacting session stored before the marker existed is loaded from its newest
    compaction after the upgrade (a block without content, or the word in a reply, marks
    nothing; the archive is marked too); the downgrade removes the marker and its index."""
    url = unmigrated_url
    await asyncio.to_thread(_migrate, url, "0009")

    def said(*blocks: TextBlock | CompactionBlock) -> str:
        return AssistantMessage(
            turn_id="t", content=blocks, stop_reason="end_turn"
        ).model_dump_json()

    asked = UserMessage(turn_id="t", text="ok?").model_dump_json()
    bodies = [
        asked,
        said(CompactionBlock(content="old summary"), TextBlock(text="a")),
        asked,
        said(CompactionBlock(content="newest summary"), TextBlock(text="b")),
        asked,
        said(CompactionBlock(content=None), TextBlock(text="c")),
        asked,
        said(TextBlock(text='the "compaction" block is a summary')),
    ]
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            for idx, body in enumerate(bodies):
                role = "user" if idx % 2 == 0 else "assistant"
                values = {"idx": idx, "role": role, "body": body}
                conn.execute(
                    text(
                        "insert into messages (session_key, idx, turn_id, role, body) "
                        "values ('s', :idx, 't', :role, :body)"
                    ),
                    values,
                )
                conn.execute(
                    text(
                        "insert into archived_messages (session_key, generation, idx, turn_id, "
                        "role, body) values ('s', 0, :idx, 't', :role, :body)"
                    ),
                    values,
                )
    finally:
        engine.dispose()

    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        tail = await store.load_transcript_tail("s", 1, since_compaction=True)
    finally:
        await store.close()
    assert tail.base == 2
    assert await asyncio.to_thread(_marked, url) == {
        "messages": [(1,), (3,)],
        "archived_messages": [(1,), (3,)],
        "indexes": [("ix_messages_compaction",)],
    }

    await asyncio.to_thread(_migrate, url, "0009", down=True)
    assert "compaction" not in await asyncio.to_thread(_columns, url, "messages")
    assert "compaction" not in await asyncio.to_thread(_columns, url, "archived_messages")
    await upgrade_database(url)  # and up again
    assert await current_revision(url) == head_revision()


TURN_CONTEXT: contextvars.ContextVar[str] = contextvars.ContextVar("turn", default="none")


async def test_a_local_tool_runs_where_the_transaction_runs(sql_url: str) -> None:
    """On a worker thread of the store's, never the event loop's: SQLite's one thread (a step is
    one hop), or one of PostgreSQL's, a thread per pooled connection."""
    store = await SqlStore.open(sql_url)
    try:
        await store.enqueue_turn("s", "t1", TurnInput(text="hi"))
        lease = await store.acquire_lease("s", "w1", 30, 0)
        assert lease is not None
        seen: list[str] = []

        def run(handle: StoreHandle) -> str:
            seen.append(threading.current_thread().name)
            seen.append(TURN_CONTEXT.get())
            return str(handle.unwrap().execute(text("SELECT 'in the step'")).scalar_one())

        TURN_CONTEXT.set("turn t1")

        result, _ = await store.commit_local(
            lease, run, lambda _r: StepCommit(turn_id="t1", step_id="tool:1:a"), 30, 0
        )
        read_on = await store.run_sync(lambda _c: threading.current_thread().name)
    finally:
        await store.close()
    assert result == "in the step"
    assert seen[1] == "turn t1", "the caller's context variables reach the tool"
    assert seen[0] != threading.current_thread().name
    if store.dialect == "sqlite":
        assert seen[0].startswith("sqlite-store")
        assert read_on == seen[0]
    else:
        assert seen[0].startswith("postgresql-store")
        assert read_on.startswith("postgresql-store")


async def test_sqlite_connections_are_durable_and_wait_for_locks(sqlite_url: str) -> None:
    store = await SqlStore.open(sqlite_url)
    try:
        pragmas = await store.run_sync(
            lambda c: [
                c.exec_driver_sql(f"PRAGMA {name}").scalar_one()
                for name in ("journal_mode", "synchronous", "busy_timeout")
            ]
        )
    finally:
        await store.close()
    assert pragmas == ["wal", 2, 30_000]  # synchronous 2 = FULL


async def test_run_sync_reads_are_rolled_back_and_writes_committed(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)

    def has_table(conn: Connection) -> bool:
        return bool(conn.dialect.has_table(conn, "scratch"))

    try:
        await store.run_sync(lambda c: c.execute(text("CREATE TABLE scratch (x INTEGER)")))
        assert not await store.run_sync(has_table)
        await store.run_sync(
            lambda c: c.execute(text("CREATE TABLE scratch (x INTEGER)")), write=True
        )
        assert await store.run_sync(has_table)
        await store.run_sync(lambda c: c.execute(text("DROP TABLE scratch")), write=True)
    finally:
        await store.close()


def _other_writer_is_locked_out(path: str) -> bool:
    """Whether a second connection (no busy wait) cannot take SQLite's write lock right now."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    except sqlite3.OperationalError as err:
        if "locked" not in str(err):
            raise
        return True
    finally:
        other.close()
    return False


async def test_sqlite_write_transactions_take_the_write_lock_up_front(sqlite_url: str) -> None:
    """BEGIN IMMEDIATE for writes (no lock upgrade halfway, so no deadlock between processes),
    plain BEGIN for reads (they never block a writer)."""
    path = str(make_url(sqlite_url).database)
    store = await SqlStore.open(sqlite_url)
    try:
        assert await store.run_sync(lambda _c: _other_writer_is_locked_out(path), write=True)
        assert not await store.run_sync(lambda c: _other_writer_is_locked_out(path))
        assert not _other_writer_is_locked_out(path)
    finally:
        await store.close()


async def test_an_async_engine_from_the_dialect_has_the_same_setup(sqlite_url: str) -> None:
    """For components that keep their own engine (Slack delivery state) next to the store."""
    engine = dialect_for(sqlite_url).create_engine()
    path = str(make_url(sqlite_url).database)
    try:
        async with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
            pragmas = [
                (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar_one()
                for name in ("journal_mode", "synchronous", "busy_timeout")
            ]
            locked = _other_writer_is_locked_out(path)
    finally:
        await engine.dispose()
    assert pragmas == ["wal", 2, 30_000]
    assert locked


async def test_local_tool_may_not_end_the_step_transaction(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)
    try:
        await store.enqueue_turn("s", "t1", TurnInput(text="hi"))
        lease = await store.acquire_lease("s", "w1", 30, 0)
        assert lease is not None

        def run(handle: StoreHandle) -> None:
            conn = handle.unwrap()
            assert isinstance(conn, Connection)
            conn.commit()

        with pytest.raises(FatalToolError, match="committed or rolled back"):
            await store.commit_local(
                lease, run, lambda _r: StepCommit(turn_id="t1", step_id="tool:1:a"), 30, 0
            )
        assert await store.load_steps("s", "t1") == {}
    finally:
        await store.close()


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from agent import TurnInput, UserMessage
    from agent.seams import StepCommit
    from storage import SqlStore

    async def main(url, me):
        store = await SqlStore.open(url)
        created = 0
        for i in range(20):
            _, new = await store.enqueue_turn("shared", f"t{i}", TurnInput(text="hi"))
            created += new
            own = f"own-{me}"
            await store.enqueue_turn(own, f"t{i}", TurnInput(text="hi"))
            lease = await store.acquire_lease(own, me, 30, float(i))
            msg = UserMessage(turn_id=f"t{i}", text="hi")
            await store.commit(lease, StepCommit(turn_id=f"t{i}", messages=[(i, msg)]), 30, i)
            await store.release_lease(lease)
        await store.close()
        print(created)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_processes_sharing_one_sqlite_file_serialize_their_writes(sqlite_url: str) -> None:
    """BEGIN IMMEDIATE plus busy_timeout: concurrent writers wait, none fails on a lock."""
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            sqlite_url,
            f"w{n}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(4)
    ]
    outputs = [await child.communicate() for child in children]
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()
    assert sum(int(out) for out, _ in outputs) == 20

    store = await SqlStore.open(sqlite_url)
    try:
        assert len(await store.list_turns("shared")) == 20
        for n in range(4):
            transcript = await store.load_transcript(f"own-w{n}")
            assert transcript == [UserMessage(turn_id=f"t{i}", text="hi") for i in range(20)]
    finally:
        await store.close()


def _kill_client_backends(postgres_url: str) -> int:
    admin = make_url(postgres_url).set(drivername="postgresql")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as pg:
        killed = pg.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name = '' AND backend_type = 'client backend'"
        ).fetchone()
    assert killed is not None
    return int(killed[0])


@pytest.mark.postgres
async def test_postgres_connection_killed_while_in_use_fails_one_call_and_is_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that dies between two step commits (no idle ping: it was busy a moment
    ago) fails the next commit as `StoreUnavailableError`, whatever ran the statement (the step
    commit goes straight to psycopg's cursor, past SQLAlchemy), nothing of it is written, and
    the call after it runs on a new connection."""
    from storage.sql import dialects as sql_dialects

    monkeypatch.setattr(sql_dialects, "PING_AFTER_IDLE", 3600.0)
    store = await SqlStore.open(postgres_url)
    try:
        await store.enqueue_turn("s", "t1", TurnInput(text="hi"))
        lease = await store.acquire_lease("s", "w1", 30.0, 1_000.0)
        assert lease is not None
        assert _kill_client_backends(postgres_url) >= 1
        opening = StepCommit(
            turn_id="t1",
            step_id="input:t1:open",
            messages=[(0, UserMessage(turn_id="t1", text="hi"))],
        )
        with pytest.raises(StoreUnavailableError):
            await store.commit(lease, opening, 30.0, 1_001.0)
        assert await store.load_transcript("s") == []
        await store.commit(lease, opening, 30.0, 1_002.0)
        assert await store.load_transcript("s") == [UserMessage(turn_id="t1", text="hi")]
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgres_connections_killed_while_idle_fail_no_call(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server restart or failover kills the pooled connections; the next calls must not fail.
    Connections idle past the threshold are pinged at checkout and replaced; busy ones are not
    pinged (that round trip was a seventh of an ack's)."""
    from storage.sql import dialects as sql_dialects

    monkeypatch.setattr(sql_dialects, "PING_AFTER_IDLE", 0.2)
    store = await SqlStore.open(postgres_url)
    try:
        for n in range(3):  # several pooled connections, all idle afterwards
            await asyncio.gather(
                *(store.enqueue_turn(f"s{n}-{i}", "t", TurnInput(text="hi")) for i in range(3))
            )
        mine = await store.run_sync(
            lambda c: c.execute(text("SELECT pg_backend_pid()")).scalar_one()
        )
        await asyncio.sleep(0.3)
        assert _kill_client_backends(postgres_url) >= 1
        # Every call after the kill succeeds, on fresh connections.
        results = await asyncio.gather(
            *(store.enqueue_turn(f"after-{i}", "t", TurnInput(text="hi")) for i in range(4))
        )
        assert all(created for _, created in results)
        now = await store.run_sync(
            lambda c: c.execute(text("SELECT pg_backend_pid()")).scalar_one()
        )
        assert now != mine
    finally:
        await store.close()
