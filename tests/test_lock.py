"""Installed versions match the lock (constraints.txt) that `make setup` and CI install with."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import lock  # noqa: E402


def test_installed_versions_match_the_lock():
    problems = lock.drift()
    assert not problems, (
        "installed packages drifted from constraints.txt (reinstall with `make setup`, or after a deliberate "
        "upgrade run `make lock` and commit it):\n" + "\n".join(problems)
    )


def test_the_lock_pins_what_the_tests_run_on():
    pins = lock.read_lock()
    for name in ("torch", "transformers", "numpy", "gymnasium", "pytest", "alfworld", "mkdocs-material"):
        assert name in pins, f"{name} is not locked"
    assert all("+" not in v for v in pins.values()), "local build tags (+cpu) must not be locked"


def test_drift_is_detected(tmp_path):
    pins = lock.read_lock()
    pins["numpy"] = "0.0.1"
    bad = tmp_path / "constraints.txt"
    bad.write_text("".join(f"{k}=={v}\n" for k, v in pins.items()))
    problems = lock.drift(bad)
    assert len(problems) == 1 and problems[0].startswith("numpy ") and "locks 0.0.1" in problems[0]
