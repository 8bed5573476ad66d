"""What Slack sends while a person connects the app to a workspace (docs/slack.md, "Connect a
real workspace"): saving the Events request URL sends a signed `url_verification` challenge, and
Slack accepts the URL only once the bot answers it with the challenge."""

from __future__ import annotations

import json

from tests.bot.agents import AGENT, SIMPLE, model


async def test_the_request_url_answers_slacks_challenge(db_url, launch):
    app = await launch(db_url, AGENT, model(SIMPLE))
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps(
        {"token": "legacy-verification-token", "challenge": challenge, "type": "url_verification"}
    )
    response = await app.slack.send(body, content_type="application/json")
    assert response.status_code == 200
    assert challenge in response.text
