"""Durable external effects: a keyed write with a receipt committed before it runs.

A timeout is neither proof that nothing happened nor permission to do it again. So a receipt is
committed as `prepared` before the provider is called; only a provider that proves nothing was
applied (`EffectNotAppliedError`) makes it `failed` and retryable; any other failure, or a
`prepared` receipt found later (the process died mid-call), makes it `uncertain`, and no code path
calls the provider for that key again until a person (or a `reconcile` lookup at the provider)
settles it. A call cut off by a shutdown, a park or a cancel is uncertain too, and the
interruption propagates unchanged. The key is deduplicated across turns of the session, not
merely within a turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent._errors import (
    EffectConflictError,
    EffectNotAppliedError,
    EffectUncertainError,
    ToolError,
)
from agent._hitl_capability_confirmation import Consent
from agent._messages import JsonValue
from agent._signals import CancellationSignal
from agent._tool_values import Effect as EffectKind
from agent._tool_values import to_json_value
from agent._turn_metering import TurnWatch
from agent.seams import Lease, Ledgers, ReceiptRecord, ReceiptStatus, SessionStore

log = logging.getLogger(__name__)

MAX_RECEIPT_ERROR_CHARS = 500


@dataclass(frozen=True, kw_only=True)
class EffectAuthority:
    """What the provider call gets: the key to send as its idempotency key, the receipt it is
    recorded under, and the turn's cancellation signal. Namespacing the key for a provider with a
    global idempotency space is the host's job."""

    idempotency_key: str
    receipt_id: str
    signal: CancellationSignal


@dataclass(frozen=True, kw_only=True)
class Effect:
    value: JsonValue
    receipt: ReceiptRecord


EffectFn = Callable[[EffectAuthority], Awaitable[Any]]
ReconcileFn = Callable[[EffectAuthority], Awaitable[Any]]


