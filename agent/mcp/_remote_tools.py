"""A listed MCP tool as the agent's `Tool`: namespaced `<server>__<tool>`, remote (async), a read
only when the server annotates it `readOnlyHint: true` (or the declaration says so), otherwise a
write that needs confirmation and runs through `run_effect`.

A write's durable key is derived as a native write's is, from what a replay of the turn repeats:
the turn and the model's call id. The server gets it (scoped by session, so it is unique across
the server's callers) in the request's `_meta` under `IDEMPOTENCY_META_KEY`, and, for HTTP
servers that document one, in a header. Outcomes:

    isError result            -> read: the model reads the error; write: receipt failed
                                 (the server answered that it did not do it)
    server unreachable        -> tool error, nothing sent, no receipt
    timeout / connection lost / protocol error after the request was sent
                              -> read: tool error; write: receipt uncertain, never retried
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp.types import CallToolResult, TextContent
from mcp.types import Tool as ListedTool
from pydantic import BaseModel, ConfigDict

from agent._effects import EffectAuthority
from agent._errors import EffectNotAppliedError, ToolError
from agent._mcp_declarations import McpServer
from agent._tool_context import ToolContext
from agent._tools import Tool
from agent.mcp._connection import (
    IDEMPOTENCY_META_KEY,
    McpConnection,
    ServerUnavailableError,
    _describe,
)

log = logging.getLogger(__name__)

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


class _AnyInput(BaseModel):
    """Placeholder model: an MCP tool's arguments are checked against its JSON schema."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, kw_only=True)
class McpTool(Tool):
    """A `Tool` whose arguments are the server's JSON-schema object, passed through whole."""

    server: str = ""
    remote_name: str = ""

    def parse_input(self, raw: dict[str, Any]) -> dict[str, Any]:
        try:
            jsonschema.validate(raw, self.input_schema)
        except jsonschema.ValidationError as err:
            where = ".".join(str(p) for p in err.absolute_path) or "input"
            raise ToolError(f"invalid tool input: {where}: {err.message}"[:500]) from None
        except jsonschema.SchemaError:
            pass  # the server's schema is its own problem; it checks the call itself
        return dict(raw)

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        return self.fn(arguments, ctx)


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>`, with characters Anthropic's names refuse replaced, cut to 64."""
    return _INVALID.sub("_", f"{server}__{tool}")[:64]


def is_read(server: McpServer, listed: ListedTool) -> bool:
    rule = server.tools.get(listed.name)
    annotated = bool(listed.annotations and listed.annotations.read_only_hint is True)
    if rule is not None and rule.read_only is not None and rule.read_only != annotated:
        log.warning(
            "MCP server %s: tool %s is declared %s, overriding the server's annotation",
            server.name,
            listed.name,
            "read-only" if rule.read_only else "a write",
        )
        return rule.read_only
    return annotated


def make_mcp_tool(server: McpServer, connection: McpConnection, listed: ListedTool) -> McpTool:
    read = is_read(server, listed)
    rule = server.tools.get(listed.name)
    timeout = rule.timeout if rule is not None and rule.timeout else server.timeout
    name = tool_name(server.name, listed.name)

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            await connection.session()
        except ServerUnavailableError as err:
            raise ToolError(
                f"MCP server {server.name!r} is unavailable ({err}); not called"
            ) from None
        if read:
            try:
                result = await connection.call(listed.name, arguments, meta=None, seconds=timeout)
            except Exception as exc:
                raise ToolError(_failure(server, exc, timeout)) from None
            if result.is_error:
                raise ToolError(f"the tool failed: {_text(result, server.max_result_chars)}")
            return _value(result, server.max_result_chars)

        async def send(authority: EffectAuthority) -> Any:
            key = f"{ctx.session}/{authority.idempotency_key}"
            try:
                result = await connection.call(
                    listed.name, arguments, meta={IDEMPOTENCY_META_KEY: key}, seconds=timeout
                )
            except ServerUnavailableError as err:
                raise EffectNotAppliedError(f"MCP server {server.name!r}: {err}") from None
            except Exception as exc:
                raise RuntimeError(_failure(server, exc, timeout)) from None
            if result.is_error:
                raise EffectNotAppliedError(
                    f"the tool failed: {_text(result, server.max_result_chars)}"
                )
            return _value(result, server.max_result_chars)

        effect = await ctx.run_effect(f"{ctx.turn_id}:{ctx.call_id}", send, payload=arguments)
        return effect.value

    return McpTool(
        name=name,
        description=(listed.description or listed.title or listed.name)[:1024],
        fn=run,
        input_model=_AnyInput,
        is_async=True,
        context_param="ctx",
        effect="read" if read else "write",
        confirmation="none" if read else "required",
        input_schema=_schema(listed.input_schema),
        server=server.name,
        remote_name=listed.name,
    )


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k != "title"}
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def _failure(server: McpServer, exc: Exception, timeout: float) -> str:
    if isinstance(exc, TimeoutError) or "timed out" in str(exc):
        return f"MCP server {server.name!r} did not answer within {timeout:g}s"
    return f"MCP server {server.name!r}: {_describe(exc)}"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: {limit} of {len(text)} characters shown]"


def _text(result: CallToolResult, limit: int) -> str:
    parts = [
        block.text
        if isinstance(block, TextContent)
        else json.dumps(block.model_dump(mode="json", exclude_none=True))
        for block in result.content
    ]
    return _cut("\n".join(parts), limit)


def _value(result: CallToolResult, limit: int) -> Any:
    """Structured content when the server gives it and it fits, else the text blocks."""
    if result.structured_content is not None:
        encoded = json.dumps(result.structured_content)
        if len(encoded) <= limit:
            return result.structured_content
        return _cut(encoded, limit)
    return _text(result, limit)
