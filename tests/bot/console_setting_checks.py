"""The operator console's setting check (see `tests.bot.setting_checks`): `CONSOLE_TOKENS`
turns the console on with those operators, each token is scrubbed from logs, a malformed value
stops `bot serve` naming the problem and never the token, and unset leaves the console off."""

from __future__ import annotations

import json

import pytest

from bot.core.settings import ConfigError, Settings
from tests.bot.setting_context import Ctx

ANA = "every-setting-console-ana-01"
ROOT = "every-setting-console-root-1"


async def console_tokens(ctx: Ctx) -> None:
    assert (await ctx.bot()).console is None  # unset: off
    ctx.set(
        CONSOLE_TOKENS=json.dumps(
            {ANA: {"name": "ana", "teams": ["T1"]}, ROOT: {"name": "root", "teams": None}}
        )
    )
    console = (await ctx.bot()).console
    assert console is not None
    ana, root = console.tokens.login(ANA), console.tokens.login(ROOT)
    assert ana is not None
    assert (ana.name, ana.teams) == ("ana", ("T1",))
    assert root is not None
    assert (root.name, root.teams) == ("root", None)
    assert console.tokens.login("not-a-console-token-at-all") is None
    assert {ANA, ROOT} <= set(Settings().secrets())
    Settings().require("serve")
    short = "abc"
    ctx.set(CONSOLE_TOKENS=json.dumps({short: {"name": "x"}}))
    with pytest.raises(ConfigError) as refused:
        Settings().require("serve")
    assert "CONSOLE_TOKENS: token #1 must be at least 16" in str(refused.value)
    assert f'"{short}"' not in str(refused.value)
