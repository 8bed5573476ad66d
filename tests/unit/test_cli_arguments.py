"""The operator commands' arguments are read without the engine (`bot.cli.operator.arguments`), so
the defaults they share with the engine and the bot are written there a second time: each is
held equal to its source here, and a value that cannot be read is a usage error, never a
traceback."""

from __future__ import annotations

import argparse

import pytest

from agent import CancelReason, ReceiptStatus
from bot.cli.operator import arguments
from bot.core.settings import Settings


def test_the_receipt_statuses_are_the_engines() -> None:
    assert tuple(status.value for status in ReceiptStatus) == arguments.RECEIPT_STATUSES


def test_the_default_cancel_reason_is_the_engines_stop() -> None:
    assert arguments.STOPPED == CancelReason.STOPPED


def test_the_prune_batch_named_in_the_help_is_the_settings_default() -> None:
    assert Settings.model_fields["prune_batch"].default == arguments.PRUNE_BATCH


@pytest.mark.parametrize(
    ("text", "value"), [("null", None), ("42", 42), ('{"id": "r1"}', {"id": "r1"})]
)
def test_a_receipts_value_is_json(text: str, value: object) -> None:
    assert arguments.json_value(text) == value


def test_a_receipts_value_that_is_not_json_is_a_usage_error() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not JSON"):
        arguments.json_value("{bad")


def test_a_user_id_and_a_count_are_checked() -> None:
    assert arguments.slack_user("W024BE7LH") == "W024BE7LH"
    with pytest.raises(argparse.ArgumentTypeError):
        arguments.slack_user("bob")
    assert arguments.at_least_one("3") == 3
    with pytest.raises(argparse.ArgumentTypeError):
        arguments.at_least_one("0")
