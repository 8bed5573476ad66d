"""The printed table and the verdict lines."""

from __future__ import annotations

import io
import pstats

from bench.runner import Config, SiteResult

FLOOR_TARGET = 4.0
GROWTH_TARGET = 1.1

HEADER = (
    f"{'database':<9} {'messages':>8} {'engine µs/step':>15} {'floor µs/step':>14} "
    f"{'engine/floor':>12} {'engine N/10':>11} {'floor N/10':>10} {'turn µs/step':>13}"
)


def render(results: list[SiteResult], config: Config, load: tuple[float, float], cores: int) -> str:
    steps = 2 * config.calls + 2
    lines = [
        f"Step cost: {config.calls} remote tool calls per turn = {steps} commits "
        f"({steps - 1} timed steps); median of {config.reps} turns per cell.",
        "engine µs/step: opening commit to final commit, per step (transcript load excluded);",
        "turn µs/step: the whole turn (queue, lease, transcript load, release) per commit.",
        "±: median absolute deviation across turns. Ratios are medians of per-repetition ratios",
        "(engine and floor run back to back; sizes in the same repetition), steadier under load",
        "than the quotient of the two medians beside them.",
        f"load average (1 min) at start {load[0]:.2f}, at end {load[1]:.2f} on {cores} cores: "
        "other work on the machine inflates both sides and the spread.",
        "",
    ]
    for site in results:
        lines.append(f"{site.name} durability  engine: {site.engine_durability}")
        lines.append(f"{site.name} durability  floor:  {site.floor_durability}")
        lines.append(
            f"{site.name} rows/chars per turn  engine: {_pair(site.engine_footprint)}  "
            f"floor: {_pair(site.floor_footprint)}"
            + ("" if site.engine_footprint == site.floor_footprint else "  (MISMATCH)")
        )
    lines += ["", HEADER, "-" * len(HEADER)]
    for site in results:
        for row in site.sizes:
            lines.append(
                f"{site.name:<9} {row.size:>8,} "
                f"{_cell(row.engine.median, row.engine.spread):>15} "
                f"{_cell(row.floor.median, row.floor.spread):>14} "
                f"{row.ratio.median:>11.2f}x "
                f"{row.growth.median:>10.2f}x "
                f"{row.floor_growth.median:>9.2f}x "
                f"{_cell(row.whole_turn.median, row.whole_turn.spread):>13}"
            )
    lines.append("")
    lines += [verdict(site) for site in results]
    return "\n".join(lines)


def verdict(site: SiteResult) -> str:
    worst = max(site.sizes, key=lambda r: r.ratio.median)
    worst_ratio = worst.ratio.median
    first, last = site.sizes[0], site.sizes[-1]
    growth = last.growth.median
    floor_ok = worst_ratio <= FLOOR_TARGET
    growth_ok = growth <= GROWTH_TARGET
    return (
        f"{site.name}: engine/floor <= {FLOOR_TARGET:g}x {_met(floor_ok)} "
        f"(worst {worst_ratio:.2f}x at {worst.size:,} messages); "
        f"cost@{last.size:,} / cost@{first.size:,} <= {GROWTH_TARGET:g}x {_met(growth_ok)} "
        f"({growth:.2f}x; the floor's own: {last.floor_growth.median:.2f}x)"
    )


def profile_text(site: SiteResult, limit: int = 30) -> str:
    if site.profile is None:
        return ""
    out = io.StringIO()
    stats = pstats.Stats(site.profile, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumulative").print_stats(limit)
    return f"== cProfile of the engine turns at the largest size, {site.name} ==\n{out.getvalue()}"


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _cell(value: float, spread: float) -> str:
    return f"{value:,.0f} ±{spread * 100:.0f}%"


def _pair(footprint: tuple[int, int]) -> str:
    return f"{footprint[0]:,}/{footprint[1]:,}"
