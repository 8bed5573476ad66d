"""The sandbox page's browser tests: a real `bot sandbox` process, a real headless Chromium.

The browser is Debian's `/usr/bin/chromium` (`BOT_TEST_CHROMIUM` to point elsewhere), driven by
Playwright from PyPI through `executable_path`; Playwright's own browser download is never used
(it needs the network). A missing browser or Playwright fails the tests, saying so; set
`BOT_TEST_SKIP_BROWSER=1` to skip them instead, except under `BOT_TEST_REQUIRE_SERVICES=1` (CI).

Screenshots, one per step, go to `artifacts/sandbox/` at the repository's root
(`BOT_SANDBOX_ARTIFACTS` to redirect); the run's summary names the directory.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sandbox_artifacts import ROOT, artifacts_dir
from tests.support.service_policy import service_unavailable

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # as root on CI machines
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_SECONDS = 90.0


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """The step screenshots' directory, emptied of an earlier run's."""
    where = artifacts_dir()
    where.mkdir(parents=True, exist_ok=True)
    for old in where.glob("*.png"):
        old.unlink()
    return where


@pytest.fixture(scope="module")
def chromium() -> str:
    path = os.environ.get("BOT_TEST_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).is_file():
        service_unavailable(
            f"Chromium is not installed at {path} (Debian: apt-get install chromium "
            "chromium-driver; .ci/run does it). Set BOT_TEST_SKIP_BROWSER=1 to skip the "
            "browser tests.",
            "BOT_TEST_SKIP_BROWSER",
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        service_unavailable(
            "Playwright is not installed (make install, the dev extra). Set "
            "BOT_TEST_SKIP_BROWSER=1 to skip the browser tests.",
            "BOT_TEST_SKIP_BROWSER",
        )
    return path


@pytest.fixture(scope="module")
def sandbox_url() -> Iterator[str]:
    """`bot sandbox --port 0` as a real process (its own process group, ended at the end): the
    URL it printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "sandbox", "--port", "0"],
        cwd=ROOT,
        # The page's story is the scripted model's: a key in the environment would run Claude.
        env={**os.environ, "ANTHROPIC_API_KEY": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        url = _printed_url(lines, output)
        yield url
    finally:
        _end(process)
    assert process.returncode == 0, "bot sandbox did not stop cleanly:\n" + "".join(output)


def _printed_url(lines: queue.Queue[str | None], output: list[str]) -> str:
    while True:
        try:
            line = lines.get(timeout=STARTUP_SECONDS)
        except queue.Empty:
            pytest.fail("bot sandbox printed no URL:\n" + "".join(output))
        if line is None:
            pytest.fail("bot sandbox exited before serving:\n" + "".join(output))
        for word in line.split():
            if word.startswith("http://127.0.0.1:"):
                return word.rstrip("/")


def _end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture
def page(chromium: str) -> Iterator[Any]:
    """A page of a fresh browser profile; any request leaving 127.0.0.1 is refused and fails
    the test (the sandbox is offline)."""
    from playwright.sync_api import Route, sync_playwright

    outside: list[str] = []

    def only_local(route: Route) -> None:
        url = route.request.url
        if url.startswith(("http://127.0.0.1:", "data:", "about:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    with tempfile.TemporaryDirectory(prefix="sandbox-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            context.route("**/*", only_local)
            yield context.new_page()
        finally:
            context.close()
    assert outside == [], f"the page reached outside 127.0.0.1: {outside}"
