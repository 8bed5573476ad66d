"""The logger Bolt is given, without the one start-up warning that is noise for this bot.

Installed when a bot builds its Bolt app (`bolt_logger()`), not when a module is imported, so
importing the bot changes no logging."""

from __future__ import annotations

import logging

from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped


class _ClientGivenNotice(logging.Filter):
    """Drops Bolt's start-up warning that the token will be unused beside the given client.

    Bolt reads `SLACK_BOT_TOKEN` from the environment whatever it is passed, and warns when a
    client comes too; the client it is given is made from that same setting, so the warning
    is noise at every start (`bot serve`, `bot socket`, workers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_NOTICE = _ClientGivenNotice()


def bolt_logger() -> logging.Logger:
    """`slack_bolt`'s logger with the filter on it, once however many bots are built."""
    logger = logging.getLogger("slack_bolt")
    logger.addFilter(_NOTICE)  # a no-op when it is already there
    return logger
