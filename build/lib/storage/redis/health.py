"""Redis outages as the Redis components (`RedisDispatcher`, `RedisEventRelay`) report them.

Redis is never the record, so its outage is expected, not a bug: each component logs one warning
when an outage starts (again every `REWARN` seconds while it lasts), without a stack and without
the password, the retries in between at debug level only, and "reachable again" when it ends.
"""

from __future__ import annotations

import logging
import re
import time
from urllib.parse import unquote, urlsplit

from redis.exceptions import RedisError

UNREACHABLE: tuple[type[Exception], ...] = (RedisError, OSError)
"""What "Redis is down or misbehaving" looks like; anything else is a bug and keeps its stack."""

REWARN = 300.0
"""Seconds between repeated warnings while Redis stays down (a lasting outage is not one line)."""


def redact(url: str) -> str:
    """The URL fit for a log line: the password (in the authority or the query) replaced."""
    netloc = urlsplit(url).netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.partition(":")[0]
        url = url.replace(netloc, f"{user}:***@{host}", 1)
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)


class RedisHealth:
    """Whether one component last found Redis reachable, and the log lines that go with it.

    `fallback` ends the warning: what the component's users get meanwhile."""

    def __init__(self, url: str, log: logging.Logger, fallback: str) -> None:
        self.where = redact(url)
        password = urlsplit(url).password
        self._secrets = {s for s in (password, unquote(password or "")) if s}
        self._log = log
        self._fallback = fallback
        self.healthy = True
        self._warned_at = 0.0

    def lost(self, what: str, err: Exception) -> None:
        text = str(err)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        now = time.monotonic()
        loud = self.healthy or now - self._warned_at >= REWARN
        self.healthy, self._warned_at = False, now if loud else self._warned_at
        self._log.log(
            logging.WARNING if loud else logging.DEBUG,
            "Redis at %s unavailable for %s (%s: %s); %s",
            *(self.where, what, type(err).__name__, text, self._fallback),
        )

    def back(self) -> None:
        if not self.healthy:
            self.healthy = True
            self._log.info("Redis at %s reachable again", self.where)
