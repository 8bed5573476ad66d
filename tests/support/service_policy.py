"""What a test does when a service it needs is not there: the one rule every fixture follows.

Unreachable → the test fails, saying so; with the service's own opt-out (`BOT_TEST_SKIP_REDIS=1`,
`BOT_TEST_SKIP_POSTGRES=1`) it is skipped instead, except under `BOT_TEST_REQUIRE_SERVICES=1`
(CI), where nothing may be skipped.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def service_unavailable(message: str, skip_variable: str) -> NoReturn:
    if os.environ.get("BOT_TEST_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message}\n(BOT_TEST_REQUIRE_SERVICES=1: no skipping)", pytrace=False)
    if os.environ.get(skip_variable) == "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)
