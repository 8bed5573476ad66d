"""Which database failures mean "the database is not there", and the engine error they become.

A database that is down, restarting, unreachable over the network, or (SQLite) held locked by
another process past the busy timeout, reaches the store as a driver error: `psycopg`'s or
`sqlite3`'s, raw or wrapped by SQLAlchemy. The engine and its host must not need those types, and
must be able to tell this case apart from a wrong statement or a conflict: the transaction did
not commit and trying again once the database is back is right. So the executor that runs every
transaction (`storage.sql.executor`) turns them into `StoreUnavailableError`, here, in one place.

Everything else keeps its meaning: an `IntegrityError` is still a `StepConflictError` where a
commit maps it, a missing table or a syntax error is still the driver's error.
"""

from __future__ import annotations

import sqlite3
import sys
from types import ModuleType

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, DisconnectionError

from agent.seams import Redactor, StoreUnavailableError

_SQLITE_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_BUSY,  # another connection held the lock past the busy timeout
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)
"""Primary SQLite result codes that say the file cannot be used now, not that the SQL is wrong."""

_POSTGRES_UNAVAILABLE_CLASSES = ("08", "53", "58")
"""SQLSTATE classes: connection exception, insufficient resources (too many connections, disk
full), system error (I/O)."""
_POSTGRES_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03"})
"""The server shutting down (admin or crash) or not yet accepting connections."""


def loaded_psycopg() -> ModuleType | None:
    """psycopg, once a PostgreSQL engine has imported it; before that no error of its can
    exist, so there is nothing to tell apart. Not imported here: a process on SQLite would pay
    for it (about a tenth of an operator command's start-up) and never use it."""
    return sys.modules.get("psycopg")


def is_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database could not be reached or the connection was lost."""
    if isinstance(exc, DisconnectionError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        cause: BaseException | None = exc.orig
    else:
        cause = exc
    if isinstance(cause, sqlite3.Error):
        code = getattr(cause, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in _SQLITE_UNAVAILABLE
    psycopg = loaded_psycopg()
    if psycopg is not None and isinstance(cause, psycopg.Error):
        state = cause.sqlstate
        if state is None:
            # raised by the client: refused, reset, closed, timed out, name not resolved
            return isinstance(cause, psycopg.OperationalError)
        return state.startswith(_POSTGRES_UNAVAILABLE_CLASSES) or (
            state in _POSTGRES_UNAVAILABLE_STATES
        )
    return False


def database_label(url: URL) -> str:
    """The URL as an operator wrote it, its password hidden."""
    return url.render_as_string(hide_password=True)


def unavailable_error(
    label: str, exc: BaseException, *, password: str | None = None
) -> StoreUnavailableError:
    """One line an operator can act on: which database, and the driver's reason (its first
    line only, so no SQL, no parameters; the password scrubbed should the driver repeat it)."""
    return StoreUnavailableError(f"cannot reach the database {label}: {_reason(exc, password)}")


def _reason(exc: BaseException, password: str | None) -> str:
    cause = _driver_error(exc)
    lines = str(cause).strip().splitlines()
    reason = lines[0].strip() if lines else type(cause).__name__
    reason = reason.removeprefix("connection failed: ")
    return Redactor([password] if password else (), min_length=1)(reason)


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's own error behind `exc` (SQLAlchemy's wrapper, or whatever a local tool made
    of it, hides it under its SQL and parameters); `exc` itself if there is none."""
    psycopg = loaded_psycopg()
    drivers = (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, DBAPIError) and seen.orig is not None:
            return seen.orig
        if isinstance(seen, drivers):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc
