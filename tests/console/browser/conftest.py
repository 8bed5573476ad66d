"""The operator console's browser tests: a real `bot serve` process on a seeded SQLite database, a
real headless Chromium (Debian's, as the sandbox's tests run it: `tests/sandbox/conftest.py`).

The server is `bot serve` as an operator runs it, a web-only process (`RUN_TURNS=false`: the
seeded queued turn stays stuck, as `tests/console/seed.py` asks), with `CONSOLE_TOKENS` set to
the seed's three operators. Its Slack and Anthropic settings point at a closed port on
127.0.0.1: a web-only process with no Slack traffic calls neither, and if it ever did the call
would fail here instead of leaving the machine. The database is made once per module (per
xdist worker) by `tests.console.seed`, with real turns through the engine.

Every page runs in a fresh browser context whose requests are checked: anything but
`http://127.0.0.1:<the server's port>` is refused and fails the test. Screenshots go to
`artifacts/console/` (`BOT_CONSOLE_ARTIFACTS` to redirect), one per view, named by test and
step; `docs/console.png` is a copy of `timeline.png` (the viewport, 1280 by 800).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from bot.core.settings import CREDENTIALS
from storage.migrate import upgrade_database
from tests.console.seed import CONSOLE_TOKENS, Seeded, seed
from tests.sandbox.conftest import CHROMIUM_FLAGS, chromium  # noqa: F401  (a fixture)
from tests.support.sandbox_artifacts import ROOT

T = TypeVar("T")
STARTUP_SECONDS = 90.0
WAIT_MS = 45_000
"""Generous: the machine may be busy; every wait is on a condition, never a fixed time."""
CLOSED = "http://127.0.0.1:9"
"""The discard port: nothing listens, so a call there fails at once, locally."""


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """A coroutine run to its end on a thread of its own (Playwright's sync API owns this one)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def artifacts() -> Path:
    return Path(os.environ.get("BOT_CONSOLE_ARTIFACTS") or ROOT / "artifacts" / "console")


@dataclass
class Served:
    base: str
    db_url: str
    seeded: Seeded
    log: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    where = tmp_path_factory.mktemp("console")
    db_url = f"sqlite+aiosqlite:///{where / 'bot.db'}"

    async def made() -> Seeded:
        await upgrade_database(db_url)
        return await seed(db_url)

    seeded = run_async(made())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if k not in (*CREDENTIALS, "REDIS_URL")}
    env.pop("BOT_OFFLINE", None)
    env.update(
        DATABASE_URL=db_url,
        HOST="127.0.0.1",
        PORT=str(port),
        RUN_TURNS="false",
        CONSOLE_TOKENS=CONSOLE_TOKENS,
        SLACK_BOT_TOKEN="xoxb-0000-console-browser-test",
        SLACK_SIGNING_SECRET="console-browser-test-signing-secret",
        SLACK_API_URL=f"{CLOSED}/api/",
        ANTHROPIC_API_KEY="sk-ant-console-browser-test-0000",
        ANTHROPIC_BASE_URL=CLOSED,
        LOG_FORMAT="text",
    )
    log = where / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, base, log)
        yield Served(base=base, db_url=db_url, seeded=seeded, log=log)
    finally:
        _end(process)


def _wait_healthy(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"bot serve exited:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"bot serve did not answer within {STARTUP_SECONDS:.0f} s:\n{log.read_text()}")


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@dataclass
class Console:
    """Browser pages on the console, each in a fresh context (its own cookies); every request
    that is not to the server is refused and remembered."""

    base: str
    browser: Any
    shots: Path
    outside: list[str] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)

    def page(self) -> Any:
        from playwright.sync_api import Route

        def only_local(route: Route) -> None:
            url = route.request.url
            if url.startswith((self.base + "/", "data:", "about:")):
                route.continue_()
            else:
                self.outside.append(url)
                route.abort()

        context = self.browser.new_context(viewport={"width": 1280, "height": 800})
        context.route("**/*", only_local)
        self.contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        return page

    def login(self, token: str) -> Any:
        """A new page, signed in with `token` through the login form; on the sessions view."""
        from playwright.sync_api import expect

        page = self.page()
        page.goto(self.base + "/console")
        page.fill("#token", token)
        page.press("#token", "Enter")  # the keyboard signs in as the button does
        expect(page.locator("#view h1")).to_have_text("Sessions")
        return page

    def shot(self, page: Any, name: str, *, full: bool = True) -> Path:
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=full)
        return path


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:  # noqa: F811  (the imported fixture)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def console(browser: Any, served: Served) -> Iterator[Console]:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    shots = artifacts()
    shots.mkdir(parents=True, exist_ok=True)
    running = Console(base=served.base, browser=browser, shots=shots)
    try:
        yield running
    finally:
        for context in running.contexts:
            context.close()
    assert running.outside == [], f"the page reached outside 127.0.0.1: {running.outside}"
