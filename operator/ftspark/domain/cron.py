"""Cron schedules as Kubernetes CronJobs read them: five fields (minute, hour, day of month, month, day of
week) with `*`, `a-b`, `/step`, lists, month and day names, and the @yearly, @monthly, @weekly, @daily and
@hourly shorthands; each time in a time zone (IANA), daylight saving time included. Pure: the caller gives
the times.

When both the day of month and the day of week are restricted, a day matching either is a day of the
schedule (as in cron and Kubernetes). A local time that a clock change skips is no time of the schedule; one
it repeats is taken once, the first time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_NAMES = "jan feb mar apr may jun jul aug sep oct nov dec"
_DAY_NAMES = "sun mon tue wed thu fri sat"
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES.split(), 1)}
_DAYS = {name: number for number, name in enumerate(_DAY_NAMES.split())}
# (name, lowest, highest, names) of each field, in order.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),  # 7 is Sunday too
)
# Far enough to find the next 29 February of any schedule that has one.
_SEARCH_DAYS = 8 * 366


def _values(text: str, name: str, lowest: int, highest: int, names: dict[str, int]) -> frozenset[int]:
    found: set[int] = set()
    for part in text.lower().split(","):
        body, _, step_text = part.partition("/")
        if step_text and not (step_text.isdigit() and int(step_text) > 0):
            raise ValueError(f"{name}: {part!r}: the step must be a positive number")
        step = int(step_text or 1)
        if body == "*":
            start, end = lowest, highest
        else:
            first, _, last = body.partition("-")
            start = _number(first, name, lowest, highest, names)
            end = _number(last, name, lowest, highest, names) if last else (highest if step_text else start)
            if end < start:
                raise ValueError(f"{name}: {part!r}: the range runs backwards")
        found.update(range(start, end + 1, step))
    return frozenset(found)


def _number(text: str, name: str, lowest: int, highest: int, names: dict[str, int]) -> int:
    value = names.get(text, int(text) if text.isdigit() else -1)
    if not lowest <= value <= highest:
        raise ValueError(f"{name}: {text!r} is not within {lowest}-{highest}")
    return value


@dataclass(frozen=True)
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 (Sunday) to 6
    either_day: bool  # both day fields restricted: a day matching either counts
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, time_zone: str = "UTC") -> CronSchedule:
        """ValueError naming the field for anything cron does not take."""
        try:
            zone = ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"time zone {time_zone!r} is not an IANA time zone (e.g. Europe/Paris)"
            ) from None
        text = _MACROS.get(expression.strip().lower(), expression)
        fields = text.split()
        if len(fields) != len(_FIELDS):
            raise ValueError(
                f"{expression!r}: five fields (minute hour day-of-month month day-of-week) or @daily"
            )
        minutes, hours, days, months, weekdays = (
            _values(field, *spec) for field, spec in zip(fields, _FIELDS, strict=True)
        )
        either = fields[2] != "*" and fields[4] != "*"
        return cls(minutes, hours, days, months, frozenset(d % 7 for d in weekdays), either, zone)

    def _day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_month, by_week = day.day in self.days_of_month, (day.isoweekday() % 7) in self.days_of_week
        return (by_month or by_week) if self.either_day else (by_month and by_week)

    def _times_of(self, day: date, *, descending: bool) -> Iterator[datetime]:
        """The day's times of the schedule, in UTC."""
        for hour in sorted(self.hours, reverse=descending):
            for minute in sorted(self.minutes, reverse=descending):
                local = datetime.combine(day, time(hour, minute), self.zone)
                moment = local.astimezone(UTC)
                if moment.astimezone(self.zone).replace(tzinfo=None) != local.replace(tzinfo=None):
                    continue  # skipped by a clock change
                yield moment

    def latest(self, after: datetime, until: datetime) -> datetime | None:
        """The last time of the schedule in (after, until], if any."""
        day = until.astimezone(self.zone).date()
        first = after.astimezone(self.zone).date()
        while day >= first:
            if self._day(day):
                for moment in self._times_of(day, descending=True):
                    if after < moment <= until:
                        return moment
            day -= timedelta(days=1)
        return None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time of the schedule after moment (None: none within eight years, e.g. 30 February)."""
        day = moment.astimezone(self.zone).date()
        for _ in range(_SEARCH_DAYS):
            if self._day(day):
                for candidate in self._times_of(day, descending=False):
                    if candidate > moment:
                        return candidate
            day += timedelta(days=1)
        return None
