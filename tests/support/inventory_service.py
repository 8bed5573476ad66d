"""An inventory service stand-in with its own storage (a SQLite file apart from the engine's).

It behaves like a careful provider: a reservation and its receipt commit together, keyed by the
caller's idempotency key with a fingerprint of the payload. The same key and payload returns the
original receipt; the same key with another payload is a 409 and changes nothing. It can be told
to lose the response for a key (commit, then hold the reply past the caller's timeout), which is
the ambiguous timeout this whole mechanism exists for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class InventoryService:
    def __init__(self, path: Path, stock: dict[str, int]) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.lose_response: dict[str, float] = {}
        self.reserve_calls = 0
        with self._db() as db:
            db.execute("create table if not exists stock (sku text primary key, units integer)")
            db.execute(
                "create table if not exists receipts (key text primary key, fingerprint text, "
                "receipt text)"
            )
            db.execute(
                "create table if not exists reservations "
                "(id text primary key, sku text, units integer)"
            )
            db.executemany("insert or replace into stock values (?, ?)", stock.items())
        self.app = Starlette(
            routes=[
                Route("/reservations", self._reserve, methods=["POST"]),
                Route("/receipts/{key:path}", self._receipt, methods=["GET"]),
            ]
        )

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            yield db
        finally:
            db.close()

    # independent checks for tests ---------------------------------------------------------

    def stock(self, sku: str) -> int:
        with self._db() as db:
            return int(db.execute("select units from stock where sku = ?", (sku,)).fetchone()[0])

    def reservations(self) -> list[tuple[str, int]]:
        with self._db() as db:
            return [(r[0], r[1]) for r in db.execute("select sku, units from reservations")]

    def receipt(self, key: str) -> dict[str, Any] | None:
        with self._db() as db:
            row = db.execute("select receipt from receipts where key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    # HTTP ---------------------------------------------------------------------------------

    def _commit_reservation(self, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock, self._db() as db:
            db.execute("begin immediate")
            row = db.execute(
                "select fingerprint, receipt from receipts where key = ?", (key,)
            ).fetchone()
            if row is not None:
                db.execute("rollback")
                if row[0] != fingerprint:
                    return 409, {"error": "idempotency key reused with a different payload"}
                return 200, {**json.loads(row[1]), "replayed": True}
            units = db.execute("select units from stock where sku = ?", (body["sku"],)).fetchone()
            if units is None or units[0] < body["quantity"]:
                db.execute("rollback")
                return 422, {"error": "not enough stock"}
            reservation = f"res_{uuid.uuid4().hex[:8]}"
            receipt = {"reservation": reservation, "sku": body["sku"], "quantity": body["quantity"]}
            db.execute(
                "update stock set units = units - ? where sku = ?", (body["quantity"], body["sku"])
            )
            db.execute(
                "insert into reservations values (?, ?, ?)",
                (reservation, body["sku"], body["quantity"]),
            )
            db.execute(
                "insert into receipts values (?, ?, ?)", (key, fingerprint, json.dumps(receipt))
            )
            db.execute("commit")
            return 200, receipt

    async def _reserve(self, request: Request) -> JSONResponse:
        key = request.headers["idempotency-key"]
        body = await request.json()
        self.reserve_calls += 1
        status, payload = self._commit_reservation(key, body)
        hold = self.lose_response.get(key)
        if hold:
            await asyncio.sleep(hold)  # committed; the reply arrives after the caller gave up
        return JSONResponse(payload, status_code=status)

    async def _receipt(self, request: Request) -> JSONResponse:
        found = self.receipt(request.path_params["key"])
        return JSONResponse(
            found or {"error": "no such receipt"}, status_code=200 if found else 404
        )
