"""`bot cancel` and `bot reset`: an operator ends a session's turns, or gives it a fresh start.

The same engine calls Slack's surfaces make, so nothing here decides anything of its own:
- `bot cancel SESSION` is Slack's Stop button (`session.stop`): every unfinished turn of the
  session ends, a turn parked for an approval included (its request loses its buttons and says
  it was stopped). `--turn ID` ends that turn only (`session.cancel`), or, if it is the parked
  one, the park (a park ends only as a Stop ends it). An operator holding the database may
  stop anything (no principal: the engine's host call, unrestricted), and the thread says who
  did: "stopped by an operator" (`bot.slack.stop_reasons.OPERATOR`), or "stopped by @person" with
  `--by U…` for a person who asked for it. The default reason is Stop's own, `stopped`; another
  `--reason` reads "cancelled (<reason>)".
- `bot reset SESSION` is `/agent-reset` (`session.reset`): unfinished turns are cancelled
  (`reset`), then the history is archived under its generation; the next message starts fresh.

Both commit before the command returns and run no turn here: the worker holding the session
(another process) stops a running turn at its next checkpoint (told at once through Redis
when `REDIS_URL` is set, otherwise by its lease heartbeat within a third of the lease), and a
queued or parked one is ended by whichever worker picks the session up. A reset is applied by
that worker too, in order on the session's turn chain; `bot reset` waits for it (`--wait`).
The thread's renderer in the bot process is woken durably (its sweep reads the flag), so the
thread shows the end whichever process renders it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from agent import AgentSession, CancelReason, Runtime, TurnRecord, TurnStatus
from agent.seams import TurnKind
from bot.cli.operator.output import OperatorError, json_lines
from bot.cli.operator.stores import OPERATOR_AGENT, Databases, acting_runtime
from bot.slack.stop_reasons import OPERATOR


async def cancel_command(
    args: argparse.Namespace, dbs: Databases, redis_url: str | None, prefix: str
) -> int:
    await dbs.require_session(args.session)
    reason = " ".join(str(args.reason).split()) or CancelReason.STOPPED
    by = args.by or OPERATOR
    async with acting_runtime(dbs.store, redis_url, prefix) as runtime:
        session = runtime.session(OPERATOR_AGENT, args.session)
        if args.turn is None:
            asked = await session.stop(by=by, reason=reason)
            nothing = f"nothing to cancel: session {args.session!r} has no unfinished turn"
        else:
            asked = await cancel_turn(dbs, session, args.turn, reason, by)
            nothing = f"nothing to cancel: turn {args.turn!r} has already ended"
        woken = await dbs.wake_renderer(args.session) if asked else False
        ended = await _wait_for(runtime, args.session, asked, args.wait) if asked else {}
    done: dict[str, Any] = {
        "action": "cancel",
        "session": args.session,
        "reason": reason,
        "by": by,
        "turns": [{"turn_id": t, "status": ended.get(t)} for t in asked],
        "thread_woken": woken,
    }
    waited_out = args.wait > 0 and any(ended.get(t) is None for t in asked)
    if args.json:
        json_lines([done])
    elif not asked:
        print(nothing)
    else:
        for turn_id in asked:
            status = ended.get(turn_id)
            print(
                f"{turn_id}: {status}"
                if status is not None
                else f"{turn_id}: asked to stop ({reason}); "
                + (
                    f"not ended within {args.wait:g}s"
                    if args.wait > 0
                    else "its worker stops it at the next checkpoint"
                )
            )
    return 1 if not asked or waited_out else 0


async def cancel_turn(
    dbs: Databases, session: AgentSession, turn_id: str, reason: str, by: str | None
) -> list[str]:
    """One turn, as `bot cancel --turn` and the operator console end it: `cancel` for a
    queued or running one, `stop` for the parked one (a park
    ends only as a Stop ends it) or for the session's only unfinished turn (the same end, and
    `stop` records who, for the thread to say; `cancel` records only why); [] if it already
    ended."""
    record = await dbs.store.get_turn(session.key, turn_id)
    if record is None:
        raise OperatorError(f"no turn {turn_id!r} in session {session.key!r}")
    if record.kind == TurnKind.RESET:
        raise OperatorError(f"{turn_id!r} is a reset, which cannot be cancelled")
    if record.status.finished:
        return []
    others = [
        t.turn_id
        for t in await dbs.store.list_turns(session.key)
        if t.kind == TurnKind.TURN
        and t.status in (TurnStatus.QUEUED, TurnStatus.RUNNING)
        and t.turn_id != turn_id
    ]
    if record.status != TurnStatus.SUSPENDED:
        if not others:
            return await session.stop(by=by, reason=reason)
        return [turn_id] if await session.cancel(turn_id, reason) else []
    if others:
        raise OperatorError(
            f"turn {turn_id!r} is parked, and a park ends only with every unfinished turn of "
            f"its session (also {', '.join(others)}): run `bot cancel {session.key}` without "
            "--turn to end them all"
        )
    return await session.stop(by=by, reason=reason)


async def _wait_for(
    runtime: Runtime, key: str, turn_ids: list[str], seconds: float
) -> dict[str, str | None]:
    """Each turn's final status, where it ended within `seconds` (polling the store: another
    process ends them)."""
    ended: dict[str, str | None] = {turn_id: None for turn_id in turn_ids}
    if seconds <= 0:
        return ended
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            for turn_id in turn_ids:
                while True:
                    record = await runtime.store.get_turn(key, turn_id)
                    if record is None or record.status.finished:
                        ended[turn_id] = record.status.value if record else None
                        break
                    await asyncio.sleep(runtime.poll_interval)
    return ended


async def reset_command(
    args: argparse.Namespace, dbs: Databases, redis_url: str | None, prefix: str
) -> int:
    await dbs.require_session(args.session)
    result = None
    async with acting_runtime(dbs.store, redis_url, prefix) as runtime:
        session = runtime.session(OPERATOR_AGENT, args.session)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(args.wait, 0.001)):
                result = await session.reset()
    await dbs.wake_renderer(args.session)
    if result is None:
        queued = _queued_reset(await dbs.store.list_turns(args.session))
        done: dict[str, Any] = {
            "action": "reset",
            "session": args.session,
            "status": "queued",
            "reset_id": queued,
        }
        message = (
            f"reset of {args.session} queued ({queued}) but not applied within "
            f"{args.wait:g}s: no worker has taken the session up (is a `bot worker` or "
            "`bot serve` with RUN_TURNS=true running?); it is applied when one does"
        )
    else:
        generation = result.generation - 1
        archive = await dbs.store.read_archive(args.session, generation)
        done = {
            "action": "reset",
            "session": args.session,
            "status": "completed",
            "archived_as": result.previous_session,
            "archived_messages": len(archive.messages),
            "generation": result.generation,
        }
        count = len(archive.messages)
        message = (
            f"reset {args.session}: archived {count} message{'s' if count != 1 else ''} as "
            f"{result.previous_session}; the next message starts fresh"
        )
    if args.json:
        json_lines([done])
    else:
        print(message)
    return 0 if result is not None else 1


def _queued_reset(turns: list[TurnRecord]) -> str | None:
    resets = [t for t in turns if t.kind == TurnKind.RESET and not t.status.finished]
    return resets[-1].turn_id if resets else None
