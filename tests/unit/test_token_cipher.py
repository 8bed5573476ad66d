"""The key list that seals installed workspaces' tokens: the first key seals, every key opens,
a value sealed under a key no longer listed is refused, and no error ever quotes a key."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.core.settings import ConfigError, Settings
from storage.installations.sealing import (
    SEALED_PREFIX,
    KeyListError,
    TokenCipher,
    UnreadableTokenError,
)

OLD = base64.urlsafe_b64encode(bytes(range(32))).decode()
NEW = base64.urlsafe_b64encode(bytes(range(100, 132))).decode()
"""Fixed keys (test ids name them: every xdist worker must collect the same ones)."""
TOKEN = "xoxb-1234567890123-1234567890123-abcdefghijklmnopqrstuvwx"


def test_a_sealed_token_shows_nothing_of_the_token_and_opens_again() -> None:
    cipher = TokenCipher([NEW])
    sealed = cipher.seal(TOKEN)
    assert sealed.startswith(SEALED_PREFIX)
    assert TOKEN not in sealed
    assert "xox" not in sealed
    assert cipher.open(sealed) == TOKEN
    assert cipher.seal(TOKEN) != sealed  # a fresh IV each time: equal tokens look unrelated


def test_the_first_key_seals_and_every_key_opens() -> None:
    before = TokenCipher([OLD]).seal(TOKEN)
    both = TokenCipher([NEW, OLD])
    assert both.open(before) == TOKEN
    assert not both.under_first_key(before)
    moved = both.reseal(before)
    assert both.under_first_key(moved)
    assert TokenCipher([NEW]).open(moved) == TOKEN


def test_a_token_sealed_under_a_key_rotated_out_is_refused_without_quoting_anything() -> None:
    before = TokenCipher([OLD]).seal(TOKEN)
    with pytest.raises(UnreadableTokenError) as refused:
        TokenCipher([NEW]).open(before)
    for secret in (OLD, NEW, TOKEN, before):
        assert secret not in str(refused.value)


def test_an_altered_sealed_value_is_refused_not_opened_as_something_else() -> None:
    cipher = TokenCipher([NEW])
    sealed = cipher.seal(TOKEN)
    flipped = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(UnreadableTokenError):
        cipher.open(flipped)


def test_a_token_stored_before_encryption_at_rest_opens_as_it_is() -> None:
    cipher = TokenCipher([NEW])
    assert not cipher.is_sealed(TOKEN)
    assert cipher.open(TOKEN) == TOKEN
    sealed = cipher.reseal(TOKEN)
    assert cipher.is_sealed(sealed)
    assert cipher.open(sealed) == TOKEN


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ("", "no key given"),
        (f"{NEW},", "key 2 of 2 is empty"),
        ("not-a-key", "key 1 of 1 is not a Fernet key"),
        (f"{NEW},{NEW[:-4]}", "key 2 of 2 is not a Fernet key"),
        (f"{NEW},{'A' * 44}", "key 2 of 2 is not a Fernet key"),  # base64, but 33 bytes
    ],
)
def test_a_malformed_key_list_is_named_by_position_never_by_value(keys: str, said: str) -> None:
    with pytest.raises(KeyListError) as refused:
        TokenCipher.from_list(keys)
    assert said in str(refused.value)
    for part in keys.split(","):
        if part:
            assert part not in str(refused.value)


def test_spaces_around_the_keys_are_allowed() -> None:
    sealed = TokenCipher.from_list(f" {NEW} , {OLD} ").seal(TOKEN)
    assert TokenCipher([NEW]).open(sealed) == TOKEN


# -- the setting ---------------------------------------------------------------------------------

CLIENT: dict[str, Any] = {
    "SLACK_CLIENT_ID": "1.2",
    "SLACK_CLIENT_SECRET": SecretStr("client-secret-0123456789abcdef"),
    "SLACK_SIGNING_SECRET": SecretStr("signing"),
    "ANTHROPIC_API_KEY": SecretStr("sk-test"),
    "_env_file": None,
}


def test_installs_in_many_workspaces_need_the_keys_to_start() -> None:
    chosen = Settings(**CLIENT)
    for command in ("serve", "worker", "clock"):
        with pytest.raises(ConfigError) as refused:
            chosen.require(command)
        assert "missing setting TOKEN_ENCRYPTION_KEYS" in str(refused.value)
        assert "\n" not in str(refused.value)


def test_a_malformed_key_refuses_to_start_in_one_line_without_the_key() -> None:
    bad = NEW[:-4]
    chosen = Settings(**CLIENT, TOKEN_ENCRYPTION_KEYS=SecretStr(f"{NEW},{bad}"))
    with pytest.raises(ConfigError) as refused:
        chosen.require("serve")
    message = str(refused.value)
    assert "TOKEN_ENCRYPTION_KEYS: key 2 of 2 is not a Fernet key" in message
    assert "\n" not in message
    assert bad not in message
    assert NEW not in message


def test_good_keys_start_and_are_scrubbed_from_logs() -> None:
    chosen = Settings(**CLIENT, TOKEN_ENCRYPTION_KEYS=SecretStr(f"{NEW}, {OLD}"))
    chosen.require("serve")
    assert {NEW, OLD} <= set(chosen.secrets())
    assert chosen.token_cipher().open(TokenCipher([OLD]).seal(TOKEN)) == TOKEN


def test_one_bot_token_needs_no_keys() -> None:
    chosen = Settings(
        SLACK_BOT_TOKEN=SecretStr("xoxb-1"),
        SLACK_SIGNING_SECRET=SecretStr("signing"),
        ANTHROPIC_API_KEY=SecretStr("sk-test"),
        _env_file=None,
    )
    chosen.require("serve")


def _serve(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`bot serve` as an operator starts it, installs in many workspaces configured."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ANTHROPIC_"))}
    base.pop("TOKEN_ENCRYPTION_KEYS", None)
    wanted = {
        "SLACK_CLIENT_ID": "1.2",
        "SLACK_CLIENT_SECRET": "client-secret-0123456789abcdef",
        "SLACK_SIGNING_SECRET": "signing",
        "ANTHROPIC_API_KEY": "sk-test",
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        cwd=tmp_path,  # no .env from the checkout is read
        env={**base, **wanted, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_bot_serve_refuses_to_start_without_keys_in_one_line(tmp_path: Path) -> None:
    done = _serve(tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "missing setting TOKEN_ENCRYPTION_KEYS" in done.stderr


def test_bot_serve_refuses_a_malformed_key_without_echoing_it(tmp_path: Path) -> None:
    bad = NEW[:-4]
    done = _serve(tmp_path, TOKEN_ENCRYPTION_KEYS=f"{bad},{OLD}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "TOKEN_ENCRYPTION_KEYS: key 1 of 2 is not a Fernet key" in done.stderr
    assert bad not in done.stderr + done.stdout
    assert OLD not in done.stderr + done.stdout
