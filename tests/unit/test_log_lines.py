"""What a log line looks like: ISO timestamps, no terminal escapes, a level and format that are
checked, and an access log that never writes a query string."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.core.access_log import AccessLog
from bot.core.logs import setup_logging
from bot.core.settings import Settings, invalid_settings

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
RED = "\x1b[31m"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    setup_logging(level="DEBUG", fmt="json", stream=buffer)
    try:
        yield buffer
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_a_json_line_has_an_iso_utc_timestamp(captured: io.StringIO) -> None:
    logging.getLogger("bot.test").info("hello")
    [line] = lines(captured)
    assert ISO.match(str(line["ts"])), line["ts"]


def test_ansi_escapes_are_stripped_from_message_fields_and_errors(captured: io.StringIO) -> None:
    try:
        raise ValueError(f"{RED}boom\x1b[0m")
    except ValueError:
        logging.getLogger("bot.test").exception(
            "%sred\x1b[0m \x1b]8;;https://x\x07link\x1b]8;;\x07", RED, extra={"who": f"{RED}ana"}
        )
    [line] = lines(captured)
    assert line["msg"] == "red link"
    assert line["who"] == "ana"
    assert "boom" in str(line["error"])
    assert "\x1b" not in captured.getvalue()
    assert "\\u001b" not in captured.getvalue()


def test_the_text_format_has_an_iso_utc_timestamp() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    try:
        setup_logging(level="info", fmt="TEXT", stream=buffer)
        logging.getLogger("bot.test").warning("plain")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    stamp, level, rest = buffer.getvalue().split(" ", 2)
    assert ISO.match(stamp), stamp
    assert (level, rest.strip()) == ("WARNING", "bot.test: plain")


@pytest.mark.parametrize(("level", "fmt"), [("LOUD", "json"), ("INFO", "yaml")])
def test_setup_refuses_an_unknown_level_or_format(level: str, fmt: str) -> None:
    with pytest.raises(ValueError, match=r"LOUD|yaml"):
        setup_logging(level=level, fmt=fmt, stream=io.StringIO())


def test_settings_take_any_case_and_name_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "debug")
    monkeypatch.setenv("LOG_FORMAT", "Text")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert (settings.log_level, settings.log_format) == ("DEBUG", "text")
    monkeypatch.setenv("LOG_LEVEL", "verbose")
    monkeypatch.setenv("LOG_FORMAT", "xml")
    with pytest.raises(ValidationError) as err:
        Settings(_env_file=None)  # type: ignore[call-arg]
    said = invalid_settings(err.value)
    assert "LOG_LEVEL" in said
    assert "LOG_FORMAT" in said
    assert "verbose" not in said  # values are never echoed: one may be a credential


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")


async def _boom(request: Request) -> Response:
    raise RuntimeError("the app failed")


async def _stream(request: Request) -> Response:
    async def chunks():  # type: ignore[no-untyped-def]
        for part in (b"a", b"bb", b"ccc"):
            yield part

    return StreamingResponse(chunks(), media_type="text/plain")


def _app() -> Starlette:
    return Starlette(
        routes=[
            Route("/slack/oauth_redirect", _ok),
            Route("/healthz", _ok),
            Route("/boom", _boom),
            Route("/stream", _stream),
        ],
        middleware=[Middleware(AccessLog)],
    )


async def test_the_access_log_has_one_line_per_request_and_no_query(captured: io.StringIO) -> None:
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
        assert (
            await client.get("/slack/oauth_redirect?code=SECRET-CODE&state=s1")
        ).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/boom")).status_code == 500
        assert (await client.get("/stream")).text == "abbccc"
        assert (await client.get("/nowhere")).status_code == 404
    access = [line for line in lines(captured) if line["logger"] == "bot.access"]
    by_path = {str(line["path"]): line for line in access}
    assert len(access) == 5
    assert "SECRET-CODE" not in json.dumps(access)
    redirect = by_path["/slack/oauth_redirect"]
    assert (redirect["method"], redirect["status"], redirect["level"]) == ("GET", 200, "info")
    assert isinstance(redirect["duration_ms"], float)
    assert by_path["/healthz"]["level"] == "debug"  # probes do not bury people's requests
    assert (by_path["/boom"]["status"], by_path["/boom"]["level"]) == (500, "info")
    assert by_path["/stream"]["bytes"] == 6
    assert by_path["/nowhere"]["status"] == 404
