"""How many CPU threads PyTorch gets for training, SFT, ``hf:`` evaluation and ``serve``.

PyTorch's default (one thread per core) collapses on a shared machine: a small model's many short operations
each end in a barrier where every thread waits for the slowest, and a thread the OS gave to another job stalls
them all. The default here is therefore *the cores nobody else is using*:

    threads = max(1, min(physical cores usable by this process, round(those cores - load)))

where load is the larger of the 1-minute load average and the cores busy right now (:func:`load_average`):
all physical cores on an idle machine, one thread on a busy one. An explicit choice wins, in this order:
``--threads N`` (``threads: N`` in a training config), then ``OMP_NUM_THREADS`` in the environment.
``tools/thread_bench.py`` (record ``docs/figures/threads.json``) and ``tests/benchmarks/test_bench_threads.py``
measure the choices.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count chosen and why (printed at the start of CPU work)."""

    threads: int
    source: str  # "--threads", "OMP_NUM_THREADS" or "policy"
    cores: int
    load: float | None

    def describe(self) -> str:
        if self.source == "policy":
            load = "unknown" if self.load is None else f"{self.load:.1f}"
            return (
                f"threads: {self.threads} ({self.cores} physical core(s), load {load}: the idle cores; "
                "--threads N to choose)"
            )
        return f"threads: {self.threads} (from {self.source})"


def usable_cores() -> int:
    """Physical cores this process may run on (CPU affinity, hyperthreads not counted)."""
    try:
        logical = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        logical = os.cpu_count() or 1
    try:
        import psutil

        per_core = max(1, (psutil.cpu_count(logical=True) or 1) // max(1, psutil.cpu_count(logical=False) or 1))
    except ImportError:
        per_core = 1
    return max(1, logical // per_core)


def load_average(sample_s: float = 0.25) -> float | None:
    """Cores busy with other work: the larger of the 1-minute load average and the busy cores measured now.

    The load average lags a job started seconds ago by most of a minute; the busy share of all CPUs over
    ``sample_s`` (this process sleeps meanwhile) sees it at once. None where the OS reports neither.
    """
    loads = []
    try:
        loads.append(os.getloadavg()[0])
    except (AttributeError, OSError):
        pass
    try:
        import psutil

        loads.append(psutil.cpu_percent(interval=sample_s) / 100.0 * (psutil.cpu_count(logical=True) or 1))
    except ImportError:
        pass
    return max(loads) if loads else None


def policy_threads(cores: int, load: float | None) -> int:
    """The default: the cores not taken by other work, at least one."""
    if load is None:
        return cores
    return max(1, min(cores, math.floor(cores - load + 0.5)))


def choose_threads(threads: int | None = None, env: dict[str, str] | None = None) -> ThreadChoice:
    """The thread count for CPU work: ``threads`` when given (> 0), else ``OMP_NUM_THREADS``, else the policy.

    Raises:
        ValueError: ``threads`` or ``OMP_NUM_THREADS`` is not a positive integer.
    """
    env = os.environ if env is None else env
    cores = usable_cores()
    if threads is not None and threads != 0:
        if threads < 0:
            raise ValueError(f"--threads {threads}: give a positive number of threads (0 or none: the default policy)")
        return ThreadChoice(int(threads), "--threads", cores, None)
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp:
        if not omp.isdigit() or int(omp) < 1:
            raise ValueError(f"OMP_NUM_THREADS={omp!r} is not a positive integer: unset it or give e.g. 1")
        return ThreadChoice(int(omp), "OMP_NUM_THREADS", cores, None)
    load = load_average()
    return ThreadChoice(policy_threads(cores, load), "policy", cores, load)


def apply_threads(threads: int | None = None, *, announce: bool = True) -> ThreadChoice:
    """Choose (see :func:`choose_threads`) and set torch's intra-op thread count; print the choice in one line."""
    import torch

    choice = choose_threads(threads)
    torch.set_num_threads(choice.threads)
    if announce:
        print(choice.describe(), flush=True)
    return choice
