"""Retention: `bot prune --older-than 30d`, and the same job on the clock's schedule.

What goes, what stays and why is the store's to decide (`SessionStore.prune_history`,
`prune_receipts`, `DeliveryStore.prune_posts`); this module walks them batch by batch, each
its own short transaction, so a prune of months of history never holds a lock for long and
live turns go on between batches. The engine's events are pruned no further than the Slack
renderer has shown them (its cursor), so a reply not yet posted is never lost to a prune.

Several clocks may each run the job at the same time: it is harmless, not fenced. Every batch
re-checks, under the session rows' locks, that its turns are still finished, old and not pruned
yet, and counts only what it removed, so two prunes split the work between them and nothing is
removed twice or counted twice.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent import SchemaMismatchError
from agent.seams import PruneCounts, SessionStore
from bot.core.durations import (
    AgeError as AgeError,  # re-exported: `bot prune` and its tests name it here
)
from bot.core.durations import parse_age as parse_age

if TYPE_CHECKING:
    from bot.core.settings import Settings
    from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)

DEFAULT_BATCH = 500


@dataclass(frozen=True, kw_only=True)
class Retention:
    """What to prune: history older than `older_than` seconds, receipts older than
    `receipts_older_than` (None: receipts are kept), `batch` turns per transaction."""

    older_than: float
    receipts_older_than: float | None = None
    batch: int = DEFAULT_BATCH
    every: float = 86400.0
    """How often the clock runs it."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention | None:
        """None when `PRUNE_OLDER_THAN` is unset (the clock prunes nothing); raises `AgeError`
        for an age it cannot read."""
        ages = settings.prune_ages()
        if ages is None:
            return None
        older_than, receipts_older_than, every = ages
        return cls(
            older_than=older_than,
            receipts_older_than=receipts_older_than,
            batch=settings.prune_batch,
            every=every,
        )


@dataclass(kw_only=True)
class PruneReport:
    """What one run of the job removed (or, dry run, would remove)."""

    dry_run: bool
    before: float
    """The cutoff (Unix time): history that ended before it went."""
    counts: PruneCounts = field(default_factory=PruneCounts)
    reply_bodies: int = 0
    batches: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "before": datetime.fromtimestamp(self.before, UTC).isoformat(),
            **asdict(self.counts),
            "reply_bodies": self.reply_bodies,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
        }

    def text(self) -> str:
        c = self.counts
        verb = "would prune" if self.dry_run else "pruned"
        return (
            f"{verb} {c.turns} finished turn(s) ({c.steps} steps, {c.events} events), "
            f"{c.generations} archived generation(s) ({c.archived_rows} rows), "
            f"{c.receipts} receipt(s), {self.reply_bodies} reply body(ies); "
            f"{c.held} turn(s) held (session live or parked, or not yet shown in Slack); "
            f"cutoff {datetime.fromtimestamp(self.before, UTC).isoformat()}, "
            f"{self.batches} batch(es) in {self.seconds:.1f}s"
        )


async def run_prune(
    store: SessionStore,
    delivery: DeliveryStore | None,
    retention: Retention,
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    """Prune everything `retention` says is old enough, batch after batch."""
    started = time.monotonic()
    moment = time.time() if now is None else now
    report = PruneReport(dry_run=dry_run, before=moment - retention.older_than)
    delivered = delivery.cursors if delivery is not None else None
    after: int | None = 0
    while after is not None:
        counts, after = await store.prune_history(
            before=report.before,
            after=after,
            limit=retention.batch,
            dry_run=dry_run,
            delivered=delivered,
            now=moment,
        )
        report.counts += counts
        report.batches += 1
    if retention.receipts_older_than is not None:
        receipts_before = moment - retention.receipts_older_than
        after = 0
        while after is not None:
            removed, after = await store.prune_receipts(
                before=receipts_before, after=after, limit=retention.batch, dry_run=dry_run
            )
            report.counts += PruneCounts(receipts=removed)
            report.batches += 1
    if delivery is not None:
        post: str | None = ""
        while post is not None:
            stripped, post = await delivery.prune_posts(
                before=report.before, after=post, limit=retention.batch, dry_run=dry_run
            )
            report.reply_bodies += stripped
            report.batches += 1
    report.seconds = time.monotonic() - started
    return report


# -- the command --------------------------------------------------------------------------------


def _retention(args: argparse.Namespace, settings: Settings | None) -> Retention:
    older = args.older_than or (settings.prune_older_than if settings else None)
    if not older:
        raise AgeError("give --older-than (e.g. 30d) or set PRUNE_OLDER_THAN")
    receipts = args.receipts_older_than or (
        settings.prune_receipts_older_than if settings else None
    )
    batch = settings.prune_batch if settings else DEFAULT_BATCH
    if args.batch is not None:
        if not args.batch.isdigit() or int(args.batch) < 1:
            raise AgeError(f"--batch {args.batch!r} is not a whole number of at least 1")
        batch = int(args.batch)
    return Retention(
        older_than=parse_age(older, name="--older-than" if args.older_than else "PRUNE_OLDER_THAN"),
        receipts_older_than=(
            parse_age(receipts, name="--receipts-older-than") if receipts else None
        ),
        batch=batch,
    )


async def prune_command(
    args: argparse.Namespace, url: str, settings: Settings | None = None
) -> int:
    """`bot prune`: exit 0 with the counts, 2 for an option it cannot read (one line)."""
    from storage import SqlStore
    from storage.delivery.store import DeliveryStore

    try:
        retention = _retention(args, settings)
    except AgeError as err:
        print(f"bot prune: {err}", file=sys.stderr)
        return 2
    try:
        store = await SqlStore.open(url)
    except SchemaMismatchError as err:
        print(f"bot prune: {err}", file=sys.stderr)
        return 2
    try:
        delivery = await DeliveryStore.open(url, store=store)
        try:
            report = await run_prune(store, delivery, retention, dry_run=args.dry_run)
        finally:
            await delivery.close()
    finally:
        await store.close()
    print(json.dumps(report.as_json()) if args.json else report.text())
    return 0
