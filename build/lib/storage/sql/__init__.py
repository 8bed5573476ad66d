"""The SQL store: SQLite (aiosqlite) and PostgreSQL (psycopg 3) behind one `SqlStore`.

`store` is the seam's implementation; the statements it runs live by concern (`turns`, `commit`,
`ledgers`, `reset`), `schema` holds the tables, `dialects` what differs between the two databases,
`executor` the store threads, and `driver` / `commit_postgres` the hot path's precompiled
statements.
"""
