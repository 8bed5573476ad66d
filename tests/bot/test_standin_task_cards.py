"""Task cards in posted and edited messages, as Slack takes them: the stand-in refuses a
`task_card` block its reference would refuse (no id or title, a status Slack has no name for, an
output that is not one `rich_text`), keeps a message's cards where a stream keeps its tasks, and
an edit with `markdown_text` replaces them (https://docs.slack.dev/reference/block-kit/blocks/
task-card-block). Driven with the real `AsyncWebClient` over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.rendering.content import PartContent, message_body
from bot.testing.standin import SlackStandIn
from bot.testing.workspace import is_request

CHANNEL = "C0CARDS"


@pytest.fixture
def client(standin: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=standin.api_url)


def card(**fields: Any) -> dict[str, Any]:
    return {"type": "task_card", "task_id": "c_1", "title": "Issue refund", **fields}


@pytest.mark.parametrize(
    "block",
    [
        {"type": "task_card", "title": "Issue refund"},
        {"type": "task_card", "task_id": "c_1"},
        card(status="denied"),
        card(output="denied by someone"),
        card(output={"type": "rich_text", "elements": []}),
    ],
)
async def test_a_task_card_slack_would_refuse_is_refused(client, standin, block):
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[block])
    assert caught.value.response["error"] == "invalid_blocks"
    assert standin.bot_messages(CHANNEL) == []


async def test_a_message_keeps_its_cards_until_an_edit_replaces_them(client, standin):
    content = PartContent(
        shown="Looking it up.",
        durable=14,
        tasks={
            "c_1": {"id": "c_1", "title": "Issue refund", "status": "error", "output": "denied"},
            "c_2": {"id": "c_2", "title": "Lookup order", "status": "complete"},
        },
        footer="_stopped by <@U0BOB>_",
    )
    body = message_body(content)
    posted = await client.chat_postMessage(channel=CHANNEL, **body)
    [message] = standin.bot_messages(CHANNEL)
    assert not is_request(message)  # a reply, not an approval
    assert message.tasks["c_1"] == {
        "id": "c_1",
        "title": "Issue refund",
        "status": "error",
        "output": "denied",
    }
    assert message.text == "Looking it up.\n\n_stopped by <@U0BOB>_"

    content.tasks["c_1"]["output"] = "denied by <@U0ALICE>: no"
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], **message_body(content))
    assert message.tasks["c_1"]["output"] == "denied by <@U0ALICE>: no"  # a mention survives

    await client.chat_update(channel=CHANNEL, ts=posted["ts"], markdown_text="plain now")
    assert message.tasks == {}
