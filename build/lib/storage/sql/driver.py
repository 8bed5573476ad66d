"""Statements of the step commit run straight on the driver's cursor, compiled by SQLAlchemy once.

A step commit is five or so statements, and SQLAlchemy's execution of a cached Core statement
(cache key, execution context, result set-up, events) costs several times what the driver's
own call does: under many sessions at once a worker's steps per second are bound by its CPU,
and that was a large share of it (bench/README.md, "Concurrency"). So the hot statements are
written once as Core (so the SQL still comes from the schema and the dialect) and compiled once
per dialect and parameter set into the driver's own SQL; each execution then costs one cursor
call.

What this gives up is only what these statements never use: Python-side column defaults and type
processors (the tables' columns are text and numbers, defaults are server-side), and
SQLAlchemy's wrapping of driver errors. The callers map the driver's own integrity errors
(`integrity_errors()`), and the executor maps a lost connection from either form (see
`storage.sql.errors.is_unavailable`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from storage.sql.errors import loaded_psycopg


def integrity_errors() -> tuple[type[Exception], ...]:
    """A duplicate key, as SQLAlchemy or either driver raises it: `except integrity_errors():`,
    evaluated only once something is raised (psycopg's only once it is imported)."""
    psycopg = loaded_psycopg()
    if psycopg is None:
        return (IntegrityError, sqlite3.IntegrityError)
    return (IntegrityError, sqlite3.IntegrityError, psycopg.IntegrityError)


_PYFORMAT = re.compile(r"%\((\w+)\)s")

_Compiled = tuple[str, tuple[str, ...] | None, dict[str, Any]]
"""The driver's SQL; the parameter names in position order (None: the driver takes names); the
values of the statement's own literals (`event_seq + 1` binds the 1)."""


class DriverStatement:
    """A Core statement compiled once per dialect and parameter names, run on the raw cursor.

    Parameters are given by name, as SQLAlchemy takes them; for a positional driver (SQLite's
    `?`) they are put in the compiled order here."""

    __slots__ = ("_compiled", "_statement")

    def __init__(self, statement: ClauseElement) -> None:
        self._statement = statement
        self._compiled: dict[tuple[str, tuple[str, ...]], _Compiled] = {}

    def first(self, conn: Connection, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Run once; the first row it returns, if any."""
        cursor = self._run(conn, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else tuple(row)

    def count(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run once; the number of rows it changed."""
        cursor = self._run(conn, params)
        try:
            if cursor.description is not None:
                cursor.fetchall()  # SQLite counts a RETURNING statement's rows as they are read
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def _run(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        sql, order, literals = self._compile(conn, params)
        if literals:
            params = {**literals, **params}
        cursor = conn.connection.cursor()
        cursor.execute(sql, params if order is None else [params[name] for name in order])
        return cursor

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """One `executemany` for rows that all have the first row's keys (psycopg pipelines
        it; SQLite reuses one prepared statement)."""
        if len(rows) < 2:
            if rows:  # one row, the usual case: a pipeline costs psycopg more than it saves
                self.count(conn, rows[0])
            return
        sql, order, literals = self._compile(conn, rows[0])
        if literals:
            rows = [{**literals, **row} for row in rows]
        values = rows if order is None else [[row[name] for name in order] for row in rows]
        cursor = conn.connection.cursor()
        try:
            cursor.executemany(sql, values)
        finally:
            cursor.close()

    def _compile(self, conn: Connection, params: Mapping[str, Any]) -> _Compiled:
        dialect = conn.dialect
        key = (dialect.name, tuple(params))
        compiled = self._compiled.get(key)
        if compiled is None:
            made = cast(
                SQLCompiler, self._statement.compile(dialect=dialect, column_keys=list(params))
            )
            sql = made.string
            if dialect.positional:
                order: tuple[str, ...] | None = tuple(made.positiontup or ())
            elif dialect.paramstyle == "pyformat":
                # psycopg takes `%s` with a list for less work than `%(name)s` with a dict.
                order = tuple(_PYFORMAT.findall(sql))
                sql = _PYFORMAT.sub("%s", sql)
            else:
                order = None
            literals = {
                name: bind.effective_value
                for name, bind in made.binds.items()
                if name not in params and not bind.required
            }
            compiled = self._compiled[key] = (sql, order, literals)
        return compiled
