"""What a model call costs, estimated from its token counts and a table of list prices.

The prices are Anthropic's published list prices in US dollars per million tokens
(https://platform.claude.com/docs/en/about-claude/pricing and each model's overview page there,
as read for the models below). They are estimates, not a bill: a negotiated rate, a batch discount,
the higher price of a prompt past 200k tokens on a long-context model, or an hour-long cache
write (twice the input price; the table charges the five-minute write, 1.25 times) all make the
invoice differ. The figure is for a chart of spend by model, not for accounting.

A model this table does not name costs nothing here: its price is never guessed from a similar
name (`claude-opus-4-6` is not `claude-opus-4`), because a wrong price on a dashboard is worse
than a missing one. A model id matches an entry when it is the entry's name, its `-latest`
alias, or a dated snapshot of it (`claude-sonnet-4-5-20250929`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.seams import TokenCounts

MILLION = 1_000_000
_SNAPSHOT = re.compile(r"-(\d{8}|latest)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, tokens: TokenCounts) -> float:
        return (
            tokens.input * self.input
            + tokens.output * self.output
            + tokens.cache_read * self.cache_read
            + tokens.cache_write * self.cache_write
        ) / MILLION


def _list(input: float, output: float) -> Price:
    """A list price: cache reads at a tenth of input, five-minute cache writes at 1.25 times."""
    return Price(input=input, output=output, cache_read=input * 0.1, cache_write=input * 1.25)


def _priced(input: float, output: float, *, cache_read: float, cache_write: float) -> Price:
    """A model whose cache prices are not the usual multiples of its input price."""
    return Price(input=input, output=output, cache_read=cache_read, cache_write=cache_write)


PRICES: dict[str, Price] = {
    # The 5 generation, from platform.claude.com's pricing and model pages (read 2026-12-06).
    "claude-fable-5-1": _priced(10.0, 50.0, cache_read=0.25, cache_write=12.5),
    "claude-mythos-5-1": _priced(10.0, 50.0, cache_read=0.25, cache_write=12.5),
    "claude-fable-5": _list(10.0, 50.0),
    "claude-mythos-5": _list(10.0, 50.0),
    "claude-opus-5-5": _priced(4.0, 20.0, cache_read=0.20, cache_write=5.0),
    "claude-opus-5": _list(5.0, 25.0),
    "claude-sonnet-5-5": _priced(2.0, 10.0, cache_read=0.10, cache_write=2.5),
    "claude-sonnet-5": _list(2.0, 10.0),
    # Haiku 5.5's price for a prompt up to 100,000 tokens; a longer one costs more.
    "claude-haiku-5-5": _priced(0.10, 0.50, cache_read=0.01, cache_write=0.125),
    "claude-opus-4-8": _list(5.0, 25.0),
    "claude-opus-4-7": _list(5.0, 25.0),
    "claude-opus-4-6": _list(5.0, 25.0),
    "claude-sonnet-4-6": _list(3.0, 15.0),
    "claude-opus-4-5": _list(5.0, 25.0),
    "claude-opus-4-1": _list(15.0, 75.0),
    "claude-opus-4": _list(15.0, 75.0),
    "claude-opus-4-0": _list(15.0, 75.0),
    "claude-sonnet-4-5": _list(3.0, 15.0),
    "claude-sonnet-4": _list(3.0, 15.0),
    "claude-sonnet-4-0": _list(3.0, 15.0),
    "claude-haiku-4-5": _list(1.0, 5.0),
    "claude-3-7-sonnet": _list(3.0, 15.0),
    "claude-3-5-sonnet": _list(3.0, 15.0),
    "claude-3-5-haiku": _list(0.8, 4.0),
    "claude-3-opus": _list(15.0, 75.0),
    "claude-3-haiku": _list(0.25, 1.25),
}
"""The models whose list price was published when this table was written (`claude-fable-5-2`
and `claude-mythos-5-2` are not in it: their price was not found where the others were read).
A model missing here adds tokens but no cost until its published price is added."""


def price_of(model: str, prices: dict[str, Price] | None = None) -> Price | None:
    """The entry `model` names exactly, as an alias or as a dated snapshot; else None."""
    table = PRICES if prices is None else prices
    found = table.get(model)
    if found is None:
        found = table.get(_SNAPSHOT.sub("", model))
    return found


def estimated_cost(
    model: str, tokens: TokenCounts, prices: dict[str, Price] | None = None
) -> float:
    """US dollars, 0.0 for a model without a known price."""
    price = price_of(model, prices)
    return 0.0 if price is None else price.cost(tokens)
