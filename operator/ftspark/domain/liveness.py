"""Progress liveness: a running query that shows no sign of life for spec.liveness.progressTimeoutSeconds is
stuck, and its driver ends itself (reason NoProgress) so that the restart strategy replaces it — the role of
Flink's checkpoint timeout.

A sign of life is any listener event of the query: started, progress (a batch ran), idle. Spark posts an
idle event when a query has had no data for spark.sql.streaming.noDataProgressEventInterval (10 s by
default), so a healthy idle query is heard from at least that often; a timeout must exceed that interval by a
margin, and the longest batch (a batch sends nothing while it runs) and the trigger interval too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

NO_DATA_INTERVAL_KEY = "spark.sql.streaming.noDataProgressEventInterval"
DEFAULT_NO_DATA_INTERVAL_SECONDS = 10.0
# Above the idle interval: the listener bus delivers events asynchronously, and GC pauses or a slow pointer
# write delay them a little.
MARGIN_SECONDS = 10.0

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def spark_duration_seconds(text: str) -> float:
    """A Spark time setting as Spark reads a milliseconds timeConf: a number with a unit (10s, 500ms, 2min),
    or plain milliseconds. ValueError for anything else."""
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 10s, 10000ms)")
    number, unit = found.groups()
    return float(number) * _UNIT_SECONDS[(unit or "ms").lower()]


def shortest_timeout(spark_conf: Mapping[str, str]) -> float:
    """The shortest progress timeout a query idle under these Spark settings never trips."""
    raw = spark_conf.get(NO_DATA_INTERVAL_KEY)
    interval = DEFAULT_NO_DATA_INTERVAL_SECONDS if raw is None else spark_duration_seconds(raw)
    return interval + MARGIN_SECONDS


@dataclass(frozen=True)
class Stuck:
    query: str
    silent_seconds: float


def stuck(last_seen: Mapping[str, float], now: float, timeout: float) -> Stuck | None:
    """The query silent longest, if it has been silent for timeout seconds or more (0: never stuck)."""
    if timeout <= 0 or not last_seen:
        return None
    query, seen = min(last_seen.items(), key=lambda item: item[1])
    silent = now - seen
    return Stuck(query, silent) if silent >= timeout else None
