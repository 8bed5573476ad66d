"""One HTTP client factory for everything that talks to local servers from inside a running loop.

`httpx.AsyncClient()` builds its own TLS context and loads the CA bundle into it, 40-100 ms of
CPU on the calling thread (more on a busy machine), and imports httpcore with the first client.
Made inside a test's event loop, that is a block the loop watch rightly fails (it did, in CI,
for a client made in a polling loop). Every client here shares one context made at import;
nothing it talks to uses TLS, so the context is only there so that no client loads one.
"""

from __future__ import annotations

from typing import Any

import httpcore  # noqa: F401 - imported here, at import, instead of by the first client
import httpx

TLS = httpx.create_ssl_context()


def local_client(**options: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` that loads nothing when made (options are httpx's own)."""
    return httpx.AsyncClient(verify=TLS, **options)
