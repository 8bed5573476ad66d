"""A turn the model refused, as the HTTP API reports it: completed, with what the model said
before it was stopped as its text, and a `note` saying plainly that the model declined (never a
cut-off answer passed off as a whole one)."""

from __future__ import annotations

import pytest

from agent import ScriptedModel, ScriptedReply
from agent._stops import DECLINED
from tests.api.agents import AGENT

pytestmark = pytest.mark.usefixtures("serving")

WHY = "This request was declined because it could enable cyber harm."


async def test_a_refused_turn_is_completed_with_a_note_that_the_model_declined(
    db_url, api, clients
) -> None:
    refused = ScriptedReply(text="Sure, the", stop_reason="refusal", stop_explanation=WHY)
    bot = await api(db_url, AGENT, ScriptedModel([refused]))
    alice = clients(bot, "alice")

    done = (await alice.post("/sessions/s/turns", json={"text": "go", "turn_id": "t"})).json()

    assert (done["status"], done["text"]) == ("completed", "Sure, the")
    assert done["note"].startswith(DECLINED)
    assert WHY in done["note"]
