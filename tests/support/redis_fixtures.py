"""The shared Redis for tests that need one, and a key prefix of each test's own.

Redis comes from `BOT_TEST_REDIS_URL` (default `redis://127.0.0.1:6379/0`). Unreachable → the
test fails, saying so; with `BOT_TEST_SKIP_REDIS=1` it is skipped instead, except under
`BOT_TEST_REQUIRE_SERVICES=1` (CI). Nothing here flushes or restarts the server: other test runs
share it, so every test names its streams and channels under `redis_prefix`.
"""

from __future__ import annotations

import os
import secrets

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from storage.redis.dispatch import redact
from tests.support.service_policy import service_unavailable

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def _unavailable(message: str) -> None:
    message += (
        "\nStart Redis, point BOT_TEST_REDIS_URL at a server, or set BOT_TEST_SKIP_REDIS=1 to skip "
        "the Redis tests."
    )
    service_unavailable(message, "BOT_TEST_SKIP_REDIS")


async def _ping(url: str) -> str | None:
    """None if the server answers, else why not."""
    client = Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
        return None
    except (RedisError, OSError) as err:
        return f"{type(err).__name__}: {err}"
    finally:
        await client.aclose()


@pytest.fixture
async def redis_url() -> str:
    url = os.environ.get("BOT_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    reason = await _ping(url)
    if reason is not None:
        _unavailable(f"Redis is not reachable at {redact(url)}: {reason}")
    return url


@pytest.fixture
def redis_prefix() -> str:
    """This test's own namespace on the shared server (streams, groups, channels)."""
    return f"bot-test:{secrets.token_hex(6)}"
