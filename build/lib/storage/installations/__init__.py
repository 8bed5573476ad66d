"""Where a multi-workspace install keeps each workspace's tokens: slack-sdk's SQLAlchemy
installation and OAuth state stores, on the bot's own database (tables by migrations 0008 and
0009), the tokens encrypted at rest (`sealing`)."""

from __future__ import annotations

from storage.installations.schema import installation_metadata
from storage.installations.sealing import TokenCipher
from storage.installations.store import InstallationStores, OneTimeStateStore

__all__ = ["InstallationStores", "OneTimeStateStore", "TokenCipher", "installation_metadata"]
