"""Whether a model's API compacts a long thread: what the runtime reads to decide how much of a
session to load (the thread since its newest compaction, or the `context_messages` window).

Optional on the `Model` seam: a model written only to the Protocol says nothing and keeps the
window. `AnthropicModel` answers from its configuration and the request's model, as its request
builder decides (`context_plan`); `DeferredModel` forwards without building the model.
"""

from __future__ import annotations

import pytest
from anthropic import AsyncAnthropic

from agent import AnthropicModel, ModelSettings, ScriptedModel
from agent.seams import model_compacts
from bot.core.deferred_model import DeferredModel
from tests.support.plain_model import PlainModel

NEW = "claude-opus-5-5"
OLD = "claude-sonnet-4-6"
DEFAULT = ModelSettings()


@pytest.fixture
async def client() -> AsyncAnthropic:
    return AsyncAnthropic(api_key="sk-ant-test-compacts", base_url="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("model", "mode", "compacts"),
    [
        (NEW, "auto", True),
        (NEW, "off", False),
        (OLD, "auto", False),  # tool-result clearing only: the window still bounds it
        ("my-gateway-alias", "auto", False),  # no family owns it: no beta is sent
    ],
)
async def test_the_anthropic_adapter_answers_from_its_configuration(
    client: AsyncAnthropic, model: str, mode: str, compacts: bool
) -> None:
    adapter = AnthropicModel(client=client, model=model, context_management=mode)  # type: ignore[arg-type]
    assert model_compacts(adapter, DEFAULT) is compacts


async def test_the_agents_own_model_decides(client: AsyncAnthropic) -> None:
    adapter = AnthropicModel(client=client, model=OLD)
    assert model_compacts(adapter, ModelSettings(model=NEW)) is True
    assert model_compacts(AnthropicModel(client=client, model=NEW), ModelSettings(model=OLD)) is (
        False
    )


def test_a_model_that_says_nothing_does_not_compact() -> None:
    assert model_compacts(PlainModel([]), DEFAULT) is False
    assert model_compacts(ScriptedModel(), DEFAULT) is False
    assert model_compacts(ScriptedModel(compacts_context=True), DEFAULT) is True


async def test_a_deferred_model_answers_without_building_and_then_forwards() -> None:
    built: list[str] = []

    def build() -> ScriptedModel:
        built.append("built")
        return ScriptedModel(compacts_context=True)

    deferred = DeferredModel(build, compacts=lambda settings: settings.model == NEW)
    assert model_compacts(deferred, ModelSettings(model=NEW)) is True
    assert model_compacts(deferred, DEFAULT) is False
    assert built == [], "never built on the event loop to answer"
    assert model_compacts(DeferredModel(build), DEFAULT) is False

    await deferred._ready()  # a turn needed the model
    assert model_compacts(deferred, DEFAULT) is True
