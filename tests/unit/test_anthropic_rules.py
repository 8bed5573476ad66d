"""The stand-in's per-family rules (`tests.support.anthropic_rules`): each refusal, and that the
same body is accepted where the family takes it, so a rule is as strict as its doc and no
stricter than the family next to it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-test-rules-key"
USER = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
TOOLS = [{"name": "lookup", "input_schema": {"type": "object"}}]
ADAPTIVE_ONLY = (
    'is not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" '
    "to control thinking behavior."
)


def body(model: str, **fields: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 4096, "messages": [USER], "stream": True, **fields}


def send(api: AnthropicStandin, sent: dict[str, Any]) -> httpx.Response:
    api.enqueue(sse_reply(Text("ok")))
    return httpx.post(f"{api.base_url}/v1/messages", json=sent, headers={"x-api-key": KEY})


def refused(api: AnthropicStandin, sent: dict[str, Any]) -> str:
    response = send(api, sent)
    assert response.status_code == 400, response.text
    message: str = response.json()["error"]["message"]
    return message


def accepted(api: AnthropicStandin, sent: dict[str, Any]) -> bool:
    return send(api, sent).status_code == 200


# -- thinking config, per family -----------------------------------------------------------------

THINKING = {
    "disabled": {"type": "disabled"},
    "enabled": {"type": "enabled", "budget_tokens": 2048},
    "adaptive": {"type": "adaptive"},
    "between_tools": {"type": "between_tools"},
}
ACCEPTS = {
    "claude-sonnet-4-5": {"disabled", "enabled"},
    "claude-sonnet-4-6": {"disabled", "enabled", "adaptive"},
    "claude-opus-4-8": {"adaptive"},
    "claude-sonnet-5": {"disabled", "adaptive"},
    "claude-fable-5": {"adaptive"},
    "claude-haiku-5-5": {"disabled", "adaptive"},
    "claude-sonnet-5-5": {"adaptive", "between_tools"},
    "claude-opus-5-5": {"adaptive"},
    "claude-fable-5-1": {"adaptive"},
    "claude-a-model-the-table-does-not-know": {"adaptive"},
}


@pytest.mark.parametrize("model", ACCEPTS)
@pytest.mark.parametrize("kind", THINKING)
def test_each_family_takes_its_thinking_types_and_refuses_the_rest(
    api: AnthropicStandin, model: str, kind: str
) -> None:
    sent = body(model, thinking=THINKING[kind])
    if kind in ACCEPTS[model]:
        assert accepted(api, sent)
    else:
        assert f'"thinking.type.{kind}" is not supported for this model' in refused(api, sent)


@pytest.mark.parametrize("kind", ["disabled", "enabled"])
def test_an_adaptive_only_model_refuses_with_the_apis_words(
    api: AnthropicStandin, kind: str
) -> None:
    """Quoted from https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5."""
    message = refused(api, body("claude-opus-5-5", thinking=THINKING[kind]))

    assert message == f'"thinking.type.{kind}" {ADAPTIVE_ONLY}'


def test_sonnet_5_5_points_from_disabled_to_between_tools(api: AnthropicStandin) -> None:
    assert "between_tools" in refused(api, body("claude-sonnet-5-5", thinking=THINKING["disabled"]))


# -- effort ------------------------------------------------------------------------------------


def test_an_unknown_effort_is_refused(api: AnthropicStandin) -> None:
    message = refused(api, body("claude-sonnet-5-5", output_config={"effort": "extreme"}))

    assert message.startswith("output_config.effort: Input should be")


def test_effort_on_a_family_without_it_is_refused(api: AnthropicStandin) -> None:
    message = refused(api, body("claude-sonnet-4-5", output_config={"effort": "low"}))

    assert message == "output_config.effort: effort is not supported by model claude-sonnet-4-5"


@pytest.mark.parametrize(
    ("model", "effort", "ok"),
    [
        ("claude-sonnet-4-6", "max", True),
        ("claude-sonnet-4-6", "xhigh", False),  # the 4.6 models predate xhigh
        ("claude-opus-4-8", "xhigh", True),
        ("claude-sonnet-5-5", "low", True),
        ("claude-opus-5-5", "max", True),
    ],
)
def test_effort_levels_per_family(api: AnthropicStandin, model: str, effort: str, ok: bool) -> None:
    sent = body(model, output_config={"effort": effort})
    if ok:
        assert accepted(api, sent)
    else:
        assert "supported values: ['low', 'medium', 'high', 'max']" in refused(api, sent)


@pytest.mark.parametrize(
    ("model", "kind"), [("claude-sonnet-5", "disabled"), ("claude-sonnet-5-5", "between_tools")]
)
@pytest.mark.parametrize("effort", ["low", "high", "xhigh", "max"])
def test_thinking_turns_off_only_at_high_effort_or_lower(
    api: AnthropicStandin, model: str, kind: str, effort: str
) -> None:
    sent = body(model, thinking=THINKING[kind], output_config={"effort": effort})
    if effort in ("low", "high"):
        assert accepted(api, sent)
    else:
        assert f'with effort "{effort}"' in refused(api, sent)


# -- forced tool use ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice", [{"type": "any"}, {"type": "tool", "name": "lookup"}], ids=["any", "tool"]
)
@pytest.mark.parametrize(
    ("model", "forced"),
    [
        ("claude-sonnet-4-6", True),
        ("claude-sonnet-5", True),
        ("claude-sonnet-5-5", False),
        ("claude-opus-5-5", False),
        ("claude-fable-5-1", False),
    ],
)
def test_forced_tool_use_is_refused_where_the_family_refuses_it(
    api: AnthropicStandin, model: str, forced: bool, choice: dict[str, str]
) -> None:
    sent = body(model, tools=TOOLS, tool_choice=choice)
    if forced:
        assert accepted(api, sent)
    else:
        assert f'tool_choice.type "{choice["type"]}" is not supported' in refused(api, sent)


@pytest.mark.parametrize("kind", ["auto", "none"])
def test_tool_choice_auto_and_none_are_accepted_everywhere(
    api: AnthropicStandin, kind: str
) -> None:
    assert accepted(api, body("claude-opus-5-5", tools=TOOLS, tool_choice={"type": kind}))


# -- display and output budget -----------------------------------------------------------------


def test_display_is_refused_before_the_families_that_take_it(api: AnthropicStandin) -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}

    message = refused(api, body("claude-sonnet-4-5", thinking=thinking))

    assert message == "thinking.display: Extra inputs are not permitted"


@pytest.mark.parametrize("display", ["summarized", "omitted"])
def test_display_is_accepted_where_the_family_takes_it(api: AnthropicStandin, display: str) -> None:
    thinking = {"type": "adaptive", "display": display}

    assert accepted(api, body("claude-opus-5-5", thinking=thinking))


def test_an_unknown_display_is_refused(api: AnthropicStandin) -> None:
    thinking = {"type": "adaptive", "display": "full"}

    assert refused(api, body("claude-opus-5-5", thinking=thinking)).startswith("thinking.display")


def test_max_tokens_above_the_models_output_is_refused(api: AnthropicStandin) -> None:
    message = refused(api, {**body("claude-haiku-4-5"), "max_tokens": 64_001})

    assert message.startswith("max_tokens: 64001 > 64000")
    assert accepted(api, {**body("claude-haiku-4-5"), "max_tokens": 64_000})
