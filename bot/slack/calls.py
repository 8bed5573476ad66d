"""Slack Web API calls as the renderer needs them: vendor errors translated at this boundary.

    SlackCallError
    ├── RateLimited   429: nothing was applied; wait `retry_after` and send the same call again
    ├── Uncertain     5xx or the connection failed: the call may or may not have been applied
    ├── TokenGone     `invalid_auth`, `token_revoked`, `account_inactive`: the token is dead;
    │                 no call made with it will ever succeed (the app was uninstalled, its bot
    │                 token revoked, the workspace or bot deactivated)
    └── Refused       `ok: false`: Slack applied nothing and says why (`code`)
        ├── StreamGone    `message_not_in_streaming_state`: the stream ended (expired or stopped)
        └── Unreachable   `thread_not_found`, `channel_not_found`, `not_in_channel`,
                          `is_archived`: the conversation cannot be written to or read; sending
                          the same call again cannot succeed until a person changes something

`TokenGone` is no `Refused`: the places that shrug off a refusal (a status line Slack does not
take, a stream refused in favour of a posted message) must not go on to the next call with a
dead token.

slack-sdk's `AsyncRateLimitErrorRetryHandler` is installed on the client (it is off by default),
so short 429 bursts are absorbed there, honouring Retry-After; what gets through it surfaces
here as `RateLimited` and the renderer keeps the work queued instead of dropping it.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

T = TypeVar("T")
STREAM_GONE = "message_not_in_streaming_state"
TOKEN_GONE = frozenset({"invalid_auth", "token_revoked", "account_inactive"})
UNREACHABLE = frozenset({"thread_not_found", "channel_not_found", "not_in_channel", "is_archived"})


class SlackCallError(Exception):
    def __init__(self, method: str, code: str) -> None:
        super().__init__(f"{method}: {code}")
        self.method = method
        self.code = code


class RateLimited(SlackCallError):
    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(method, "ratelimited")
        self.retry_after = retry_after


class Uncertain(SlackCallError):
    """Whether Slack applied the call is unknown; a post must be reconciled, not repeated."""


class Refused(SlackCallError):
    """Slack answered `ok: false`; nothing was applied."""


class StreamGone(Refused):
    """The streamed message no longer accepts appends."""


class Unreachable(Refused):
    """The thread or channel is gone or closed to the bot: a permanent refusal."""


class TokenGone(SlackCallError):
    """The token the call was made with is dead: nothing sent with it can succeed."""


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is in its workspace: how its own messages are told from everyone else's."""

    user_id: str
    bot_id: str


_IDENTITIES: weakref.WeakKeyDictionary[AsyncWebClient, BotIdentity] = weakref.WeakKeyDictionary()


async def bot_identity(client: AsyncWebClient) -> BotIdentity:
    """`auth.test` once per client: a token names one bot for as long as the client lives."""
    known = _IDENTITIES.get(client)
    if known is None:
        response = await call("auth.test", client.auth_test)
        known = BotIdentity(user_id=str(response["user_id"]), bot_id=str(response["bot_id"]))
        _IDENTITIES[client] = known
    return known


def make_client(
    token: str | None,
    base_url: str,
    *,
    rate_limit_retries: int = 2,
    observer: AsyncRetryHandler | None = None,
) -> AsyncWebClient:
    """`token` None: the base client of installs in many workspaces (Bolt adds each token).
    `observer`: a handler that sees every answer first and never retries (the metrics' error
    counter, `bot.slack.error_counts`)."""
    client = AsyncWebClient(token=token, base_url=base_url, timeout=15)
    client.retry_handlers = [
        *([observer] if observer is not None else []),
        AsyncConnectionErrorRetryHandler(),
        AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries),
    ]
    return client


def make_render_client(
    token: str, base_url: str, *, observer: AsyncRetryHandler | None = None
) -> AsyncWebClient:
    """The renderers' client: a 429 comes back to the renderer, which waits it out itself and
    checks its delivery lease before trying again. The SDK's own retry would send the call
    again after the wait with no such check, possibly after another process took the thread
    over (`DeliveryLease.fence` in `bot.slack.rendering.lease`)."""
    return make_client(token, base_url, rate_limit_retries=0, observer=observer)


async def call(method: str, send: Callable[[], Awaitable[T]]) -> T:
    """Send once and translate failures into the tree above."""
    try:
        return await send()
    except SlackApiError as err:
        raise translate(method, err) from None
    except (aiohttp.ClientError, TimeoutError) as err:
        raise Uncertain(method, type(err).__name__) from None


def translate(method: str, err: SlackApiError) -> SlackCallError:
    response = err.response
    status = getattr(response, "status_code", 200)
    if status == 429:
        headers = getattr(response, "headers", {}) or {}
        retry_after = next((v for k, v in headers.items() if k.lower() == "retry-after"), "1")
        return RateLimited(method, _seconds(retry_after))
    if status >= 500:
        return Uncertain(method, f"http_{status}")
    data: Any = getattr(response, "data", None)
    code = str(data.get("error", "unknown_error")) if isinstance(data, dict) else "unknown_error"
    if code == STREAM_GONE:
        return StreamGone(method, code)
    if code in TOKEN_GONE:
        return TokenGone(method, code)
    if code in UNREACHABLE:
        return Unreachable(method, code)
    return Refused(method, code)


def _seconds(value: Any) -> float:
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        return 1.0
