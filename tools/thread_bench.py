"""Thread choices for CPU training on a shared machine: one thread, all physical cores, the default policy.

Runs a CPU command from the docs (``agentgym train grpo --config baselines/configs/small/grpo_tiny_echo.yaml``,
fewer iterations) once per choice while ``--competitors`` busy processes compete for the cores (none with
``--competitors 0``), and writes the wall times to a JSON record (value, versions, date, machine, command).

Run: ``python tools/thread_bench.py --iterations 10 --competitors 1 --out docs/figures/threads.json``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measure_record import write_record  # noqa: E402

from agentgym.models.threads import choose_threads, usable_cores  # noqa: E402

CONFIG = "baselines/configs/small/grpo_tiny_echo.yaml"


def command(iterations: int, out_dir: str, threads: int | None) -> list[str]:
    """The docs' tiny GRPO command, cut to ``iterations``, with ``--threads`` when given (None: the default)."""
    cmd = [sys.executable, "-m", "agentgym", "train", "grpo", "--config", CONFIG]
    cmd += ["--total-iterations", str(iterations), "--output-dir", out_dir, "--no-progress", "--no-plot"]
    cmd += ["--save-every", "0"]
    return cmd + ([] if threads is None else ["--threads", str(threads)])


def timed(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds of ``cmd`` (no OMP_NUM_THREADS: the command's own choice decides) and its 'threads:' line."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"thread_bench: {' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    line = next((ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("threads:")), "")
    return wall, line


def competitors(n: int) -> list[subprocess.Popen]:
    """``n`` processes that keep one core busy each (pure Python loops: a job that never yields its core)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=10, help="training iterations per run (default 10)")
    p.add_argument("--competitors", type=int, default=1, help="busy processes running meanwhile (default 1)")
    p.add_argument("--repeats", type=int, default=1, help="runs per choice, median kept (default 1)")
    p.add_argument("--out", default="docs/figures/threads.json", help="the JSON record to write")
    opts = p.parse_args(argv)
    cores = usable_cores()
    choices = {"one thread": 1, f"all {cores} physical cores": cores, "default policy": None}
    busy = competitors(opts.competitors)
    results: dict[str, dict] = {}
    try:
        time.sleep(2)  # let the competitors take their cores before the first choice is made
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(opts.repeats):
                for name, threads in choices.items():
                    wall, line = timed(command(opts.iterations, f"{tmp}/{r}", threads))
                    results.setdefault(name, {"walls_s": [], "threads_lines": []})
                    results[name]["walls_s"].append(round(wall, 2))
                    results[name]["threads_lines"].append(line)
                    print(f"{name}: {wall:.1f} s ({line})", flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    for row in results.values():
        row["median_s"] = round(statistics.median(row["walls_s"]), 2)
    one = results["one thread"]["median_s"]
    record = {
        "what": "wall time of a docs CPU command per thread choice, with competing busy processes",
        "value": {name: row["median_s"] for name, row in results.items()},
        "ratio_to_one_thread": {name: round(row["median_s"] / one, 2) for name, row in results.items()},
        "runs": results,
        "competitors": opts.competitors,
        "iterations": opts.iterations,
        "physical_cores": cores,
        "policy_now": choose_threads(env={}).describe(),
        "timed_command": " ".join(command(opts.iterations, "<tmp>", None)[1:]),
    }
    write_record(opts.out, record, "tools/thread_bench.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
