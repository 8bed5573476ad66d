"""The API's OpenAPI 3.1 description, served at `/openapi.json`.

The schemas are generated from the pydantic models the routes validate bodies with and build
answers from (`bot.api.schemas`); the paths and their status codes are written here, beside
the routes' table, and a test holds the two to each other (every route described, every status
a route answers documented, every answer valid against its schema).
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from bot.api.keys import KEY_PATTERN
from bot.api.schemas import ANSWERS, BODIES

REF = "#/components/schemas/{model}"
JSON = "application/json"
SSE = "text/event-stream"

ERRORS = {
    400: "Malformed path, query, header or body (not JSON, not UTF-8).",
    401: "No bearer token, or not a valid one (`WWW-Authenticate: Bearer`).",
    403: "Not this principal's to do (another person's answer, another speaker, another "
    "person's grant).",
    404: "No such session, turn or grant (another team's are never found).",
    409: "Not pending, answered already, a stale digest, or the session waits on an answer.",
    413: "The body is too large.",
    422: "The body does not fit the schema, the answer does not fit the request's, the "
    "engine will not issue the grant `allow_again` asks for, or refuses the `edits` (each "
    "field in `detail`); nothing applied.",
    500: "The agent's authorize_answer hook failed; nothing was applied.",
    503: "The database is unavailable; nothing was applied (retry).",
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": REF.format(model=name)}


STREAM = (
    " With `Accept: text/event-stream`: frames `id: <seq>` / `event: <type>` / `data: <json "
    "event>`; live deltas without an id; `: ping` comments while idle; when the server shuts "
    "down, a last `event: closing` frame (`reason`, `last_seq`): reconnect with Last-Event-ID."
)
"""What a streamed answer holds. A media type object has no `description` in OpenAPI 3.1, so
it is said in the response's own."""


