"""The console's JSON shapes without a server: a model step named by the model that wrote it,
a long tool result cut with its flag, a configured secret scrubbed, and the CONSOLE_TOKENS
parser's refusals, none of which quotes a token."""

from __future__ import annotations

import json

import pytest

from agent import Redactor
from bot.console import views
from bot.console.tokens import ConsoleTokenError, parse_console_tokens

SECRET = "hunter2-hunter2-hunter2"
SCRUB = Redactor([SECRET])


def _steps(value: object, body: dict[str, object]) -> list[dict[str, object]]:
    turn = {
        "turn_id": "t",
        "kind": "turn",
        "status": "completed",
        "speaker": None,
        "created_at": 100.0,
        "finished_at": 103.0,
        "cancel_reason": None,
    }
    steps = [
        {"turn_id": "t", "step_id": "model:1", "value": "{}", "created_at": 101.5},
        {"turn_id": "t", "step_id": "tool:1:c", "value": json.dumps(value), "created_at": 103.0},
    ]
    messages = [{"idx": 1, "turn_id": "t", "body": json.dumps(body)}]
    [shown] = views.turns_json([turn], steps, messages, [], SCRUB)
    steps_shown: list[dict[str, object]] = shown["steps"]
    return steps_shown


def test_steps_name_time_cut_and_scrub() -> None:
    body = {
        "role": "assistant",
        "turn_id": "t",
        "model": "claude-test-1",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 7, "output_tokens": 3},
        "content": [
            {"kind": "text", "text": f"using {SECRET}"},
            {"kind": "tool_use", "id": "c", "name": "dump", "input": {"key": SECRET}},
        ],
    }
    model, tool = _steps({"blob": "x" * 10_000}, body)
    assert (model["name"], model["duration_ms"]) == ("claude-test-1", 1500)
    assert model["tokens"] == {"input": 7, "output": 3, "cache_read": 0, "cache_write": 0}
    assert model["text"] == "using [redacted]"
    assert (tool["name"], tool["arguments"], tool["duration_ms"]) == (
        "dump",
        {"key": "[redacted]"},
        1500,
    )
    assert tool["result_truncated"] is True
    assert isinstance(tool["result"], str)
    assert len(tool["result"]) == views.MAX_VALUE_CHARS
    _, failed = _steps({"error": f"boom {SECRET}"}, body)
    assert (failed["error"], failed["result"]) == ("boom [redacted]", None)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("{not json", "not JSON"),
        ("[]", "non-empty JSON object"),
        ('{"short": {"name": "a"}}', "token #1 must be at least 16"),
        ('{"console-token-000000001": {"name": ""}}', "token #1: name must be"),
        ('{"console-token-000000001": {"name": "a", "teams": []}}', "teams must be null"),
        ('{"console-token-000000001": {"name": "a", "teams": ["T:1"]}}', "teams must be null"),
        ('{"console-token-000000001": {"name": "a", "role": "x"}}', "unknown keys"),
    ],
)
def test_malformed_tokens_are_refused_without_quoting_them(raw: str, said: str) -> None:
    with pytest.raises(ConsoleTokenError) as refused:
        parse_console_tokens(raw)
    assert said in str(refused.value)
    assert "console-token-000000001" not in str(refused.value)
    assert "short" not in str(refused.value)


def test_unset_is_off_and_teams_give_prefixes() -> None:
    assert parse_console_tokens(None) is None
    assert parse_console_tokens("  ") is None
    tokens = parse_console_tokens('{"console-token-000000001": {"name": "a", "teams": ["T1"]}}')
    assert tokens is not None
    op = tokens.login("console-token-000000001")
    assert op is not None
    assert op.sees("slack:T1:C1:1.2")
    assert op.sees("api:T1:k")
    assert not op.sees("slack:T10:C1:1.2")
    assert not op.sees("slack:T2:C1:1.2")
    assert tokens.login("console-token-000000002") is None
