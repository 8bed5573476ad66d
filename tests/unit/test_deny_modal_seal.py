"""The Deny modal's metadata binds its submission to the click that opened it: changed,
foreign or stale metadata opens nothing."""

from __future__ import annotations

import base64
import json

from bot.slack.approval_blocks import ApprovalRef
from bot.slack.deny_modal import MAX_AGE, ModalSeal, Opened, deny_modal, reason_of
from bot.testing.blocks import view_problem

REF = ApprovalRef(
    kind="input", session="slack:T1:C1:1.2", turn_id="T1:C1:1.2", ident="ok", digest="d"
)
OPENED = Opened(
    ref=REF,
    principal={"team": "T1", "enterprise": None, "user": "U1"},
    channel="C1",
    message_ts="1.3",
    thread_ts="1.2",
    home=False,
    opened_at=1000.0,
)


def test_a_sealed_click_opens_again_as_it_was() -> None:
    seal = ModalSeal("secret-one")
    assert seal.open(seal.seal(OPENED), now=1001.0) == OPENED


def test_changed_foreign_or_stale_metadata_opens_nothing() -> None:
    seal = ModalSeal("secret-one")
    sealed = seal.seal(OPENED)
    body, _, mac = sealed.rpartition(".")
    data = json.loads(base64.urlsafe_b64decode(body))
    data["p"]["user"] = "U2"  # another person's name put in
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode()
    assert seal.open(f"{forged}.{mac}", now=1001.0) is None
    assert ModalSeal("secret-two").open(sealed, now=1001.0) is None
    assert seal.open(sealed, now=1000.0 + MAX_AGE + 1) is None
    assert seal.open("not even close", now=1001.0) is None
    assert seal.open("", now=1001.0) is None


def test_the_modal_is_one_slack_takes_and_its_reason_is_read_back() -> None:
    view = deny_modal("Refund $18.50?" * 400, ModalSeal("s").seal(OPENED))
    assert view_problem(view, kind="modal") is None
    assert len(view["private_metadata"]) <= 3000
    typed = {
        "state": {"values": {"reason": {"text": {"type": "plain_text_input", "value": " no "}}}}
    }
    assert reason_of(typed) == "no"
    assert reason_of({"state": {"values": {}}}) is None
    blank = {"state": {"values": {"reason": {"text": {"value": "   "}}}}}
    assert reason_of(blank) is None
