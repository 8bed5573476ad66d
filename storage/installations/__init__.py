"""Where a multi-workspace install keeps each workspace's tokens: slack-sdk's SQLAlchemy
installation and OAuth state stores, on the bot's own database (tables by migration 0008)."""

from __future__ import annotations

from storage.installations.schema import installation_metadata
from storage.installations.store import InstallationStores, OneTimeStateStore

__all__ = ["InstallationStores", "OneTimeStateStore", "installation_metadata"]
