"""Ages and durations as operators type them (`90m`, `24h`, `30d`, `2w`): one grammar for every
command and setting that takes one (`bot prune`, `PRUNE_*`, `--since`, `--older-than`,
`--queued-for`)."""

from __future__ import annotations

import re

SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+)([smhdw])")


def age_seconds_of(value: str, *, units: str = "smhdw", positive: bool = False) -> float | None:
    """The age in seconds, or None when `value` is not a whole number and one of `units`.
    `positive`: zero is not an age either (a prune of everything, a clock that never waits)."""
    match = _AGE.fullmatch(value.strip())
    if match is None or match.group(2) not in units:
        return None
    count = int(match.group(1))
    if positive and count == 0:
        return None
    return float(count * SECONDS[match.group(2)])


class AgeError(ValueError):
    """An age that is not `<n>m`, `<n>h`, `<n>d` or `<n>w`; the message is one line."""


def parse_age(value: str, *, name: str) -> float:
    """`30d` -> seconds. `name` is what the message calls it (an option or a setting)."""
    seconds = age_seconds_of(value, units="mhdw", positive=True)
    if seconds is None:
        raise AgeError(
            f"{name} {value!r} is not an age: a whole number of minutes, hours, days or weeks "
            "such as 90m, 12h, 30d or 2w"
        )
    return seconds
