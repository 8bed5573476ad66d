"""PostgreSQL and Redis servers of a test's own, for tests that restart them mid-run.

The machine's PostgreSQL and Redis are shared by everyone working on it: a test must never
restart, stop or flush them. A test that needs "the database goes away and comes back" starts
its own servers here instead, on free ports, with their files in a temporary directory that is
removed afterwards:

- `PrivatePostgres`: `initdb` into a fresh directory, `pg_ctl start` on a free port with its unix
  socket in that directory, `fsync=off` (a restart of the server, not of the machine, loses no
  committed write: the writes are in the OS's cache; `synchronous_commit` stays on, since an
  immediate shutdown does lose what sat in the server's own WAL buffers). The server refuses to
  run as root, so as root it runs as the `postgres` user (`runuser`), which owns the directory.
- `PrivateRedis`: `redis-server` with no persistence (`--save "" --appendonly no`): a restart
  comes back empty, as a Redis with persistence off does in production.

Both are plain synchronous objects (their commands take seconds, and the tests that use them run
their own event loops); the fixtures at the bottom start them for one test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

POSTGRES_USER = "postgres"
"""The operating-system user the server runs as when the tests run as root."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _postgres_binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if candidates:
        return candidates[0]
    raise FileNotFoundError(f"no PostgreSQL `{name}` on PATH or in /usr/lib/postgresql/*/bin")


def services_missing() -> str | None:
    """Why private servers cannot be started here, or None if they can."""
    for name in ("initdb", "pg_ctl"):
        try:
            _postgres_binary(name)
        except FileNotFoundError as err:
            return str(err)
    if shutil.which("redis-server") is None:
        return "no `redis-server` on PATH"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(POSTGRES_USER)
        except KeyError:
            return f"running as root and there is no `{POSTGRES_USER}` user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and there is no `runuser` to run PostgreSQL as another user"
    return None


class PrivatePostgres:
    """One PostgreSQL server in a temporary directory; `url(name)` for a database on it."""

    def __init__(self, *, port: int | None = None, max_connections: int = 300) -> None:
        self.port = port or free_port()
        self.max_connections = max_connections
        self.root = Path(tempfile.mkdtemp(prefix="bot-private-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            entry = pwd.getpwnam(POSTGRES_USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._as_user = ["runuser", "-u", POSTGRES_USER, "--"]
        self.running = False

    def _run(self, *argv: str, timeout: float = 120) -> None:
        command = [*self._as_user, *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}\n{log}"
            )

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            self._run(
                _postgres_binary("initdb"),
                *("-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"),
                "--encoding=UTF8",
            )
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.root}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=off",
                "-c full_page_writes=off",
                f"-c max_connections={self.max_connections}",
            ]
        )
        self._pg_ctl("start", "-l", str(self.log), "-o", options)
        self.running = True
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        self._run(
            _postgres_binary("pg_ctl"), action, "-D", str(self.data), "-w", "-t", "120", *extra
        )

    def stop(self, mode: str = "fast") -> None:
        if self.running:
            self._pg_ctl("stop", "-m", mode)
            self.running = False

    def restart(self, mode: str = "immediate") -> None:
        """Stop (`immediate`: as if the server crashed; it recovers from its WAL on start) and
        start again on the same port; every client connection is cut."""
        self.stop(mode)
        self.start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def conninfo(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL the bot takes (`DATABASE_URL`)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.conninfo(), autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)


class PrivateRedis:
    """One `redis-server` without persistence on a free port; with `password`, it requires one
    (a test can then check the password never reaches a log)."""

    def __init__(self, *, port: int | None = None, password: str | None = None) -> None:
        self.port = port or free_port()
        self.password = password
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        hello = b"PING\r\n"
        if self.password:
            argv += ["--requirepass", self.password]
            hello = f"AUTH {self.password}\r\n".encode() + hello
        self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn,
            ):
                conn.sendall(hello)
                if b"+PONG" in _read_replies(conn, hello.count(b"\r\n")):
                    return self
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def kill(self) -> None:
        """SIGKILL: Redis dies as in a crash, every connection cut at once."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port: empty, every connection cut."""
        self.stop()
        self.start()

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_replies(conn: socket.socket, count: int) -> bytes:
    """The server's first `count` one-line replies (or what came before it closed)."""
    data = b""
    while data.count(b"\r\n") < count:
        chunk = conn.recv(256)
        if not chunk:
            break
        data += chunk
    return data


def _require_services() -> None:
    missing = services_missing()
    if missing is None:
        return
    message = f"cannot start private PostgreSQL / Redis servers: {missing}"
    if os.environ.get("BOT_TEST_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message}\n(BOT_TEST_REQUIRE_SERVICES=1: no skipping)", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of this test's own (the test may restart it)."""
    _require_services()
    with PrivatePostgres() as server:
        yield server


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A Redis server of this test's own, with a password (the test may restart or kill it)."""
    _require_services()
    with PrivateRedis(password=f"pw-{secrets.token_hex(8)}") as server:
        yield server
