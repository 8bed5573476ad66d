"""Every answer the tests get from the API is checked against the served OpenAPI description:
its status must be documented for its route, and a JSON body must fit the documented schema.
`Contract.check` is an httpx response hook, so no test can see an answer the description does
not promise."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonschema

from bot.api.openapi import JSON, description


def _template(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")


@dataclass
class Contract:
    doc: dict[str, Any] = field(default_factory=description)
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    """(method, path template, status) of every answer checked."""
    validators: dict[str, jsonschema.Draft202012Validator] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Built before the test's loop runs: building one loads the metaschema (tens of ms,
        which the loop watchdog would rightly count against the bot)."""
        for name in self.doc["components"]["schemas"]:
            schema = {"$ref": f"#/components/schemas/{name}"}
            wrapped = {**schema, "components": self.doc["components"]}
            jsonschema.Draft202012Validator.check_schema(wrapped)
            validator = jsonschema.Draft202012Validator(wrapped)
            validator.is_valid({})  # resolves its references now
            self.validators[name] = validator

    def route(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        for template, item in self.doc["paths"].items():
            if _template(template).match(path) and method.lower() in item:
                return template, item[method.lower()]
        raise AssertionError(f"{method} {path} is not described")

    def schema_for(self, operation: dict[str, Any], status: int) -> dict[str, Any] | None:
        responses = operation["responses"]
        assert str(status) in responses, f"status {status} is not documented"
        content = responses[str(status)].get("content", {})
        return content.get(JSON, {}).get("schema")

    def validate(self, schema: dict[str, Any], value: Any) -> None:
        name = schema["$ref"].rsplit("/", 1)[-1]
        self.validators[name].validate(value)

    async def check(self, response: httpx.Response) -> None:
        request = response.request
        template, operation = self.route(request.method, request.url.path)
        self.seen.add((request.method, template, str(response.status_code)))
        schema = self.schema_for(operation, response.status_code)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return
        await response.aread()
        if schema is not None and schema:
            self.validate(schema, json.loads(response.content))
