"""Structured logs: one JSON object per line, with every secret scrubbed before it is written.

Scrubbing happens in a filter on the root handler, so a token that ends up in a message by any
route (an SDK's debug line, an exception's text, an `extra` field) is replaced all the same. The
credential shapes are the engine's (`agent._redaction`), so a log line and a tool error the model
reads are scrubbed alike.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from agent import Redactor as TextRedactor

LOG_MIN_SECRET_CHARS = 6
"""Shorter than the engine's minimum: a log line mangled by over-redaction costs nobody much."""
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("json", "text")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and the two-byte
escapes: everything a terminal would act on instead of printing."""


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def iso_utc(created: float) -> str:
    """`2026-12-06T02:16:00.123Z`: a record's time as log stores read it."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Redactor(logging.Filter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = list(secrets)
        self.scrub = TextRedactor(self.secrets, min_length=LOG_MIN_SECRET_CHARS)

    def add(self, secrets: Iterable[str]) -> None:
        """Scrub these too: secrets known only once the agent is assembled (an MCP server's
        header or environment values), after logging was set up."""
        self.secrets += [value for value in secrets if value not in self.secrets]
        self.scrub = TextRedactor(self.secrets, min_length=LOG_MIN_SECRET_CHARS)

    def filter(self, record: logging.LogRecord) -> bool:
        message = self.scrub(record.getMessage())
        record.msg, record.args = message, None
        if record.exc_info:
            record.exc_text = self.scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                record.__dict__[key] = self.scrub(value)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": iso_utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": strip_ansi(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                plain = value if isinstance(value, int | float | bool | None) else str(value)
                out[key] = strip_ansi(plain) if isinstance(plain, str) else plain
        if record.exc_text:
            out["error"] = strip_ansi(record.exc_text)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(
    *, level: str = "INFO", fmt: str = "json", secrets: Iterable[str] = (), stream: Any = None
) -> Redactor:
    """Install one handler on the root logger (replacing any), returning its redactor.

    `level` in any case, `fmt` `json` or `text`; anything else is a `ValueError` naming the
    choices (settings validate them first; this guards the other callers)."""
    if level.upper() not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    if fmt.lower() not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    fmt = fmt.lower()
    handler = logging.StreamHandler(stream or sys.stderr)
    redactor = Redactor(secrets)
    handler.addFilter(redactor)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter(
            "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The SDKs log request bodies at DEBUG; keep them at INFO or above unless asked.
    for noisy in ("slack_sdk", "slack_bolt", "aiohttp", "httpx", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))
    return redactor


def scrub_also(secrets: Iterable[str]) -> None:
    """Add `secrets` to every redactor `setup_logging` installed on the root logger."""
    wanted = list(secrets)
    if not wanted:
        return
    for handler in logging.getLogger().handlers:
        for found in handler.filters:
            if isinstance(found, Redactor):
                found.add(wanted)