def payload_fingerprint(payload: Any) -> str:
    canonical = json.dumps(to_json_value(payload), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _uncertain(key: str, receipt_id: str) -> EffectUncertainError:
    return EffectUncertainError(
        f"the outcome of {key} is uncertain: the write may or may not have happened at the "
        f"provider, so it was not retried. A person must check and resolve receipt {receipt_id} "
        "(bot receipts list --status uncertain)."
    )


class EffectScope(Protocol):
    """What effects need of the turn they run in (the turn loop's `TurnEnv` has it): the store
    and the lease to write receipts under, the clock, the secret scrubber for error texts, and
    the run's watch (an effect answered by its receipt makes a deduplicated call)."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def lease(self) -> Lease: ...

    @property
    def ttl(self) -> float: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def redact(self) -> Callable[[str], str]: ...

    @property
    def watch(self) -> TurnWatch: ...


class DeclaredTool(Protocol):
    """What effects need of the tool that runs them (an `agent._tools.Tool` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def effect(self) -> EffectKind: ...


class EffectCoordinator:
    """One tool call's access to durable effects."""

    def __init__(
        self,
        env: EffectScope,
        *,
        session: str,
        turn_id: str,
        step_id: str,
        tool: DeclaredTool,
        call_input: dict[str, Any],
        signal: CancellationSignal,
        consent: Consent | None = None,
    ) -> None:
        self._env = env
        self._consent = consent
        self._session = session
        self._turn_id = turn_id
        self._step_id = step_id
        self._tool = tool
        self._call_input = call_input
        self._signal = signal
        self.used = False

    async def run(
        self,
        key: str,
        fn: EffectFn,
        payload: Any = None,
        *,
        reconcile: ReconcileFn | None = None,
    ) -> Effect:
        if self._tool.effect != "write":
            raise ToolError(
                f"run_effect: tool {self._tool.name!r} is not declared effect='write'; declare "
                "it so the write is confirmed and coordinated"
            )
        if self._consent is not None:
            # confirmation="capability": the tool's own check of the answer is the only consent
            self._consent.require_checked()
        if not key:
            raise ToolError("run_effect: the effect key must not be empty")
        self.used = True
        store, env = self._env.store, self._env
        full_key = f"{self._tool.name}:{key}"
        fingerprint = payload_fingerprint(self._call_input if payload is None else payload)
        existing = await store.get_receipt(self._session, full_key)
        if existing is not None:
            if existing.fingerprint != fingerprint:
                raise EffectConflictError(
                    f"effect key {full_key} was used before with a different payload; nothing "
                    "was sent. Use a new business operation id for a different write."
                )
            if existing.status == ReceiptStatus.COMPLETED:
                self._env.watch.tool_deduplicated(self._step_id)
                return Effect(value=existing.value, receipt=existing)
            if existing.status in (ReceiptStatus.PREPARED, ReceiptStatus.UNCERTAIN):
                return await self._recover(existing, reconcile)
        receipt = await store.prepare_receipt(
            env.lease,
            ReceiptRecord(
                session=self._session,
                key=full_key,
                receipt_id=uuid.uuid4().hex,
                fingerprint=fingerprint,
                status=ReceiptStatus.PREPARED,
                turn_id=self._turn_id,
                step_id=self._step_id,
                created_at=env.clock(),
                updated_at=env.clock(),
            ),
            env.ttl,
            env.clock(),
        )
        return await self._call(receipt, fn)

    def _error(self, text: str) -> str:
        """A receipt's error is stored and shown to operators: scrubbed, then cut."""
        return self._env.redact(text)[:MAX_RECEIPT_ERROR_CHARS]

    def _authority(self, receipt: ReceiptRecord) -> EffectAuthority:
        return EffectAuthority(
            idempotency_key=receipt.key, receipt_id=receipt.receipt_id, signal=self._signal
        )

    async def _settle(
        self,
        receipt: ReceiptRecord,
        status: ReceiptStatus,
        *,
        value: JsonValue = None,
        error: str | None = None,
        from_statuses: tuple[ReceiptStatus, ...] = (ReceiptStatus.PREPARED,),
    ) -> ReceiptRecord:
        return await self._env.store.settle_receipt(
            self._session,
            receipt.key,
            receipt.receipt_id,
            status,
            value=value,
            error=error,
            from_statuses=from_statuses,
            now=self._env.clock(),
        )

    async def _call(self, receipt: ReceiptRecord, fn: EffectFn) -> Effect:
        try:
            value = to_json_value(await fn(self._authority(receipt)))
        except EffectNotAppliedError as exc:
            await self._settle(receipt, ReceiptStatus.FAILED, error=self._error(str(exc)))
            raise
        except Exception as exc:
            error = self._error(f"{type(exc).__name__}: {exc}")
            await self._settle(receipt, ReceiptStatus.UNCERTAIN, error=error)
            raise _uncertain(receipt.key, receipt.receipt_id) from exc
        except BaseException as exc:
            await self._interrupted(receipt, exc)
            raise
        settled = await self._settle(receipt, ReceiptStatus.COMPLETED, value=value)
        return Effect(value=value, receipt=settled)

    async def _interrupted(self, receipt: ReceiptRecord, exc: BaseException) -> None:
        """The call was cut off mid-flight (a shutdown's cancellation, a park or cancel signal
        raised inside it): the provider may have applied the write, so the receipt says so, but
        the interruption itself must reach the runtime unchanged. Turned into a tool error, a
        shutdown would let the turn run on (and call the model) after its worker stopped.

        A failure to record this is only logged: the receipt stays `prepared`, which the next
        run reads as uncertain anyway, and the interruption still propagates."""
        error = self._error(f"{type(exc).__name__}: interrupted while the provider was called")
        try:
            await self._settle(receipt, ReceiptStatus.UNCERTAIN, error=error)
        except Exception:
            log.warning("could not mark receipt %s uncertain", receipt.receipt_id, exc_info=True)

    async def _recover(self, receipt: ReceiptRecord, reconcile: ReconcileFn | None) -> Effect:
        """A receipt left `prepared` (a crash mid-call) or `uncertain`: never call `fn` again.
        Ask the provider through `reconcile`, if the tool gave one; else fail closed."""
        if receipt.status == ReceiptStatus.PREPARED:
            receipt = await self._settle(
                receipt,
                ReceiptStatus.UNCERTAIN,
                error="found prepared: the process stopped mid-call",
            )
        if reconcile is None:
            raise _uncertain(receipt.key, receipt.receipt_id)
        try:
            observed = await reconcile(self._authority(receipt))
        except EffectNotAppliedError as exc:
            await self._settle(
                receipt,
                ReceiptStatus.FAILED,
                error=self._error(f"reconciled: not applied ({exc})"),
                from_statuses=(ReceiptStatus.UNCERTAIN,),
            )
            raise
        except Exception as exc:
            raise _uncertain(receipt.key, receipt.receipt_id) from exc
        value = to_json_value(observed)
        settled = await self._settle(
            receipt, ReceiptStatus.COMPLETED, value=value, from_statuses=(ReceiptStatus.UNCERTAIN,)
        )
        return Effect(value=value, receipt=settled)


async def resolve_receipt(
    store: Ledgers,
    session: str,
    key: str,
    *,
    status: ReceiptStatus | str,
    value: JsonValue = None,
) -> ReceiptRecord:
    """Operator resolution of an `uncertain` receipt: `completed` with the value observed at the
    provider, or `failed` (not applied there; the value must be left out). The time is the
    store's host clock: an operator states what happened, not when it is recorded."""
    settled_as = ReceiptStatus(status)
    if settled_as not in (ReceiptStatus.COMPLETED, ReceiptStatus.FAILED):
        raise ValueError(f"a receipt is resolved as completed or failed, not {settled_as.value}")
    if settled_as is ReceiptStatus.FAILED and value is not None:
        raise ValueError("a failed receipt has no value: the effect was not applied")
    receipt: ReceiptRecord | None = await store.get_receipt(session, key)
    if receipt is None:
        raise ToolError(f"no receipt {key!r} on session {session!r}")
    completed = settled_as is ReceiptStatus.COMPLETED
    settled: ReceiptRecord = await store.settle_receipt(
        session,
        key,
        receipt.receipt_id,
        settled_as,
        value=value if completed else None,
        error=None if completed else "resolved by an operator: not applied",
        from_statuses=(ReceiptStatus.UNCERTAIN,),
        now=time.time(),
    )
    return settled
