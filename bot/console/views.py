"""The console's JSON shapes, made from the rows `storage.sql.console` reads.

Everything shown that a tool, the model or a person wrote (arguments, results, errors, model
text, event summaries) passes through the bot's redactor first (`Settings.secrets`, plus the
well-known credential shapes), and long values are cut to `MAX_VALUE_CHARS` with a flag, so a
page never carries a secret or a megabyte of tool output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.slack.inbound import parse_session_key
from storage.sql.console import SessionRow

Scrub = Callable[[str], str]
MAX_VALUE_CHARS = 4096
MAX_TEXT_CHARS = 2000
MAX_SUMMARY_CHARS = 200


def loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def scrubbed(value: Any, scrub: Scrub, limit: int = MAX_VALUE_CHARS) -> tuple[Any, bool]:
    """`value` with secrets replaced, and whether it was cut: JSON stays JSON while it fits;
    past `limit` characters it becomes its text's first `limit` characters."""
    if value is None:
        return None, False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    clean = scrub(text)
    if len(clean) > limit:
        return clean[:limit], True
    if isinstance(value, str):
        return clean, False
    try:
        return json.loads(clean), False
    except ValueError:
        return clean, False


def place(key: str) -> tuple[str | None, str | None, str | None]:
    """(team, channel, thread_ts) a key names; Nones for a key that is not a Slack thread's
    (an API session's team is its second part too)."""
    try:
        return parse_session_key(key)
    except ValueError:
        parts = key.split(":")
        if len(parts) >= 3 and parts[0] == "api":
            return parts[1], None, None
        return None, None, None


def slack_url(key: str) -> str | None:
    """Slack's deep link to the conversation's channel (`bot.cli.operator.links`: without the
    workspace's domain no link can name the thread itself; `thread_ts` is shown beside it)."""
    team, channel, _ = place(key)
    if not key.startswith("slack:") or team is None or channel is None:
        return None
    return f"https://slack.com/app_redirect?team={team}&channel={channel}"


def session_json(row: SessionRow) -> dict[str, Any]:
    team, channel, thread_ts = place(row.key)
    return {
        "key": row.key,
        "status": row.status,
        "team": team,
        "channel": channel,
        "thread_ts": thread_ts,
        "updated_at": row.updated_at,
        "turns": row.turns,
        "last_turn_id": row.last_turn_id,
        "last_speaker": row.last_speaker,
        "slack_url": slack_url(row.key),
    }


def step_kind(step_id: str) -> str:
    head = step_id.split(":", 1)[0]
    if head == "model":
        return "model"
    if head == "tool":
        return "tool"
    if head in ("park", "input"):
        return "input"
    return "other"


def _number(step_id: str) -> int | None:
    parts = step_id.split(":")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def _calls(messages: Sequence[Mapping[Any, Any]]) -> dict[str, dict[str, Any]]:
    """Every tool call the model made, by call id: a tool step's name and arguments."""
    found: dict[str, dict[str, Any]] = {}
    for row in messages:
        body = loads(row["body"])
        if not isinstance(body, dict) or body.get("role") != "assistant":
            continue
        for block in body.get("content") or []:
            if isinstance(block, dict) and block.get("kind") == "tool_use" and "id" in block:
                found[str(block["id"])] = block
    return found


