"""pytest plugin: what the passing tests printed (their measured figures: recovery times, records
re-processed, bytes read) is repeated in one section at the end of the run, so CI's log keeps it."""

from __future__ import annotations

import pytest

_MAX_LINES = 40  # the soak's whole table (recovery times per kind, then the verdict)
_MAX_WIDTH = 220


class _Figures:
    def __init__(self) -> None:
        self.printed: list[tuple[str, list[str]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or not report.passed:
            return
        lines = [line.rstrip()[:_MAX_WIDTH] for line in report.capstdout.splitlines() if line.strip()]
        if lines:
            self.printed.append((report.nodeid, lines[-_MAX_LINES:]))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.printed:
            return
        terminalreporter.section("figures measured by the passing tests")
        for nodeid, lines in self.printed:
            terminalreporter.write_line(nodeid)
            for line in lines:
                terminalreporter.write_line(f"    {line}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Figures(), "ftspark-figures")
