"""``pytest -m slow`` prints, after each slow test, its duration and an estimate of the time left."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parent / "conftest.py"


def _run(tmp_path: Path, *args: str) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    (tmp_path / "test_some.py").write_text(
        "import time\nimport pytest\n\n"
        "@pytest.mark.slow\ndef test_a():\n    time.sleep(0.05)\n\n"
        "@pytest.mark.slow\ndef test_b():\n    time.sleep(0.05)\n\n"
        "@pytest.mark.slow\ndef test_c():\n    pass\n\n"
        "def test_fast():\n    pass\n"
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_each_slow_test_prints_its_duration_and_the_time_left(tmp_path):
    lines = [line for line in _run(tmp_path, "-m", "slow").splitlines() if line.startswith("slow ")]
    assert [line.split(":")[0] for line in lines] == ["slow 1/3", "slow 2/3", "slow 3/3"]
    first = re.fullmatch(r"slow 1/3: test_some.py::test_a (\S+) s; about (\S+) s left \(2 x mean (\S+) s\)", lines[0])
    assert first, lines[0]
    took, left, mean = map(float, first.groups())
    assert took >= 0.05 and abs(left - 2 * mean) <= 0.1  # two slow tests left at the mean of the one done
    assert "test_c" in lines[-1] and "; about 0.0 s left (0 x mean " in lines[-1]


def test_a_run_without_slow_tests_prints_no_progress_lines(tmp_path):
    out = _run(tmp_path, "-m", "not slow")
    assert "1 passed" in out and not any(line.startswith("slow ") for line in out.splitlines())