def _tokens(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    return {
        "input": int(usage.get("input_tokens") or 0),
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": int(usage.get("cache_read_tokens") or 0),
        "cache_write": int(usage.get("cache_write_tokens") or 0),
    }


def step_json(
    row: Mapping[Any, Any],
    *,
    previous_at: float | None,
    by_idx: Mapping[int, Any],
    calls: Mapping[str, dict[str, Any]],
    scrub: Scrub,
) -> dict[str, Any]:
    step_id = str(row["step_id"])
    kind = step_kind(step_id)
    value = loads(row["value"])
    at = row.get("created_at")
    step: dict[str, Any] = {
        "step_id": step_id,
        "kind": kind,
        "name": None,
        "at": at,
        "duration_ms": None
        if at is None or previous_at is None
        else max(0, round((at - previous_at) * 1000)),
        "tokens": None,
        "stop_reason": None,
        "arguments": None,
        "result": None,
        "result_truncated": False,
        "error": None,
        "text": None,
    }
    number = _number(step_id)
    if kind == "model":
        message = by_idx.get(number) if number is not None else None
        message = message if isinstance(message, dict) else {}
        step["name"] = message.get("model") or "model"
        step["tokens"] = _tokens(message.get("usage"))
        step["stop_reason"] = message.get("stop_reason") or (
            value.get("stop_reason") if isinstance(value, dict) else None
        )
        text = "".join(
            str(block.get("text") or "")
            for block in message.get("content") or []
            if isinstance(block, dict) and block.get("kind") == "text"
        )
        step["text"], _ = scrubbed(text or None, scrub, MAX_TEXT_CHARS)
    elif kind == "tool":
        call_id = step_id.split(":", 2)[2] if step_id.count(":") >= 2 else ""
        call = calls.get(call_id) or calls.get(call_id.removesuffix("_confirmed")) or {}
        step["name"] = call.get("name")
        step["arguments"], _ = scrubbed(call.get("input"), scrub)
        if isinstance(value, dict) and set(value) == {"error"}:
            step["error"], _ = scrubbed(str(value["error"]), scrub, MAX_TEXT_CHARS)
        else:
            step["result"], step["result_truncated"] = scrubbed(value, scrub)
    else:
        if isinstance(value, dict):
            request = value.get("request")
            if isinstance(request, dict):
                step["name"] = request.get("tool")
        step["result"], step["result_truncated"] = scrubbed(value, scrub)
    return step


def event_summary(kind: str, body: Any, scrub: Scrub) -> str:
    """One line saying what the event says: its text, error, reason, prompt or tool name."""
    if not isinstance(body, dict):
        return kind
    call = body.get("call")
    name = body.get("name") or (call.get("name") if isinstance(call, dict) else None)
    for field in ("error", "text", "reason", "prompt", "outcome"):
        said = body.get(field)
        if isinstance(said, str) and said:
            text = f"{name}: {said}" if name else said
            break
    else:
        text = str(name) if name else kind
    clean = scrub(" ".join(text.split()))
    return clean if len(clean) <= MAX_SUMMARY_CHARS else clean[: MAX_SUMMARY_CHARS - 1] + "…"


def event_json(row: Mapping[Any, Any], scrub: Scrub) -> dict[str, Any]:
    return {
        "seq": int(row["seq"]),
        "type": row["type"],
        "at": row.get("created_at"),
        "summary": event_summary(str(row["type"]), loads(row["body"]), scrub),
    }


def turns_json(
    turns: Sequence[Mapping[Any, Any]],
    steps: Sequence[Mapping[Any, Any]],
    messages: Sequence[Mapping[Any, Any]],
    events: Sequence[Mapping[Any, Any]],
    scrub: Scrub,
) -> list[dict[str, Any]]:
    by_idx = {int(row["idx"]): loads(row["body"]) for row in messages}
    calls = _calls(messages)
    shown: list[dict[str, Any]] = []
    for turn in turns:
        turn_id = turn["turn_id"]
        previous = turn["created_at"]
        turn_steps = []
        for row in steps:
            if row["turn_id"] != turn_id:
                continue
            turn_steps.append(
                step_json(row, previous_at=previous, by_idx=by_idx, calls=calls, scrub=scrub)
            )
            previous = row.get("created_at") or previous
        shown.append(
            {
                "turn_id": turn_id,
                "kind": turn["kind"],
                "status": turn["status"],
                "speaker": turn["speaker"],
                "created_at": turn["created_at"],
                "finished_at": turn["finished_at"],
                "cancel_reason": turn["cancel_reason"],
                "steps": turn_steps,
                "events": [event_json(e, scrub) for e in events if e["turn_id"] == turn_id],
            }
        )
    return shown


def receipt_json(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        "session": row["session_key"],
        "key": row["key"],
        "tool": str(row["key"]).split(":", 1)[0],
        "status": row["status"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "fingerprint": row["fingerprint"],
    }
