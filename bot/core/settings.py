"""Configuration, read once at start from the environment (and `.env`) and passed down.

Each command needs a different subset; `require(command)` names everything missing at once, so
an operator fixes their environment in one go instead of one error per restart. Secrets are
`SecretStr`: they print as `**********` in logs, reprs and tracebacks.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent import DEFAULT_CONTEXT_MESSAGES, DEFAULT_TOOL_CONCURRENCY, password_in_url
from agent.models import (
    DEFAULT_MODEL,
    DEFAULT_THINKING_DISPLAY,
    Requested,
    ThinkingDisplay,
    setting_problems,
    setting_warnings,
)
from bot.core.durations import AgeError, parse_age

if TYPE_CHECKING:
    from storage.installations.sealing import TokenCipher

log = logging.getLogger(__name__)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/bot.db"
DEFAULT_AGENT_DIR = Path(__file__).resolve().parents[2] / "examples" / "ops_agent"

NEEDS: dict[str, tuple[str, ...]] = {
    "serve": ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "ANTHROPIC_API_KEY"),
    "socket": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY"),
    "clock": ("SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY"),
    "worker": ("SLACK_BOT_TOKEN", "ANTHROPIC_API_KEY"),
}


PLACEHOLDER = "replace"
"""How `.env.example`'s placeholders begin (`REPLACE-with-the-xoxb-bot-token`): a value that
still does is no credential, so offline mode takes a copied `.env.example` as it is."""
CREDENTIALS = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "SLACK_CLIENT_ID",
    "SLACK_CLIENT_SECRET",
    "ANTHROPIC_API_KEY",
)
"""What connects the bot to a real Slack app or to Anthropic: never beside `BOT_OFFLINE`."""


class ConfigError(Exception):
    """Settings a command needs are missing; the message lists all of them."""


def invalid_settings(error: ValidationError) -> str:
    """A `Settings` validation error as one line, by setting name and rule: never the value,
    which may be a credential."""
    found = [
        f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
        for problem in error.errors()
    ]
    return f"invalid setting{'s' if len(found) > 1 else ''}: {'; '.join(found)}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str = Field(default=DEFAULT_DATABASE_URL, alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    redis_prefix: str = Field(default="bot", min_length=1, alias="REDIS_PREFIX")
    """Names everything the bot keeps in Redis: `<prefix>:turns` (stream), `<prefix>:workers`
    (its group), `<prefix>:cancel` and `<prefix>:events:<session>` (pub/sub channels). Bots
    sharing one Redis need different prefixes."""
    slack_bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    # -- installs in many workspaces (bot/slack/oauth.py): on with the client id and secret, and no
    # SLACK_BOT_TOKEN ---------------------------------------------------------------------
    slack_client_id: str | None = Field(default=None, alias="SLACK_CLIENT_ID")
    slack_client_secret: SecretStr | None = Field(default=None, alias="SLACK_CLIENT_SECRET")
    slack_scopes: str | None = Field(default=None, alias="SLACK_SCOPES")
    """Comma-separated bot scopes the install asks for; unset: the manifest's."""
    slack_install_redirect_uri: str | None = Field(default=None, alias="SLACK_INSTALL_REDIRECT_URI")
    """The app's redirect URL (`https://<host>/slack/oauth_redirect`), sent with the install
    and the code exchange; unset: Slack uses the one configured on the app."""
    token_encryption_keys: SecretStr | None = Field(default=None, alias="TOKEN_ENCRYPTION_KEYS")
    """Fernet keys, comma-separated, sealing the installed workspaces' tokens at rest: the
    first seals, every one opens (`storage.installations.sealing`). Required with the client
    id and secret."""
    slack_clock_team: str | None = Field(default=None, alias="SLACK_CLOCK_TEAM")
    """With installs in many workspaces: the workspace (`T…`) whose channels the agent's
    schedules post to; unset: `bot clock` fires no schedule (it still expires requests)."""
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    anthropic_model: str = Field(default=DEFAULT_MODEL, alias="ANTHROPIC_MODEL")
    anthropic_max_tokens: int | None = Field(default=None, ge=1, alias="ANTHROPIC_MAX_TOKENS")
    """Unset: the model family's own output budget (4,096 up to Claude 4.8; 16,000 or 32,000
    for the models that always think, whose thinking counts toward it; docs/models.md)."""
    anthropic_thinking: bool | None = Field(default=None, alias="ANTHROPIC_THINKING")
    """Unset: the model's default (off up to Claude 4.8, on from Claude 5). False on a model
    whose thinking is always on does nothing, and says so at start."""
    anthropic_thinking_budget: int | None = Field(default=None, alias="ANTHROPIC_THINKING_BUDGET")
    """Unset: thinking, when on, is adaptive (the model decides how much). Set: a manual budget,
    at least 1,024 and below `ANTHROPIC_MAX_TOKENS`, checked when a command starts, on the
    models that still take one (up to Claude 4.6; a start-up error on later ones, whose depth
    is `ANTHROPIC_EFFORT`). It also applies when an agent's own model settings turn thinking on."""
    anthropic_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = Field(
        default=None, alias="ANTHROPIC_EFFORT"
    )
    """`output_config.effort`: how much the model thinks, on the models that take it (from
    Claude 4.6); a start-up error on one that does not. Unset: the model's default."""
    anthropic_thinking_display: ThinkingDisplay = Field(
        default=DEFAULT_THINKING_DISPLAY, alias="ANTHROPIC_THINKING_DISPLAY"
    )
    """"summarized" (the default): the model's progress between tool calls shows in the reply's
    timeline, on models that send it only when asked (claude-opus-5-5, claude-fable-5-1, …);
    "omitted" keeps it hidden. Never sent to a model that does not take it; an agent's own
    `thinking_display` model setting wins."""
    anthropic_timeout: float = Field(default=600.0, gt=0, alias="ANTHROPIC_TIMEOUT_SECONDS")
    """Per request to the Messages API (the SDK's `timeout`); a stream counts as one request."""
    anthropic_max_retries: int = Field(default=2, ge=0, alias="ANTHROPIC_MAX_RETRIES")
    """The SDK's retries of a refused request, and the adapter's restarts of a broken stream."""
    anthropic_max_context_tokens: int | None = Field(
        default=None, ge=1, alias="ANTHROPIC_MAX_CONTEXT_TOKENS"
    )
    """Unset: no bound. Set: the oldest turns are left out of a request whose size (system
    prompt and tools included) would exceed it, as the API's token counting endpoint counts it
    (characters / 4 if it cannot be reached). A model that compacts is bounded by the API."""
    anthropic_long_cache: bool = Field(default=True, alias="ANTHROPIC_LONG_CACHE")
    """A request after which the turn may wait for a person is cached for an hour where the
    model takes it; false keeps the 5-minute default (a gateway that refuses `ttl`)."""
    anthropic_context_management: Literal["auto", "off"] = Field(
        default="auto", alias="ANTHROPIC_CONTEXT_MANAGEMENT"
    )
    """`auto`: a long thread is compacted by the API where the model takes it (the summary is
    stored in the thread, so it is never forgotten silently), else old tool results are cleared
    by the API; `ANTHROPIC_MAX_CONTEXT_TOKENS` still bounds models without compaction. `off`:
    only that local bound."""
    anthropic_compact_at_tokens: int | None = Field(
        default=None, ge=50_000, alias="ANTHROPIC_COMPACT_AT_TOKENS"
    )
    """Input tokens at which the API compacts a thread (at least 50,000); unset: the API's
    default, 150,000."""
    agent_dir: str | None = Field(default=None, alias="AGENT_DIR")
    host: str = Field(default="0.0.0.0", alias="HOST")
    port: int = Field(default=3000, alias="PORT")
    web_concurrency: int = Field(default=1, ge=1, alias="WEB_CONCURRENCY")
    """`bot serve` processes sharing `PORT`: one event loop acks at most a few hundred events a
    second, and the ack waits on two commits. Leave cores for the workers running turns."""

    run_turns: bool = Field(default=True, alias="RUN_TURNS")
    """False: `bot serve` only acks and queues turns; `bot worker` processes run and render them."""
    worker_poll: float = Field(default=0.25, alias="WORKER_POLL_SECONDS")
    context_messages: int = Field(default=DEFAULT_CONTEXT_MESSAGES, ge=1, alias="CONTEXT_MESSAGES")
    """How much of a thread's history a model that does not compact sees (see `agent.Runtime`);
    one that does sees the thread since its newest compaction."""
    tool_concurrency: int = Field(default=DEFAULT_TOOL_CONCURRENCY, ge=1, alias="TOOL_CONCURRENCY")
    """How many `async def` calls of one model reply run at once (1: one after another)."""
    replace_in_flight: bool = Field(default=True, alias="REPLACE_IN_FLIGHT")
    """A newer message in a thread supersedes the unfinished reply (never a parked approval)."""
    reset_command: str = Field(default="/agent-reset", alias="RESET_COMMAND")
    max_inbound_chars: int = Field(default=40_000, ge=1, alias="MAX_INBOUND_CHARS")
    """Longest message (in characters) the bot reads; a longer one starts no turn and gets a note
    in its thread saying so. Slack cuts a message's text at 40,000 characters, so the default
    refuses nothing a person can post there and stops only what Slack never sends (megabytes that
    would all go to the model). Lower it to bound what one message can cost: about four
    characters make a token."""
    stream_max_age: float = Field(default=270.0, alias="STREAM_MAX_AGE_SECONDS")
    """Slack ends a stream about five minutes after it starts; roll over a little before."""
    flush_interval: float = Field(default=1.0, alias="STREAM_FLUSH_SECONDS")
    flush_chars: int = Field(default=400, alias="STREAM_FLUSH_CHARS")
    cron_grace: float = Field(default=3600.0, alias="CRON_GRACE_SECONDS")
    """A fire missed by at most this much (the clock was down) still runs, once."""
    # -- retention: `bot prune`, and `bot clock` on a schedule (bot/core/retention.py) -------------
    prune_older_than: str | None = Field(default=None, alias="PRUNE_OLDER_THAN")
    """An age (`30d`, `12h`, `90m`, `2w`): `bot clock` prunes history that ended longer ago
    (finished turns' steps and events, archived generations); `bot prune`'s default. Unset: the
    clock prunes nothing."""
    prune_receipts_older_than: str | None = Field(default=None, alias="PRUNE_RECEIPTS_OLDER_THAN")
    """Settled effect receipts older than this go too. Unset (the default): receipts are kept,
    so a reused effect key is refused or replayed however old its first use."""
    prune_every: str = Field(default="1d", alias="PRUNE_EVERY")
    """How often the clock prunes (when `PRUNE_OLDER_THAN` is set), the first time at start."""
    prune_batch: int = Field(default=500, ge=1, alias="PRUNE_BATCH")
    """Turns per prune transaction."""

    def prune_ages(self) -> tuple[float, float | None, float] | None:
        """The prune ages in seconds (history, receipts or None, how often), or None when
        `PRUNE_OLDER_THAN` is unset; raises `AgeError` for an age it cannot read. Read here, in
        the order `bot.core.retention.Retention.from_settings` takes them, so checking the settings
        needs nothing of the retention job (which imports this module)."""
        if not self.prune_older_than:
            return None
        receipts = self.prune_receipts_older_than
        return (
            parse_age(self.prune_older_than, name="PRUNE_OLDER_THAN"),
            parse_age(receipts, name="PRUNE_RECEIPTS_OLDER_THAN") if receipts else None,
            parse_age(self.prune_every, name="PRUNE_EVERY"),
        )

    def _retention_problems(self) -> list[str]:
        try:
            self.prune_ages()
        except AgeError as err:
            return [str(err)]
        return []

    # ------------------------------------------------------------------------------------------
    api_tokens: SecretStr | None = Field(default=None, alias="API_TOKENS")
    """The HTTP turn API's bearer tokens, a JSON object mapping each token to the principal it
    speaks and answers as: `{"<token>": {"team": "T1", "user": "U1", "enterprise": null}}`.
    Unset or empty: the API is off and its routes answer 404 (see `bot.api.auth`)."""
    api_turn_wait: float = Field(default=30.0, ge=0, alias="API_TURN_WAIT_SECONDS")
    """How long `POST /sessions/{key}/turns` waits for the turn to end or park before it
    answers 202 with where to poll; a request's `?wait=` may ask for less."""
    api_heartbeat: float = Field(default=15.0, gt=0, alias="API_HEARTBEAT_SECONDS")
    """Seconds between `: ping` comments on an idle event stream, so proxies keep it open."""
    api_poll: float = Field(default=1.0, gt=0, alias="API_POLL_SECONDS")
    """How often an event stream reads the durable log for events it was not told of live (a
    turn another process runs without Redis, a relayed event Redis dropped)."""
    offline: bool = Field(default=False, alias="BOT_OFFLINE")
    """`bot serve` with a Slack stand-in in the process and the scripted model, for a first run
    with no workspace and no key (`bot.cli.offline`); refused beside real credentials or production
    settings (`_offline_problems`). `bot serve --offline` is the same."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        default="INFO", alias="LOG_LEVEL"
    )
    log_format: Literal["json", "text"] = Field(default="json", alias="LOG_FORMAT")
    """`json`: one object per line (ISO `ts`, `level`, `logger`, `msg`, fields); `text`: for a
    terminal. Either way secrets are scrubbed and ANSI escapes stripped."""
    # -- seeing inside (docs/observability.md) ---------------------------------------------------
    metrics_port: int | None = Field(default=None, ge=1, le=65535, alias="METRICS_PORT")
    """`bot worker`, `bot clock`, `bot socket`: serve `/metrics`, `/healthz` and `/readyz` on
    this port. Unset: they serve none. `bot serve` has them on `PORT` already."""
    metrics_host: str = Field(default="0.0.0.0", alias="METRICS_HOST")
    metrics_token: SecretStr | None = Field(default=None, alias="METRICS_TOKEN")
    """Set: `/metrics` answers only `Authorization: Bearer <token>`. Unset: anyone who can reach
    the port may scrape it (put it behind the network, as Prometheus usually is)."""
    console_tokens: SecretStr | None = Field(default=None, alias="CONSOLE_TOKENS")
    """The operator console's logins, a JSON object mapping each token to its operator:
    `{"<token>": {"name": "ana", "teams": ["T1"]}}` (`teams` null or absent: every workspace).
    Unset or empty: `/console` answers 404 (`bot.console.tokens`)."""
    capture_content: bool = Field(
        default=False, alias="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    )
    """True: spans carry the model's input and output messages and tool arguments and results
    (scrubbed of secrets). False, the default: no content in any span."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _any_case_format(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @property
    def oauth(self) -> bool:
        """Installs in many workspaces: the client id and secret are set and no single bot
        token is (both set is a start-up error, `_oauth_problems`)."""
        return (
            self._present("SLACK_CLIENT_ID")
            and self._present("SLACK_CLIENT_SECRET")
            and not self._present("SLACK_BOT_TOKEN")
        )

    def install_scopes(self) -> list[str]:
        from bot.slack.scopes import install_scopes

        if self.slack_scopes is None or not self.slack_scopes.strip():
            return install_scopes()
        return [scope.strip() for scope in self.slack_scopes.split(",") if scope.strip()]

    def _needs(self, command: str) -> tuple[str, ...]:
        """In OAuth mode the client id and secret stand in for the bot token."""
        needs = NEEDS.get(command, ())
        if not (self.oauth and command in ("serve", "clock", "worker")):
            return needs
        swap = ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "TOKEN_ENCRYPTION_KEYS")
        return tuple(n for need in needs for n in (swap if need == "SLACK_BOT_TOKEN" else (need,)))

    def _oauth_problems(self, command: str) -> list[str]:
        """Which way the bot authenticates is decided once, loudly: never a silent pick."""
        token = self._present("SLACK_BOT_TOKEN")
        client = [n for n in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET") if self._present(n)]
        if token and client:
            return [
                f"SLACK_BOT_TOKEN and {' and '.join(client)} are both set: set SLACK_BOT_TOKEN "
                "for one workspace, or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET to install in "
                "many, not both"
            ]
        if len(client) == 1 and not token:
            other = "SLACK_CLIENT_SECRET" if client[0] == "SLACK_CLIENT_ID" else "SLACK_CLIENT_ID"
            return [f"{client[0]} is set without {other}: installs in many workspaces need both"]
        if self.oauth and command == "socket":
            return [
                "`bot socket` serves one workspace (SLACK_BOT_TOKEN); installing in many "
                "workspaces needs `bot serve` (its /slack/install and /slack/oauth_redirect)"
            ]
        return []

    def require(self, command: str) -> None:
        """Raise `ConfigError` listing every setting `command` needs and lacks, and every value
        it would only find wrong later (at the first turn, in front of a user)."""
        if self.offline:
            self._require_offline(command)
            return
        needs = self._needs(command)
        missing = [name for name in needs if not self._present(name)]
        problems = self._placeholder_problems()
        problems += self._anthropic_problems() if "ANTHROPIC_API_KEY" in needs else []
        problems += self._retention_problems() if command == "clock" else []
        if "TOKEN_ENCRYPTION_KEYS" in needs and "TOKEN_ENCRYPTION_KEYS" not in missing:
            problems += self._token_key_problems()
        if command in NEEDS:  # each opens the bot, and with it the API's token table
            problems += self._api_problems() + self._console_problems()
            problems += self._oauth_problems(command)
        if not (missing or problems):
            return
        parts = []
        if missing:
            parts.append(
                f"missing setting{'s' if len(missing) > 1 else ''} {', '.join(missing)}. Set "
                f"{'them' if len(missing) > 1 else 'it'} in the environment or in .env"
            )
        parts += problems
        raise ConfigError(
            f"`bot {command}` cannot start: {'; '.join(parts)} (see the configuration "
            "table in docs/operations.md)."
        )

    def _require_offline(self, command: str) -> None:
        problems = self._offline_problems(command) + self._api_problems()
        problems += self._console_problems()
        if problems:
            raise ConfigError(
                f"`bot {command}` cannot run offline (BOT_OFFLINE=true or --offline): "
                f"{'; '.join(problems)}."
            )

    def _offline_problems(self, command: str) -> list[str]:
        """Offline mode is for a machine with nothing real on it: anything that would let its
        scripted turns reach a real workspace, a real model, or a shared database and its
        workers (which would run them with the real model) is refused, by name, never by value."""
        if command != "serve":
            return [f"offline mode is `bot serve` only (`bot {command}` has no stand-in)"]
        problems = []
        real = [name for name in CREDENTIALS if self.credential(name)]
        if real:
            problems.append(
                f"{', '.join(real)} {'are' if len(real) > 1 else 'is'} set: offline mode talks "
                "to a Slack stand-in and a scripted model only; unset "
                f"{'them' if len(real) > 1 else 'it'}, or unset BOT_OFFLINE"
            )
        if not self.database_url.startswith("sqlite"):
            problems.append("DATABASE_URL is not SQLite: offline mode keeps to a local file")
        if self.redis_url:
            problems.append("REDIS_URL is set: other processes would take offline turns")
        if not self.run_turns:
            problems.append("RUN_TURNS=false: no worker can reach the in-process stand-in")
        if self.web_concurrency != 1:
            problems.append("WEB_CONCURRENCY must be 1: the stand-in lives in one process")
        return problems

    def placeholders(self) -> list[str]:
        """The credentials still holding a placeholder of `.env.example`, by name."""
        return [name for name in CREDENTIALS if self._present(name) and not self.credential(name)]

    def _placeholder_problems(self) -> list[str]:
        """A `.env` copied from the example and not filled in is said at start, by name: the
        alternative is a bot that starts and fails at its first call to Slack or Anthropic."""
        left = self.placeholders()
        if not left:
            return []
        return [
            f"{', '.join(left)} still hold{'s' if len(left) == 1 else ''} .env.example's "
            "placeholder: put the real value in .env, or unset it"
        ]

    def credential(self, alias: str) -> bool:
        """Set to something other than a placeholder of `.env.example`."""
        if not self._present(alias):
            return False
        value = next(
            getattr(self, name)
            for name, info in type(self).model_fields.items()
            if info.alias == alias
        )
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        return not text.strip().lower().startswith(PLACEHOLDER)

    def anthropic_request(self) -> Requested:
        """What the `ANTHROPIC_*` settings ask of `ANTHROPIC_MODEL`, for its family's rules."""
        return Requested(
            model=self.anthropic_model,
            thinking=self.anthropic_thinking,
            budget=self.anthropic_thinking_budget,
            effort=self.anthropic_effort,
            max_tokens=self.anthropic_max_tokens,
        )

    def _anthropic_problems(self) -> list[str]:
        """What `ANTHROPIC_MODEL`'s family would refuse (`agent.models.setting_problems`), and,
        logged once, what it accepts but ignores; values only, never the key."""
        for warning in setting_warnings(self.anthropic_request()):
            log.warning("%s", warning)
        return setting_problems(self.anthropic_request())

    def _api_problems(self) -> list[str]:
        """A malformed `API_TOKENS` is said at start, by what is wrong, never by a token."""
        from bot.api.auth import TokenError, parse_tokens

        try:
            parse_tokens(self.api_tokens)
        except TokenError as err:
            return [f"API_TOKENS: {err}"]
        return []

    def _console_problems(self) -> list[str]:
        """A malformed `CONSOLE_TOKENS` is said at start, by what is wrong, never by a token."""
        from bot.console.tokens import ConsoleTokenError, parse_console_tokens

        try:
            parse_console_tokens(self.console_tokens)
        except ConsoleTokenError as err:
            return [f"CONSOLE_TOKENS: {err}"]
        return []

    def _token_key_problems(self) -> list[str]:
        """Said by which key is wrong and how, never by the key."""
        try:
            self.token_cipher()
        except ConfigError as err:
            return [str(err)]
        return []

    def token_cipher(self) -> TokenCipher:
        """What seals and opens the installed workspaces' tokens; `ConfigError` when the keys
        are missing or one is not a Fernet key."""
        from storage.installations.sealing import KeyListError, TokenCipher

        keys = self.token_encryption_keys
        try:
            return TokenCipher.from_list(keys.get_secret_value() if keys else "")
        except KeyListError as err:
            raise ConfigError(f"TOKEN_ENCRYPTION_KEYS: {err}") from None

    def _present(self, alias: str) -> bool:
        for name, info in type(self).model_fields.items():
            if info.alias == alias:
                value = getattr(self, name)
                if isinstance(value, SecretStr):
                    return bool(value.get_secret_value().strip())
                return bool(value)
        return False

    def agent_path(self) -> Path:
        return Path(self.agent_dir) if self.agent_dir else DEFAULT_AGENT_DIR

    def secrets(self) -> list[str]:
        """Values that must never reach a log line: the credentials, and the passwords in the
        database and Redis URLs (a driver's error may quote them on their own)."""
        found = [
            password
            for password in (password_in_url(self.database_url), password_in_url(self.redis_url))
            if password
        ]
        for value in (
            self.slack_bot_token,
            self.slack_signing_secret,
            self.slack_app_token,
            self.slack_client_secret,
            self.anthropic_api_key,
        ):
            if value is not None and value.get_secret_value():
                found.append(value.get_secret_value())
        keys = self.token_encryption_keys
        if keys is not None:
            found += [k.strip() for k in keys.get_secret_value().split(",") if k.strip()]
        from bot.core.token_tables import token_secrets

        found += token_secrets(self.api_tokens) + token_secrets(self.console_tokens)
        if self.metrics_token is not None and self.metrics_token.get_secret_value().strip():
            found.append(self.metrics_token.get_secret_value().strip())
        return found
