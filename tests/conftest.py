"""Shared fixtures: the data root, and skipping data-backed tests with a clear reason when it is absent; with slow
tests selected (``pytest -m slow``), one progress line per slow test with an estimate of the time left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# One BLAS/OpenMP thread: tiny models are 10-17x faster with one thread on a busy 2-core box (two OpenMP
# threads spin at every op barrier). Set before torch is imported by any test module.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]

# Tests read data from AGENTGYM_DATA; default to the shared copy beside the checkout (as CI does).
if "AGENTGYM_DATA" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["AGENTGYM_DATA"] = str((ROOT.parent / "shared" / "data").resolve())
os.environ.setdefault("AGENTGYM_CACHE", str(ROOT / ".cache" / "agentgym"))


def data_root() -> Path:
    """Where agentgym reads data: ``$AGENTGYM_DATA``, else the per-user data folder (the one rule)."""
    from agentgym.data import data_dir

    return data_dir()


def require_data(family: str, *parts: str) -> Path:
    """The path ``<data root>/family/parts...``, or skip the test saying what is missing."""
    path = data_root().joinpath(family, *parts)
    if not path.exists():
        pytest.skip(
            f"{path} is absent; {family} tests need it (`agentgym data download {family}`, "
            f"`agentgym data prepare {family} --from DIR`, or set AGENTGYM_DATA to a folder holding {family}/)"
        )
    return path


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{seconds:.1f} s"


class SlowProgress:
    """After each slow test, one line: its duration and the time left (mean duration so far x slow tests left)."""

    def __init__(self, nodeids: set[str], reporter) -> None:
        self.left = set(nodeids)
        self.total = len(nodeids)
        self.reporter = reporter
        self.spent: dict[str, float] = {}  # setup + call + teardown of the test running
        self.done: list[float] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.left:
            return
        self.spent[report.nodeid] = self.spent.get(report.nodeid, 0.0) + report.duration
        if report.when != "teardown":
            return
        self.left.discard(report.nodeid)
        self.done.append(self.spent.pop(report.nodeid))
        mean = sum(self.done) / len(self.done)
        if self.reporter._tw.width_of_current_line:  # after the progress dots, on a line of its own
            self.reporter._tw.line()
        self.reporter.write_line(
            f"slow {len(self.done)}/{self.total}: {report.nodeid} {_clock(self.done[-1])}; "
            f"about {_clock(mean * len(self.left))} left ({len(self.left)} x mean {_clock(mean)})"
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Slow tests are minutes each: when any are selected, show where the run stands after each one."""
    slow = {item.nodeid for item in session.items if item.get_closest_marker("slow")}
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if slow and reporter is not None and not session.config.option.collectonly:
        session.config.pluginmanager.register(SlowProgress(slow, reporter), "agentgym-slow-progress")
