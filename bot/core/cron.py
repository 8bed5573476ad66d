"""Five-field cron expressions (minute hour day-of-month month day-of-week), in UTC.

Small on purpose: numbers, `*`, ranges, steps, lists and three-letter names. Day-of-month and
day-of-week combine as in Vixie cron: when both are restricted, either may match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_NAMES = {
    3: {
        m: i
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
        )
    },
    4: {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


class CronError(ValueError):
    """The expression cannot be read."""


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        fields = expression.split()
        if len(fields) != 5:
            raise CronError(f"cron needs 5 fields (minute hour day month weekday): {expression!r}")
        sets = [_field(text, i) for i, text in enumerate(fields)]
        weekdays = frozenset(0 if d == 7 else d for d in sets[4])
        return cls(
            minutes=sets[0],
            hours=sets[1],
            days=sets[2],
            months=sets[3],
            weekdays=weekdays,
            any_day=fields[2] == "*",
            any_weekday=fields[4] == "*",
        )

    def matches(self, at: datetime) -> bool:
        if (
            at.minute not in self.minutes
            or at.hour not in self.hours
            or at.month not in self.months
        ):
            return False
        day = at.day in self.days
        weekday = (at.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday

    def latest_between(self, start: datetime, end: datetime) -> datetime | None:
        """The last matching minute in (start, end], or None."""
        at = end.astimezone(UTC).replace(second=0, microsecond=0)
        floor = start.astimezone(UTC)
        while at > floor:
            if self.matches(at):
                return at
            at -= timedelta(minutes=1)
        return None

    def next_after(self, after: datetime, *, limit_days: int = 366) -> datetime | None:
        at = after.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(limit_days * 24 * 60):
            if self.matches(at):
                return at
            at += timedelta(minutes=1)
        return None


def _field(text: str, index: int) -> frozenset[int]:
    low, high = _RANGES[index]
    names = _NAMES.get(index, {})
    values: set[int] = set()
    for part in text.lower().split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, b = body.split("-", 1)
            first, last = _value(a, names), _value(b, names)
        else:
            first = _value(body, names)
            last = high if step_text else first
        if not (low <= first <= high and low <= last <= high) or step < 1 or first > last:
            raise CronError(f"cron field {text!r} is out of range {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _value(text: str, names: dict[str, int]) -> int:
    if text in names:
        return names[text]
    try:
        return int(text)
    except ValueError:
        raise CronError(f"not a cron value: {text!r}") from None