def _answer(description: str, schema: str, *, stream: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {JSON: {"schema": _ref(schema)}}
    if stream:
        content[SSE] = {"schema": {"type": "string"}}
        description += STREAM
    return {"description": description, "content": content}


def _errors(*codes: int) -> dict[str, Any]:
    return {
        str(code): {"description": ERRORS[code], "content": {JSON: {"schema": _ref("ErrorOut")}}}
        for code in codes
    }


def _body(schema: str, *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": _ref(schema)}}}


KEY = {
    "name": "key",
    "in": "path",
    "required": True,
    "description": "The session, within the token's team.",
    "schema": {"type": "string", "pattern": f"^{KEY_PATTERN}$"},
}
SEQ_PARAMS = [
    {
        "name": "after",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 0},
        "description": "Events with a larger seq only.",
    },
    {
        "name": "Last-Event-ID",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
        "description": "A reconnecting SSE client's last id; wins over `after`.",
    },
]


def _paths() -> dict[str, Any]:
    return {
        "/sessions/{key}/turns": {
            "post": {
                "summary": "Start a turn (idempotent by turn id); JSON when it ends, or SSE.",
                "parameters": [
                    KEY,
                    {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}},
                    {
                        "name": "wait",
                        "in": "query",
                        "schema": {"type": "number", "minimum": 0},
                        "description": "Seconds to wait for the end (at most the server's).",
                    },
                    *SEQ_PARAMS[1:],
                ],
                "requestBody": _body("TurnBody"),
                "responses": {
                    "200": _answer("The turn ended or parked.", "TurnOut", stream=True),
                    "202": _answer("Still running after the wait: poll `poll`.", "TurnOut"),
                    **_errors(400, 401, 403, 409, 413, 422, 503),
                },
            }
        },
        "/sessions/{key}/turns/{turn_id}": {
            "get": {
                "summary": "A turn as it stands.",
                "parameters": [
                    KEY,
                    {
                        "name": "turn_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": _answer("The turn.", "TurnOut"),
                    **_errors(400, 401, 404, 503),
                },
            }
        },
        "/sessions/{key}/events": {
            "get": {
                "summary": "The durable event log after a seq (JSON), or it then live (SSE).",
                "parameters": [
                    KEY,
                    *SEQ_PARAMS,
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    },
                ],
                "responses": {
                    "200": _answer("Events in seq order.", "EventsOut", stream=True),
                    **_errors(400, 401, 404, 503),
                },
            }
        },
        "/sessions/{key}/pending": {
            "get": {
                "summary": "What the session waits on, and what this principal may answer.",
                "parameters": [KEY],
                "responses": {
                    "200": _answer("The parked request and pending confirmations.", "PendingOut"),
                    **_errors(400, 401, 404, 500, 503),
                },
            }
        },
        "/sessions/{key}/confirmations": {
            "get": {
                "summary": "The audit: the session's proposed writes and what became of each.",
                "parameters": [
                    KEY,
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                        "description": "At most this many, newest first (default 100).",
                    },
                ],
                "responses": {
                    "200": _answer(
                        "Each proposal with its answer, the call as proposed and as it ran.",
                        "ConfirmationsOut",
                    ),
                    **_errors(400, 401, 404, 503),
                },
            }
        },
        "/sessions/{key}/resume": {
            "post": {
                "summary": "Answer the parked request; the turn resumes.",
                "parameters": [KEY],
                "requestBody": _body("ResumeBody"),
                "responses": {
                    "202": _answer("Applied; the turn resumes (poll `poll`).", "ResumeOut"),
                    **_errors(400, 401, 403, 404, 409, 413, 422, 500, 503),
                },
            }
        },
        "/sessions/{key}/confirmations/{confirmation_id}": {
            "post": {
                "summary": "Approve or deny a proposed write; a turn acts on the answer.",
                "parameters": [
                    KEY,
                    {
                        "name": "confirmation_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": _body("ConfirmBody"),
                "responses": {
                    "202": _answer("Applied; `turn_id` acts on it.", "ConfirmOut"),
                    **_errors(400, 401, 403, 404, 409, 413, 422, 500, 503),
                },
            }
        },
        "/sessions/{key}/cancel": {
            "post": {
                "summary": "Cancel one turn, or (no turn id) every unfinished turn.",
                "parameters": [KEY],
                "requestBody": _body("CancelBody", required=False),
                "responses": {
                    "200": _answer("The turns this cancelled.", "CancelOut"),
                    **_errors(400, 401, 403, 404, 409, 413, 422, 500, 503),
                },
            }
        },
        "/sessions/{key}/reset": {
            "post": {
                "summary": "Archive the session's history; it starts again, same key.",
                "parameters": [KEY],
                "responses": {
                    "200": _answer("Applied.", "ResetOut"),
                    "202": _answer("Queued behind a running turn; it applies.", "ResetOut"),
                    **_errors(400, 401, 404, 503),
                },
            }
        },
        "/grants": {
            "get": {
                "summary": "The standing grants live now in this principal's workspace.",
                "responses": {
                    "200": _answer("Newest first.", "GrantsOut"),
                    **_errors(401, 503),
                },
            }
        },
        "/grants/{grant_id}": {
            "delete": {
                "summary": "Revoke a standing grant, as this principal (the granter, the person "
                "it covers, or whom the grants policy admits).",
                "parameters": [
                    {
                        "name": "grant_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": _answer(
                        "Revoked: the grant as stored (the first revocation stands).", "GrantOut"
                    ),
                    **_errors(400, 401, 403, 404, 500, 503),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This description.",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {JSON: {}}}},
            }
        },
    }


@functools.cache
def description() -> dict[str, Any]:
    _, top = models_json_schema(
        [(model, "validation") for model in BODIES]
        + [(model, "serialization") for model in ANSWERS],
        ref_template=REF,
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Durable agent turns",
            "version": "1",
            "description": "The bot's turns over HTTP; see docs/http-api.md in its repository.",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "schemas": top.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
