"""The Slack HTTP adapter: a Starlette request to Bolt and Bolt's answer back, with the checks
Slack's requests pass before Bolt sees them, so that no input is a 5xx (Slack retries a 5xx, so
bad input would fail again and again) and none is stored:
- a missing, malformed or stale timestamp or signature is a 401, decided before the body is read;
- a body that is not UTF-8, or (signed) not a JSON object, is a 400;
- a signed payload of a shape Slack never sends (`bot.slack.payload_shape`) is a 200 that does
  nothing.
Bolt's "no listener" 404 never reaches Slack either, which would only make it send the request
again. No answer repeats what the request held.

It knows nothing of the bot it serves beyond its Bolt app (`bot.app.SlackBot` wires it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from slack_bolt.adapter.starlette.async_handler import (
    to_async_bolt_request,
    to_starlette_response,
)
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from starlette.requests import Request
from starlette.responses import Response

from bot.slack.payload_shape import problem as payload_problem
from bot.slack.request_checks import (
    bolt_request_of,
    headers_well_formed,
    malformed,
    parse_payload,
    refused,
    utf8,
)

log = logging.getLogger(__name__)

PARSE_ON_LOOP_BYTES = 64 * 1024
"""Request bodies up to this size are parsed on the event loop; larger ones on a thread."""


async def events_response(
    request: Request,
    *,
    verifier: SignatureVerifier | None,
    bolt: AsyncApp,
    reached: Callable[[], None],
) -> Response:
    """Slack's requests, checked before Bolt sees them (see the module docstring): no input
    makes this a 5xx, which Slack would only send again; only a failure to queue the work
    is one, so that Slack does retry it: the database away is a 503 with `Retry-After`,
    logged once per outage (`bot.slack.unavailable`). `verifier`: None without a signing secret, and
    then no request is taken; `reached`: called when Bolt answered below 500, so the database
    is back if it was away (the bot says so once)."""
    headers = request.headers
    timestamp = headers.get("x-slack-request-timestamp")
    signature = headers.get("x-slack-signature")
    if not headers_well_formed(timestamp, signature):
        return refused()
    body = await request.body()
    text = utf8(body)
    if text is None:
        log.info("a request body that is not UTF-8: answered 400")
        return malformed()
    if verifier is None or not verifier.is_valid(text, timestamp, signature):
        return refused()
    if len(text) > PARSE_ON_LOOP_BYTES:
        # A body this large (Slack's are a few kB) takes tens of milliseconds to decode and
        # parse: off the loop, so one request cannot stall every other ack and heartbeat.
        payload = await asyncio.to_thread(parse_payload, text, headers.get("content-type"))
    else:
        payload = parse_payload(text, headers.get("content-type"))
    if payload is None:
        log.info("a signed request whose body is not a JSON object: answered 400")
        return malformed()
    reason = payload_problem(payload)
    bolt_request = None if reason else bolt_request_of(request, text)
    if bolt_request is None:
        reason = reason or "Bolt cannot read its ids"
        log.info("ignored a signed request Slack does not send (%s); answered 200", reason)
        return Response(status_code=200)
    response = to_starlette_response(await bolt.async_dispatch(bolt_request))
    if response.status_code < 500:
        reached()
    if response.status_code == 404:
        log.info("no listener for a signed request; answered 200 so Slack does not retry")
        return Response(status_code=200)
    return response


async def oauth_response(request: Request, bolt: AsyncApp) -> Response:
    """`/slack/install` and `/slack/oauth_redirect`: Bolt's OAuth flow (`bot.slack.oauth`); a
    404, as for any unknown path, unless the bot installs in many workspaces."""
    flow = bolt.oauth_flow
    if flow is None:
        return Response(status_code=404)
    bolt_request = to_async_bolt_request(request, b"")
    if request.url.path == flow.install_path:
        answer = await flow.handle_installation(bolt_request)
    else:
        answer = await flow.handle_callback(bolt_request)
    return to_starlette_response(answer)
