"""No token, no access; the API off by default; tokens never in a log; the OpenAPI
description describes every route, and (checked on every answer of every API test, see
`tests.api.contract`) what the routes answer."""

from __future__ import annotations

import io
import json
import logging

import pytest
from pydantic import SecretStr

from agent import ScriptedModel
from bot.api import TokenError, parse_tokens
from bot.api.routes import ROUTES
from bot.core.settings import ConfigError, Settings
from tests.api.agents import AGENT
from tests.api.conftest import BY_USER, TOKENS, client
from tests.api.contract import Contract
from tests.bot.agents import SIMPLE

PATHS = [
    ("POST", "/sessions/s/turns"),
    ("GET", "/sessions/s/turns/t"),
    ("GET", "/sessions/s/events"),
    ("GET", "/sessions/s/pending"),
    ("POST", "/sessions/s/resume"),
    ("POST", "/sessions/s/confirmations/c"),
    ("POST", "/sessions/s/cancel"),
    ("POST", "/sessions/s/reset"),
    ("GET", "/grants"),
    ("DELETE", "/grants/g"),
]


async def test_no_token_or_a_wrong_one_is_a_401_before_anything_is_read(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    anonymous = clients(bot, "")
    for method, path in PATHS:
        await _refused(anonymous, method, path)
    assert await bot.turns("api:T0DEMO:s") == []


async def _refused(anonymous, method: str, path: str) -> None:
    missing = await anonymous.request(method, path, json={"text": "hi"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    for header in ("Bearer not-a-token-at-all-xyz", "Basic YWxpY2U6eA==", "Bearer", "bearer x"):
        wrong = await anonymous.request(
            method, path, json={"text": "hi"}, headers={"Authorization": header}
        )
        assert wrong.status_code == 401, header
    assert (
        'error="invalid_token"'
        in (
            await anonymous.request(
                method, path, headers={"Authorization": "Bearer not-a-token-at-all-xyz"}
            )
        ).headers["www-authenticate"]
    )


async def test_without_api_tokens_the_api_is_not_there(db_url, launch) -> None:
    bot = await launch(db_url, AGENT, ScriptedModel(SIMPLE))
    assert bot.bot.api is None
    async with client(bot.server.url) as http:
        headers = {"Authorization": f"Bearer {BY_USER['alice']}"}
        for method, path in [*PATHS, ("GET", "/openapi.json")]:
            answer = await http.request(method, path, json={"text": "hi"}, headers=headers)
            assert answer.status_code == 404, path
        assert (await http.get("/healthz")).status_code == 200


async def test_the_description_names_every_route_and_every_status_it_answers(
    db_url, api, clients, contract: Contract
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    async with client(bot.server.url) as http:
        served = (await http.get("/openapi.json")).json()
    assert served == json.loads(json.dumps(contract.doc))
    assert served["openapi"].startswith("3.1")
    described = {
        (method.upper(), path) for path, item in served["paths"].items() for method in item
    }
    assert {(method, path) for method, path, _ in ROUTES} <= described
    for path, item in served["paths"].items():
        for operation in item.values():
            assert "200" in operation["responses"] or "202" in operation["responses"], path
            if path != "/openapi.json":
                assert "401" in operation["responses"], path
    # A description that does not fit an answer fails the contract check.
    with pytest.raises(AssertionError, match="not documented"):
        contract.schema_for(served["paths"]["/sessions/{key}/reset"]["post"], 418)
    from jsonschema import ValidationError

    with pytest.raises(ValidationError):
        contract.validate({"$ref": "#/components/schemas/TurnOut"}, {"status": "completed"})


def test_malformed_api_tokens_stop_serve_without_quoting_a_token() -> None:
    secret = "s3cret-token-value-here"
    for raw in (
        "not json " + secret,
        json.dumps({secret: {"team": "T:1", "user": "U1"}}),
        json.dumps({"short": {"team": "T1", "user": "U1"}}),
        json.dumps({secret: {"team": "T1"}}),
        json.dumps({secret: {"team": "T1", "user": "U1", "role": "admin"}}),
        json.dumps([secret]),
    ):
        settings = Settings(
            SLACK_BOT_TOKEN="xoxb-1",
            SLACK_SIGNING_SECRET="x",
            ANTHROPIC_API_KEY="k",
            API_TOKENS=SecretStr(raw),
        )
        with pytest.raises(ConfigError) as refused:
            settings.require("serve")
        assert "API_TOKENS" in str(refused.value)
        assert secret not in str(refused.value)
        assert "short" not in str(refused.value)
        with pytest.raises(TokenError):
            parse_tokens(raw)
        assert secret in "".join(settings.secrets()) or "short" in "".join(settings.secrets())


def test_tokens_are_secrets_the_logs_scrub() -> None:
    from bot.core.logs import setup_logging

    settings = Settings(API_TOKENS=SecretStr(json.dumps(TOKENS)))
    assert set(TOKENS) <= set(settings.secrets())
    assert parse_tokens(settings.api_tokens) is not None
    assert parse_tokens(SecretStr("  ")) is None
    assert parse_tokens(None) is None
    assert BY_USER["alice"] not in repr(settings)
    root = logging.getLogger()
    kept, level = list(root.handlers), root.level
    written = io.StringIO()
    try:
        setup_logging(level="INFO", fmt="json", secrets=settings.secrets(), stream=written)
        logging.getLogger("bot.api").info("header was Bearer %s", BY_USER["alice"])
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept:
            root.addHandler(handler)
        root.setLevel(level)
    assert "header was Bearer" in written.getvalue()
    assert BY_USER["alice"] not in written.getvalue()


def test_the_description_is_valid_openapi_3_1() -> None:
    """Checked by a real validator (the OpenAPI 3.1 schema and its JSON Schema dialect), as a
    client generator would read it, not only by the shapes the contract test looks at."""
    from openapi_spec_validator import OpenAPIV31SpecValidator

    from bot.api.openapi import description

    served = json.loads(json.dumps(description()))
    errors = [error.message for error in OpenAPIV31SpecValidator(served).iter_errors()]
    assert errors == []
