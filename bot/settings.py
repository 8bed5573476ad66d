"""Configuration, read once at start from the environment and passed down (no globals)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/bot.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    database_url: str = Field(default=DEFAULT_DATABASE_URL, alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    slack_bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    anthropic_model: str = Field(default="claude-sonnet-4-5", alias="ANTHROPIC_MODEL")
    agent_dir: str | None = Field(default=None, alias="AGENT_DIR")
    port: int = Field(default=3000, alias="PORT")
