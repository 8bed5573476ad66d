"""What Slack is answered while the database is away.

A listener that cannot queue its work (the database is down, restarting, unreachable) fails with
`StoreUnavailableError`, and nothing of the event was applied. Bolt's default answer is a 500 and
a traceback in the log, per request: in a 10 s PostgreSQL outage, a hundred or more tracebacks
burying the one fact an operator needs. So the app's Bolt error handler answers such a failure
503 with `Retry-After` (Slack retries a request it got no 2xx for, and the retry is the same
turn; over Socket Mode the envelope is left unacknowledged, which Slack redelivers), and reports
it to the runtime's `OutageLog`, which says once that the database is unavailable and once that
it is back. Any other failure is logged as Bolt logs it, and stays a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from slack_bolt.response import BoltResponse

from agent import Runtime, StoreUnavailableError

RETRY_AFTER_SECONDS = 2
BODY = {"error": "the database is unavailable; retry"}

ErrorHandler = Callable[..., Awaitable[BoltResponse | None]]


def outage_of(error: BaseException) -> StoreUnavailableError | None:
    """The `StoreUnavailableError` behind `error` (itself, or what it was raised from)."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, StoreUnavailableError):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


def error_handler(runtime: Runtime) -> ErrorHandler:
    """Bolt's error handler (`AsyncApp.error`), for listeners and middleware alike; outages
    go to `runtime.outage`, which the runtime's own loops report to as well."""

    async def handle(
        error: Exception, logger: logging.Logger, response: BoltResponse | None
    ) -> BoltResponse | None:
        unavailable = outage_of(error)
        if unavailable is None:
            logger.exception(f"Failed to handle a request (error: {error})")
            return None
        runtime.outage.failed(unavailable, writing=False)
        if response is None:  # acknowledged already (a lazy listener): nothing to answer
            return None
        return BoltResponse(
            status=503,
            body=json.dumps(BODY),
            headers={
                "content-type": "application/json",
                "retry-after": str(RETRY_AFTER_SECONDS),
            },
        )

    return handle
