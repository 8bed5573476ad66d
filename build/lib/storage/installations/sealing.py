"""Installed workspaces' tokens, encrypted at rest with a key list (Fernet, `MultiFernet`).

A stored secret is `fernet:<Fernet token>`: AES-128-CBC with an HMAC-SHA256 over it, so a
value altered in the database fails to open instead of becoming another token. The first key
of the list seals; every key opens, so a new key is put first and the old one kept until
`bot db rotate-token-key` has re-sealed every row under the new one.

A value without the `fernet:` mark was written before encryption at rest (or by an older
process during a rolling deploy): it opens as it is, and the next start (or the rotation
command) seals it. A marked value that no key opens raises `UnreadableTokenError`; its
workspace is then not installed to the bot, which says why once (`store.py`).

Errors (none ever quotes a key or a token):

    ValueError
     └── KeyListError          the key list is empty or one entry is not a Fernet key
    Exception
     └── UnreadableTokenError  a sealed value no key of the list opens
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

SEALED_PREFIX = "fernet:"


class KeyListError(ValueError):
    """The key list cannot be used; the message says which entry and why, never its value."""


class UnreadableTokenError(Exception):
    """A sealed token that no key of the list opens: sealed under a key since removed."""

    def __init__(self) -> None:
        super().__init__(
            "a stored token is sealed under a key that is not in the key list (rotated out "
            "before `bot db rotate-token-key` re-sealed it?)"
        )


class TokenCipher:
    """Seals with the first key, opens with any."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise KeyListError("no key given (a comma-separated list of Fernet keys)")
        fernets: list[Fernet] = []
        for position, key in enumerate(keys, start=1):
            where = f"key {position} of {len(keys)}"
            if not key.strip():
                raise KeyListError(f"{where} is empty")
            try:
                fernets.append(Fernet(key.strip()))
            except (ValueError, TypeError):
                raise KeyListError(
                    f"{where} is not a Fernet key (32 url-safe base64-encoded bytes, 44 "
                    'characters; make one with `python -c "from cryptography.fernet import '
                    'Fernet; print(Fernet.generate_key().decode())"`)'
                ) from None
        self._first = fernets[0]
        self._all = MultiFernet(fernets)
        self.size = len(fernets)

    @classmethod
    def from_list(cls, text: str) -> TokenCipher:
        """`text`: keys separated by commas, the sealing one first (`TOKEN_ENCRYPTION_KEYS`)."""
        return cls(text.split(",") if text.strip() else [])

    @staticmethod
    def is_sealed(stored: str) -> bool:
        return stored.startswith(SEALED_PREFIX)

    def seal(self, plain: str) -> str:
        return SEALED_PREFIX + self._all.encrypt(plain.encode()).decode()

    def open(self, stored: str) -> str:
        """The secret in `stored`; a value written before encryption at rest, as it is."""
        if not self.is_sealed(stored):
            return stored
        try:
            return self._all.decrypt(stored.removeprefix(SEALED_PREFIX).encode()).decode()
        except InvalidToken:
            raise UnreadableTokenError() from None

    def under_first_key(self, stored: str) -> bool:
        """Sealed with the key that seals now: nothing for a rotation to do."""
        if not self.is_sealed(stored):
            return False
        try:
            self._first.decrypt(stored.removeprefix(SEALED_PREFIX).encode())
        except InvalidToken:
            return False
        return True

    def reseal(self, stored: str) -> str:
        """`stored` sealed under the first key (a plain value sealed for the first time)."""
        return self.seal(self.open(stored))


class SealedText(TypeDecorator[str]):
    """A column holding a secret: sealed as it is written, opened as it is read, so slack-sdk's
    store code runs unchanged over it. Raw SQL on the column sees only `fernet:…`."""

    impl = Text
    cache_ok = True

    def __init__(self, cipher: TokenCipher) -> None:
        super().__init__()
        self.cipher = cipher

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.cipher.seal(str(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.cipher.open(str(value))
