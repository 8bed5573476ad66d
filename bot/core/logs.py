"""Structured logs: one JSON object per line, with every secret scrubbed before it is written.

Scrubbing happens in a filter on the root handler, so a token that ends up in a message by any
route (an SDK's debug line, an exception's text, an `extra` field) is replaced all the same. The
credential shapes are the engine's (`agent._redaction`), so a log line and a tool error the model
reads are scrubbed alike.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from agent import Redactor as TextRedactor

LOG_MIN_SECRET_CHARS = 6
"""Shorter than the engine's minimum: a log line mangled by over-redaction costs nobody much."""
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class Redactor(logging.Filter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.scrub = TextRedactor(secrets, min_length=LOG_MIN_SECRET_CHARS)

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
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | None) else str(value)
        if record.exc_text:
            out["error"] = record.exc_text
        return json.dumps(out, ensure_ascii=False)


def setup_logging(
    *, level: str = "INFO", fmt: str = "json", secrets: Iterable[str] = (), stream: Any = None
) -> Redactor:
    """Install one handler on the root logger (replacing any), returning its redactor."""
    handler = logging.StreamHandler(stream or sys.stderr)
    redactor = Redactor(secrets)
    handler.addFilter(redactor)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
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
