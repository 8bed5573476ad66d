"""Counting the Slack Web API's failures as slack-sdk sees them: errors by method and code, 429s.

slack-sdk's client has no hooks, but it asks each of its retry handlers about every response
and every failed request, before the SDK raises or the handler after it retries. So the counter
is a retry handler that never retries (`can_retry_async` is always False) placed first in the
client's list: it sees every answer, including the 429s the SDK's own rate-limit handler then
absorbs (those never reach `bot.slack.calls`), and leaves the client's behaviour as it was.

It is never copied (`__deepcopy__`): Bolt deep-copies the client with each request it hands
a lazy listener, and every copy must count into the same metrics.

It must never raise: an exception in a retry handler would fail the Slack call it looks at. The
method is read from the request URL's last path segment (`.../api/chat.postMessage`); the error
from the body's `error` field; a connection failure counts as its exception's class name.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol
from urllib.parse import urlsplit

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

log = logging.getLogger(__name__)


class SlackErrorSink(Protocol):
    """Where the counts go (`bot.core.metrics.BotMetrics` is one)."""

    def slack_failed(self, method: str, error: str) -> None: ...

    def slack_rate_limited_once(self, method: str) -> None: ...


class SlackErrorCounter(AsyncRetryHandler):
    def __init__(self, sink: SlackErrorSink) -> None:
        super().__init__(max_retry_count=0)
        self.sink = sink

    def __deepcopy__(self, memo: dict[int, Any]) -> SlackErrorCounter:
        """Itself. Bolt deep-copies each request for its lazy listeners, the client in it and
        so this handler with it; a copy would count into a copy of the metrics (holding locks,
        which cannot be copied at all: the listener would fail and the Home tab stay empty)."""
        return self

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        try:
            self._count(request, response, error)
        except Exception:  # a count lost, never a call
            log.debug("could not count a Slack API answer", exc_info=True)
        return False

    def _count(
        self, request: HttpRequest, response: HttpResponse | None, error: Exception | None
    ) -> None:
        method = urlsplit(request.url).path.rsplit("/", 1)[-1] or "unknown"
        if error is not None:
            self.sink.slack_failed(method, type(error).__name__)
            return
        if response is None:
            return
        status = response.status_code
        if status == 429:
            self.sink.slack_rate_limited_once(method)
            self.sink.slack_failed(method, "ratelimited")
        elif status >= 500:
            self.sink.slack_failed(method, f"http_{status}")
        elif isinstance(response.body, dict) and response.body.get("ok") is False:
            self.sink.slack_failed(method, str(response.body.get("error") or "unknown_error"))
