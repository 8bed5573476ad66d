"""The console as the bot builds it from settings (`bot.app.SlackBot`), or None while it is off."""

from __future__ import annotations

import logging

from agent import Agent, Redactor, Runtime
from bot.console.service import ConsoleService
from bot.console.tokens import parse_console_tokens
from bot.core.settings import Settings
from storage import SqlStore
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)


def console_for(
    *, settings: Settings, runtime: Runtime, agent: Agent, delivery: DeliveryStore
) -> ConsoleService | None:
    """None without `CONSOLE_TOKENS` (its routes answer 404), or over a store that is not SQL
    (the console reads the database directly; the in-memory store has none)."""
    tokens = parse_console_tokens(settings.console_tokens)
    if tokens is None:
        return None
    store = runtime.store
    if not isinstance(store, SqlStore):
        log.warning("the operator console needs a SQL database; it is off")
        return None
    return ConsoleService(
        runtime=runtime,
        agent=agent,
        store=store,
        delivery=delivery,
        tokens=tokens,
        scrub=Redactor(settings.secrets()),
    )
