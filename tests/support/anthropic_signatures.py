"""Thinking signatures as the stand-in mints and checks them: bound to the model that answered.

The real API signs every `thinking` block (its `signature`) and `redacted_thinking` block (its
`data`) opaquely, and on the families that bind thinking it checks the signature names a model
that may read it (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking;
https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5, "Thinking blocks are tied
to the model that produced them"). The stand-in's signature is opaque-looking but readable by
it: base64 of the model it answered as and the scripted value, so it can tell whose a block is.

The stand-in is stricter than the API here, on purpose: the API drops a block the model cannot
read without an error, and reads a fixed set of other models' blocks, while the stand-in answers
400 for any block not signed by the request's own model (or not signed by it at all), with the
wording the API uses for a block it will not take. An adapter that relied on the silent drop
would pay for thinking the model never reads and depend on which models read which; here it
fails the test that made it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from agent.models._families import family_of

_PREFIX = "EqS"
"""A fixed lead, so a minted signature is recognisable in a failing test's output."""


def sign(model: str, value: str) -> str:
    """The signature the stand-in gives a block `model` wrote (`value`: what the test scripted)."""
    raw = json.dumps({"model": model, "nonce": value}, separators=(",", ":")).encode()
    return _PREFIX + base64.urlsafe_b64encode(raw).decode()


def signer(signature: object) -> str | None:
    """The model a stand-in signature was minted for; None for anything else."""
    if not isinstance(signature, str) or not signature.startswith(_PREFIX):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(signature[len(_PREFIX) :].encode()))
    except ValueError:
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def signed_events(events: Iterable[tuple[str, dict[str, Any]]], model: str) -> Iterable[Any]:
    """A scripted reply's events with every thinking signature minted for `model`."""
    for name, data in events:
        if name == "content_block_delta" and data["delta"].get("type") == "signature_delta":
            delta = {**data["delta"], "signature": sign(model, data["delta"]["signature"])}
            data = {**data, "delta": delta}
        elif name == "content_block_start" and data["content_block"]["type"] == "redacted_thinking":
            block = {**data["content_block"], "data": sign(model, data["content_block"]["data"])}
            data = {**data, "content_block": block}
        yield name, data


def binding_problem(body: dict[str, Any]) -> str | None:
    """The 400 for a thinking block the request's model did not write, where its family binds
    thinking to the model; else None."""
    model = str(body.get("model", ""))
    if not family_of(model).thinking_bound:
        return None
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            kind = block.get("type")
            if kind not in ("thinking", "redacted_thinking"):
                continue
            signed = block.get("signature" if kind == "thinking" else "data")
            if signer(signed) != model:
                return (
                    f"messages.{i}.content.{j}: Invalid `signature` in `{kind}` block. The block "
                    f"was not produced by {model} (stand-in rule: thinking is bound to the model "
                    "that produced it)."
                )
    return None
