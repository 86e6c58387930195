"""Thread choices for CPU training beside a competing job: one thread, all physical cores, the default policy.

One iteration of the docs' tiny GRPO run (``baselines/configs/small/grpo_tiny_echo.yaml``) while a busy process
holds a core. The default (``agentgym.models.threads``) should stay close to one thread where all cores collapse.
``tools/thread_bench.py`` times the whole command per choice and writes the record the docs quote.

Run: ``python -m pytest tests/benchmarks/test_bench_threads.py --benchmark-only -m ""``
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from agentgym.models.threads import choose_threads, usable_cores
from agentgym.rl.config import load_config_file, make_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def competing_job():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(1.0)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, competing_job):
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    config = load_config_file(ROOT / "baselines/configs/small/grpo_tiny_echo.yaml")
    out = tmp_path_factory.mktemp("threads")
    # a quarter of the config's 16 tasks per iteration: the two-thread choice can take minutes on a busy box
    overrides = {"num_tasks": 4, "output_dir": str(out), "progress": False, "plot": False, "threads": 1}
    args = make_args(grpo.Args, {**config, **overrides})
    t = Trainer(args, algo="grpo")
    yield t, grpo
    t.logger.close()
    if t._pool is not None:
        t._pool.close()


@pytest.mark.parametrize("choice", ["one", "cores", "policy"])
def test_bench_tiny_grpo_iteration_threads(benchmark, trainer, choice):
    t, grpo = trainer
    if choice == "one":
        n = 1
    elif choice == "cores":
        n = usable_cores()
    else:
        n = choose_threads(env={}).threads  # the default, measured with the competing job running
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    benchmark.extra_info["threads"] = n
    try:
        benchmark.pedantic(
            lambda: t.train_iteration(grpo.compute_advantages, grpo.policy_loss), rounds=3, warmup_rounds=1
        )
    finally:
        torch.set_num_threads(saved)
