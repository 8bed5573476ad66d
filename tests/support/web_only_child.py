"""A child that opens the bot as a web process does, then prints whether the Anthropic SDK got
imported (`tests/bot/test_anthropic_config.py`): only a fresh interpreter can tell."""

from __future__ import annotations

import asyncio
import sys

from bot.app import open_bot
from bot.core.settings import Settings


async def main() -> None:
    bot = await open_bot(Settings())
    await bot.start()
    await bot.close()
    print("anthropic" in sys.modules)


if __name__ == "__main__":
    asyncio.run(main())
