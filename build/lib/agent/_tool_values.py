"""What every part of a tool call shares, in a module that imports no other part of it: the kinds
a tool is declared with, its result made plain JSON, and an error made text fit for the model.

`tools`, `consent`, `effects`, `facts` and the turn loop all need these; kept in `tools`, they
made each of those import it and it import them back (through `tool_context`).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from agent._redaction import Redactor, is_database_error

Effect = Literal["read", "write"]
Confirmation = Literal["none", "required", "capability"]

MAX_ERROR_CHARS = 2000
DATABASE_ERROR = "a database error; details are in the logs"
SHAPES_ONLY = Redactor()
"""Scrubs the well-known credential shapes; a runtime adds the values it was configured with."""


def describe_error(exc: BaseException, *, redact: Callable[[str], str] = SHAPES_ONLY) -> str:
    """`Class: message` (plain `Exception` keeps only the message), never a stack, scrubbed of
    secrets before it is cut (a cut secret's head would match nothing). A database error is only
    its class: its SQL and parameters are for the log (see `database_error_detail`)."""
    if is_database_error(exc):
        text = f"{type(exc).__name__}: {DATABASE_ERROR}"
    elif isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        ]
        text = "ValidationError: invalid tool input: " + "; ".join(parts)
    else:
        message = str(exc)
        text = message if type(exc) is Exception else f"{type(exc).__name__}: {message}"
    return redact(text)[:MAX_ERROR_CHARS]


def database_error_detail(exc: BaseException, *, redact: Callable[[str], str] = SHAPES_ONLY) -> str:
    """What the model is not shown of a database error, for the operator's log, scrubbed too."""
    return redact("".join(traceback.format_exception(exc)))


def to_json_value(value: Any) -> Any:
    """Normalise a tool's return to plain JSON now, so what the model reads is what was stored."""
    plain = to_jsonable_python(value)
    json.dumps(plain)
    return plain
