"""One backend's run: populate, warm up, then engine and floor turns interleaved per size.

Repetitions are the outer loop and sizes the inner one, and engine and floor alternate which goes
first, so a slow minute of the machine (a checkpoint, a noisy neighbour) lands on every size and
on both sides instead of on one cell of the table.
"""

from __future__ import annotations

import cProfile
import gc
import sys
from dataclasses import dataclass, field

from bench.databases import Site
from bench.raw_floor import RawFloor
from bench.step_cost import EngineBench
from bench.timing import Summary, TurnTiming, summarise
from bench.workload import History, history


@dataclass(frozen=True, kw_only=True)
class Config:
    sizes: tuple[int, ...]
    reps: int
    calls: int
    profile: bool = False


@dataclass(frozen=True, kw_only=True)
class SizeResult:
    size: int
    engine: Summary
    floor: Summary
    whole_turn: Summary
    ratio: Summary
    """engine/floor per repetition: each pair ran back to back, so a burst of load on the machine
    hits both halves of a ratio, which the quotient of two medians does not promise."""
    growth: Summary
    """engine at this size / engine at the smallest size, per repetition (run minutes apart at
    most, in the same repetition)."""
    floor_growth: Summary


@dataclass(kw_only=True)
class SiteResult:
    name: str
    engine_durability: str = ""
    floor_durability: str = ""
    engine_footprint: tuple[int, int] = (0, 0)
    floor_footprint: tuple[int, int] = (0, 0)
    sizes: list[SizeResult] = field(default_factory=list)
    profile: cProfile.Profile | None = None


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_site(site: Site, config: Config) -> SiteResult:
    result = SiteResult(name=site.name)
    progress(f"{site.name}: creating and migrating the engine and floor databases")
    await site.create()
    try:
        histories = {n: history(n) for n in config.sizes}
        warm = ("bench:warm-up", histories[min(config.sizes)])
        sessions: list[tuple[str, History]] = [warm]
        sessions += [
            (_key(n, rep), histories[n]) for rep in range(config.reps) for n in config.sizes
        ]
        total = sum(h.size for _, h in sessions)
        progress(f"{site.name}: populating {len(sessions)} sessions ({total:,} messages) x 2")
        site.populate(sessions)
        engine = await EngineBench.open(site.engine_url, config.calls)
        floor = site.open_floor()
        try:
            result.engine_durability = await engine.durability()
            result.floor_durability = site.floor_durability()
            await engine.run_turn(warm[0])
            floor.run_turn(warm[0], warm[1].size, config.calls)
            await _measure(engine, floor, histories, config, result)
        finally:
            floor.close()
            await engine.close()
    finally:
        site.drop()
    return result


async def _measure(
    engine: EngineBench,
    floor_db: RawFloor,
    histories: dict[int, History],
    config: Config,
    result: SiteResult,
) -> None:
    engine_runs: dict[int, list[TurnTiming]] = {n: [] for n in config.sizes}
    floor_runs: dict[int, list[TurnTiming]] = {n: [] for n in config.sizes}
    profiler = cProfile.Profile() if config.profile else None
    largest = max(config.sizes)
    for rep in range(config.reps):
        progress(f"{result.name}: repetition {rep + 1}/{config.reps}")
        for position, n in enumerate(config.sizes):
            key = _key(n, rep)
            engine_first = (rep + position) % 2 == 0
            engine_turn = floor_turn = ""
            for side in ("engine", "floor") if engine_first else ("floor", "engine"):
                gc.collect()
                if side == "floor":
                    timing, floor_turn = floor_db.run_turn(key, histories[n].size, config.calls)
                    floor_runs[n].append(timing)
                    continue
                watched = profiler if n == largest else None
                if watched is not None:
                    watched.enable()
                try:
                    timing, engine_turn = await engine.run_turn(key)
                finally:
                    if watched is not None:
                        watched.disable()
                engine_runs[n].append(timing)
            if rep == 0 and n == largest:
                result.engine_footprint = await engine.footprint(key, engine_turn)
                result.floor_footprint = floor_db.footprint(key, floor_turn)
    result.profile = profiler
    base = min(config.sizes)
    for n in config.sizes:
        engine_us = [t.step_us for t in engine_runs[n]]
        floor_us = [t.step_us for t in floor_runs[n]]
        result.sizes.append(
            SizeResult(
                size=n,
                engine=summarise(engine_us),
                floor=summarise(floor_us),
                whole_turn=summarise([t.turn_us for t in engine_runs[n]]),
                ratio=summarise([e / f for e, f in zip(engine_us, floor_us, strict=True)]),
                growth=summarise(
                    [
                        e.step_us / b.step_us
                        for e, b in zip(engine_runs[n], engine_runs[base], strict=True)
                    ]
                ),
                floor_growth=summarise(
                    [
                        f.step_us / b.step_us
                        for f, b in zip(floor_runs[n], floor_runs[base], strict=True)
                    ]
                ),
            )
        )


def _key(size: int, rep: int) -> str:
    return f"bench:{size}:{rep}"
