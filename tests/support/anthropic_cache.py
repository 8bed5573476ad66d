"""The stand-in's prompt cache: Anthropic's caching rules, as strictly as the docs state them.

- A `cache_control` is `{"type": "ephemeral"}` with an optional `ttl` of `"5m"` (the default) or
  `"1h"`; anything else is a 400. A 1-hour breakpoint may not come after a 5-minute one in the
  prefix order (tools, then system, then messages): longer lifetimes first.
- An entry is the exact prefix up to and including a breakpoint's block (the `cache_control`
  markers themselves are not content), per model. It lives for its ttl on the stand-in's own
  clock, and a read refreshes it for another ttl. A prefix shorter than the model's minimum
  cacheable length is neither read nor written (no error, as the API does).
- A request reads the longest live entry it finds at a breakpoint or up to 20 blocks before one
  (the API's lookback), and writes every breakpoint after that point; it reports
  `cache_read_input_tokens`, `cache_creation_input_tokens` and their `cache_creation` split by
  ttl, always (0 when nothing was read or written), as the API does.

Tokens are estimated (a block's JSON, four characters a token): the rules, not the counts, are
what the adapter is tested against.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

TTLS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK = 20
DEFAULT_MINIMUM = 1024
MINIMUM_BY_MODEL = (
    # The minimum cacheable prompt length per model family (Anthropic's prompt caching docs).
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)


@dataclass
class _Entry:
    expires_at: float
    ttl: float


@dataclass(frozen=True)
class _Breakpoint:
    index: int
    ttl: str


def cache_control_problem(body: dict[str, Any]) -> str | None:
    """A 400 for a malformed breakpoint, or for a 1-hour one after a 5-minute one."""
    previous: str | None = None
    for where, block in _marked(body):
        control = block.get("cache_control")
        if not isinstance(control, dict) or control.get("type") != "ephemeral":
            return f"{where}.cache_control.type: Input should be 'ephemeral'"
        extra = set(control) - {"type", "ttl"}
        if extra:
            return f"{where}.cache_control.{sorted(extra)[0]}: Extra inputs are not permitted"
        ttl = control.get("ttl", "5m")
        if ttl not in TTLS:
            return f"{where}.cache_control.ttl: Input should be '5m' or '1h'"
        if ttl == "1h" and previous == "5m":
            return (
                f"{where}.cache_control: a ttl='1h' cache_control block must not come after a "
                "ttl='5m' one (longer lifetimes come first in the prompt)"
            )
        previous = ttl
    return None


class PromptCache:
    """What the stand-in has cached, on its own clock (`now`, moved by `advance`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._entries: dict[str, _Entry] = {}

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def clear(self) -> None:
        self.now = 0.0
        self._entries.clear()

    def live(self) -> list[float]:
        """The ttl of every entry still alive (a test's view of what was written how)."""
        return [e.ttl for e in self._entries.values() if e.expires_at > self.now]

    def account(self, body: dict[str, Any]) -> dict[str, Any]:
        """Read and write this request's prefixes; the usage fields the API reports for it."""
        model = str(body.get("model", ""))
        minimum = _minimum(model)
        keys: list[str] = []
        tokens: list[int] = []
        breakpoints: list[_Breakpoint] = []
        digest = hashlib.sha256(model.encode())
        total = 0
        for index, (where, block) in enumerate(_prefix(body, automatic=True)):
            content = {k: v for k, v in block.items() if k != "cache_control"}
            text = json.dumps([where.split(".")[0], content], sort_keys=True)
            digest.update(text.encode())
            keys.append(digest.copy().hexdigest())
            total += max(1, len(text) // 4)
            tokens.append(total)
            control = block.get("cache_control")
            if isinstance(control, dict):
                breakpoints.append(_Breakpoint(index, str(control.get("ttl", "5m"))))
        read_at = self._longest_hit(keys, tokens, breakpoints, minimum)
        read = tokens[read_at] if read_at is not None else 0
        written = {"5m": 0, "1h": 0}
        done = read
        for point in breakpoints:
            if (read_at is not None and point.index <= read_at) or tokens[point.index] < minimum:
                continue
            ttl = TTLS[point.ttl]
            self._entries[keys[point.index]] = _Entry(expires_at=self.now + ttl, ttl=ttl)
            written[point.ttl] += tokens[point.index] - done
            done = tokens[point.index]
        return {
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written["5m"] + written["1h"],
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _longest_hit(
        self, keys: list[str], tokens: list[int], points: list[_Breakpoint], minimum: int
    ) -> int | None:
        best: int | None = None
        for point in points:
            for index in range(point.index, max(-1, point.index - LOOKBACK), -1):
                entry = self._entries.get(keys[index])
                if entry is None or entry.expires_at <= self.now or tokens[index] < minimum:
                    continue
                entry.expires_at = self.now + entry.ttl  # a read refreshes the entry
                if best is None or index > best:
                    best = index
                break
        return best


def _minimum(model: str) -> int:
    for prefix, minimum in MINIMUM_BY_MODEL:
        if model.startswith(prefix):
            return minimum
    return DEFAULT_MINIMUM


def _marked(body: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """The breakpoints in prefix order; the request's own `cache_control` (automatic caching,
    on the last block) comes last."""
    for where, block in _prefix(body):
        if "cache_control" in block:
            yield where, block
    if "cache_control" in body:
        yield "cache_control", {"cache_control": body["cache_control"]}


def _prefix(
    body: dict[str, Any], *, automatic: bool = False
) -> Iterable[tuple[str, dict[str, Any]]]:
    """Every block in the order the cache prefixes them: tools, system, then messages; with
    `automatic`, the request's own `cache_control` marks the last block (unless it has one)."""
    blocks = list(_blocks(body))
    control = body.get("cache_control")
    if automatic and blocks and isinstance(control, dict):
        where, last = blocks[-1]
        blocks[-1] = (where, {"cache_control": control, **last})
    yield from blocks


def _blocks(body: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for i, tool in enumerate(body.get("tools") or []):
        yield f"tools.{i}", tool
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for i, block in enumerate(system):
        yield f"system.{i}", block
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content", [])
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for j, block in enumerate(content):
            yield f"messages.{i}.content.{j}", {**block, "_role": message.get("role")}
