"""A local context budget (`ANTHROPIC_MAX_CONTEXT_TOKENS`, for a model without compaction) judged
by the API's token counting endpoint rather than by characters / 4.

The estimate is cheap but blind to what a token is: it overestimates English a little and
underestimates text outside ASCII several times over (a Japanese character is about a token,
not a quarter of one), so a budget it enforces lets such a thread past the model's window. The
counting endpoint is exact and free, but it is one more round trip before the reply starts, and
it has a rate limit of its own; so it is asked at most `MAX_COUNTS` times a step, and only when a
budget is set. The first count is of the whole thread: when it fits, nothing is cut. Otherwise
the count calibrates the estimate (tokens per estimated token, for this very thread), the
estimate picks the newest whole exchanges that fit, and a second count checks them. If the
endpoint cannot be reached, the estimate decides, as before, and the operator hears it once.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence

from agent._messages import Message
from agent.models._anthropic_request import (
    ApiMessage,
    bound_transcript,
    estimate_tokens,
    message_params,
    open_exchanges,
)

MAX_COUNTS = 3
CountTokens = Callable[[list[ApiMessage]], Awaitable[int]]
"""The API's input token count of a request carrying these messages (system, tools and the
rest of the request as they will be sent)."""


async def fit_by_count(
    messages: Sequence[Message],
    budget: int,
    overhead: int,
    count: CountTokens,
    *,
    long_cache: bool,
) -> Sequence[Message]:
    """The newest whole exchanges whose counted size fits `budget` (the newest one always, as
    `bound_transcript` keeps it). `overhead`: the estimate of the system prompt and tools."""
    candidate = messages
    for _ in range(MAX_COUNTS):
        counted = await count(message_params(candidate, long_cache=long_cache))
        if counted <= budget:
            return candidate
        openings = open_exchanges(candidate)
        if len(openings) <= 1:
            return candidate  # the turn in progress alone: the API's limit is the judge
        estimated = overhead + sum(estimate_tokens(p) for p in message_params(candidate))
        ratio = max(counted / max(estimated, 1), 1e-6)
        shorter = bound_transcript(messages, math.floor(budget / ratio), overhead)
        if len(shorter) >= len(candidate):  # the estimate would keep it: drop its oldest
            shorter = candidate[openings[1] :]
        candidate = shorter
    return candidate  # cut by the estimate as the last count calibrated it
