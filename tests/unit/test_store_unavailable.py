"""Which database failures are "unavailable", and the one line they become."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import psycopg.errors
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, OperationalError

from agent import StoreError, StoreUnavailableError
from storage.sql.errors import is_unavailable, unavailable_error
from storage.sql.executor import ThreadExecutor


def _sqlite_error(code: int, message: str) -> sqlite3.OperationalError:
    err = sqlite3.OperationalError(message)
    err.sqlite_errorcode = code
    return err


def _wrapped(orig: Exception, *, invalidated: bool = False) -> DBAPIError:
    return DBAPIError.instance(
        "UPDATE sessions SET lease_owner = %(owner)s",
        {"owner": "secret-parameter"},
        orig,
        psycopg.Error,
        connection_invalidated=invalidated,
    )


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection to server at 127.0.0.1, port 1 failed: refused"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.TooManyConnections("sorry, too many clients already"),
        _wrapped(psycopg.OperationalError("consuming input failed: server closed")),
        _wrapped(psycopg.errors.SyntaxError("syntax error"), invalidated=True),
        DisconnectionError("the pooled connection failed its ping"),
        _sqlite_error(sqlite3.SQLITE_BUSY, "database is locked"),
        _sqlite_error(sqlite3.SQLITE_CANTOPEN, "unable to open database file"),
        _sqlite_error(sqlite3.SQLITE_IOERR_WRITE, "disk I/O error"),
        _sqlite_error(sqlite3.SQLITE_FULL, "database or disk is full"),
    ],
    ids=lambda e: type(e).__name__ + ":" + str(e)[:20],
)
def test_an_unreachable_database_is_unavailable(error: Exception) -> None:
    assert is_unavailable(error)


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.SyntaxError("syntax error at or near"),
        psycopg.errors.UniqueViolation("duplicate key value"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        _wrapped(psycopg.errors.UndefinedTable("relation does not exist")),
        IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed")),
        _sqlite_error(sqlite3.SQLITE_ERROR, "no such table: orders"),
        ValueError("not a database error"),
    ],
    ids=lambda e: type(e).__name__ + ":" + str(e)[:20],
)
def test_other_database_errors_keep_their_meaning(error: Exception) -> None:
    assert not is_unavailable(error)


def test_the_message_is_one_line_without_sql_parameters_or_password() -> None:
    orig = psycopg.OperationalError(
        "connection failed: connection to server failed: password hunter2-pw rejected\n"
        "DETAIL: more lines"
    )
    error = unavailable_error(
        "postgresql+psycopg://bot:***@db/prod", _wrapped(orig), password="hunter2-pw"
    )
    assert isinstance(error, StoreUnavailableError)
    assert isinstance(error, StoreError)
    assert str(error) == (
        "cannot reach the database postgresql+psycopg://bot:***@db/prod: "
        "connection to server failed: password [redacted] rejected"
    )


async def test_the_executor_raises_store_unavailable_for_a_file_it_cannot_open(
    tmp_path: Path,
) -> None:
    """A directory where the database file should be: SQLite cannot open it."""
    (tmp_path / "bot.db").mkdir()
    executor = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 'bot.db'}"))
    try:
        with pytest.raises(StoreUnavailableError) as raised:
            await executor.read(lambda c: c.execute(text("SELECT 1")).scalar())
    finally:
        await executor.close()
    assert str(raised.value) == (
        f"cannot reach the database sqlite:///{tmp_path / 'bot.db'}: unable to open database file"
    )
    assert isinstance(raised.value.__cause__, OperationalError)


async def test_other_errors_pass_through_the_executor_unchanged(tmp_path: Path) -> None:
    executor = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 'x.db'}"))
    try:
        with pytest.raises(OperationalError, match="no such table"):
            await executor.read(lambda c: c.execute(text("SELECT * FROM missing")).all())
    finally:
        await executor.close()


def test_the_reason_is_the_driver_s_even_under_a_tool_s_own_error() -> None:
    """A local tool may wrap the lost connection's error in its own: the line names the
    driver's reason all the same, not the SQL the wrapper's text begins with."""
    lost = _wrapped(psycopg.OperationalError("server closed the connection"), invalidated=True)
    try:
        try:
            raise lost
        except DBAPIError as err:
            raise RuntimeError(f"order failed: {err}") from err
    except RuntimeError as wrapped:
        error = unavailable_error("postgresql://db/prod", wrapped)
    assert str(error) == (
        "cannot reach the database postgresql://db/prod: server closed the connection"
    )
