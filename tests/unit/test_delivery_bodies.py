"""Delivery post bodies (`storage.delivery.bodies`): every row the renderer wrote before bodies were
typed reads back and writes back as it was; unknown keys are kept, missing ones default."""

from __future__ import annotations

import json

import pytest

from bot.slack.approval_blocks import answered_message
from bot.slack.rendering.content import PartContent
from storage.delivery.bodies import EMPTY_BODY, AnswerMark, PostBody

CARD = {"id": "c1", "title": "refund", "status": "complete", "waits": "input:T1:c1"}
BUTTONS = [{"type": "actions", "elements": []}]
WRITTEN_BEFORE = [
    pytest.param("{}", id="begun-or-pruned"),
    pytest.param('{"text": "Hello", "tasks": []}', id="reply"),
    pytest.param(
        json.dumps({"text": "Hi", "tasks": [CARD], "footer": "_done_", "blocks": BUTTONS}),
        id="closed-reply",
    ),
    pytest.param(
        json.dumps({"prompt": "Refund?", "blocks": BUTTONS, "audience": ["U1"]}), id="approval"
    ),
    pytest.param(
        json.dumps(
            {
                "prompt": "Refund?",
                "blocks": BUTTONS,
                "audience": ["U1"],
                "answered": {"by": "U1", "accepted": False, "reason": "not now"},
            }
        ),
        id="answered-approval",
    ),
    pytest.param(
        json.dumps({"prompt": "Refund?", "blocks": BUTTONS, "audience": [], "settled": "gone"}),
        id="settled-approval",
    ),
    pytest.param('{"prompt": "Reset.", "claim": "ab12"}', id="notice"),
]


@pytest.mark.parametrize("stored", WRITTEN_BEFORE)
def test_a_row_written_before_reads_and_writes_back_as_it_was(stored: str) -> None:
    assert PostBody.from_json(stored).to_json() == stored


def test_a_policy_approval_reads_with_no_audience() -> None:
    """Its `"audience": null` is written back without the key: the same to every reader."""
    stored = json.dumps({"prompt": "Refund?", "blocks": BUTTONS, "audience": None})
    body = PostBody.from_json(stored)
    assert body.audience is None
    assert json.loads(body.to_json()) == {"prompt": "Refund?", "blocks": BUTTONS}


def test_what_is_written_now_has_the_old_shape() -> None:
    content = PartContent(shown="Hello there", durable=5, tasks={"c1": dict(CARD)})
    assert json.loads(content.body().to_json()) == {"text": "Hello", "tasks": [CARD]}
    answered = PostBody(prompt="Refund?", answered=AnswerMark(by="U1", accepted=True))
    assert json.loads(answered.to_json()) == {
        "prompt": "Refund?",
        "answered": {"by": "U1", "accepted": True},
    }
    assert PostBody().to_json() == EMPTY_BODY


def test_unknown_keys_are_kept_and_missing_ones_default() -> None:
    stored = json.dumps(
        {"prompt": "Refund?", "later": 1, "answered": {"by": "U1", "accepted": True, "via": "x"}}
    )
    body = PostBody.from_json(stored)
    assert (body.text, body.tasks, body.blocks, body.settled) == (None, None, None, None)
    assert body.extra == {"later": 1}
    assert body.answered == AnswerMark(by="U1", accepted=True, extra={"via": "x"})
    assert json.loads(body.to_json()) == json.loads(stored)


@pytest.mark.parametrize("stored", [None, "", "null", "[]", '"text"'])
def test_a_body_that_is_not_an_object_reads_as_empty(stored: str | None) -> None:
    assert PostBody.from_json(stored) == PostBody()


def test_values_of_the_wrong_type_read_as_absent() -> None:
    body = PostBody.from_json(json.dumps({"tasks": "x", "blocks": [1, {"a": 1}], "answered": {}}))
    assert (body.tasks, body.blocks, body.answered) == (None, [{"a": 1}], None)


def test_a_settled_or_answered_approval_reads_its_verdict_from_the_body() -> None:
    settled = PostBody(prompt="Refund?", settled=":hourglass: expired")
    assert answered_message(settled)[0] == "Refund?\n:hourglass: expired"
    denied = PostBody(answered=AnswerMark(by="U1", accepted=False, reason="no"))
    assert answered_message(denied)[0] == "Approval request\n:no_entry: Denied by <@U1>: no"
