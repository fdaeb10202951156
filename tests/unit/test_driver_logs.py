"""What of an ended driver's log is kept: the end of it, whole lines, a bounded size; the newest attempts."""

from __future__ import annotations

from ftspark.adapters.k8s.driver_logs import TAIL_BYTES, log_key, newest, tail, wanted


def test_the_end_of_a_long_log_is_kept_from_a_line_start_within_the_bound() -> None:
    lines = [f"line {n} {'é' * 50}" for n in range(5000)]
    kept = tail("\n".join(lines) + "\n")
    assert len(kept.encode()) <= TAIL_BYTES
    assert kept.endswith(f"{lines[-1]}\n"), "the end, where the failure is"
    assert kept.splitlines()[0] in lines, "from the start of a line, never half a character"
    assert tail("short\n") == "short\n"


def test_the_newest_attempts_are_kept_and_nothing_else() -> None:
    so_far = {log_key(2): "two", log_key(10): "ten", "notes": "someone's edit", log_key(9): "nine"}
    assert newest(so_far, 11, "eleven", kept=3) == {
        log_key(9): "nine",
        log_key(10): "ten",
        log_key(11): "eleven",
    }, "by attempt number, not by text order (10 after 9)"
    assert newest({}, 1, "one", kept=3) == {log_key(1): "one"}


def test_a_log_is_read_once_and_never_for_an_attempt_older_than_those_kept() -> None:
    so_far = {log_key(attempt): "" for attempt in (3, 4, 5)}
    assert wanted(so_far, 6, kept=3)
    assert not wanted(so_far, 4, kept=3), "kept already"
    assert not wanted(so_far, 2, kept=3), "it would go at once, and be read at every pass"
    assert wanted(so_far, 2, kept=5), "room for it"
    assert wanted({}, 1, kept=1)
