"""Multi-seed learning check of every baseline on its tiny EchoBandit config (test helper and command).

Each method trains a tiny random Llama from scratch with its CPU config (``CONFIGS``) for several run seeds,
then validates on 64 fixed tasks at temperature 0.4 (the paper's validation temperature). A method passes
when at least ``need`` of the seeds reach ``good`` and none is below ``floor`` (one lucky seed proves nothing).
Seeds run in a pool of worker processes (one torch thread each): on 2 cores, two at a time.

Run (prints the per-seed table; ``--json`` writes it): ``python -m tests.baselines.learning grpo ppo --seeds 0-4``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: method -> its tiny EchoBandit config (the only place the learning check's sizes live).
CONFIGS = {
    "ppo": "baselines/configs/small/ppo_tiny_echo.yaml",
    "grpo": "baselines/configs/small/grpo_tiny_echo.yaml",
    "rloo": "baselines/configs/small/rloo_tiny_echo.yaml",
    "gigpo": "baselines/configs/small/gigpo_tiny_echo.yaml",
    "sapo": "baselines/configs/small/sapo_tiny_echo.yaml",
    "erl": "baselines/configs/erl/erl_echo_tiny.yaml",
    "seed": "baselines/configs/seed/seed_echo_tiny.yaml",
}
#: the methods of the default test run: all of them
DEFAULT = tuple(CONFIGS)
SEEDS = (0, 1, 2, 3, 4)
GOOD, FLOOR, NEED = 0.8, 0.5, 4

#: metrics kept from each run's history for diagnosis (good vs bad seeds)
DIAGNOSTICS = (
    "charts/success_rate",
    "losses/value_loss",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/entropy",
    "critic/explained_variance",
    "critic/value_mean",
    "adv/std_raw",
    "sapo/value_return_corr",
    "sapo/readout_saturated",
    "sapo/readout_abs_logit",
    "sapo/v_mean",
    "rollout/invalid_action_rate",
    "erl/second_success_rate",
    "erl/rows_reflection",
    "erl/rows_consolidation",
    "losses/consolidation_loss",
    "seed/lesson_rate",
    "seed/gate_mean",
    "seed/delta_mean",
    "losses/opd_loss",
)


def oracle_analyser(chats: list[list[dict[str, str]]]) -> list[str]:
    """SEED's lesson writer for the tiny model (it cannot write JSON): a rule that names the episode's word.

    It answers in the paper's fields (``episode_summary``, ``episode_skill``: what ``parse_lesson`` reads), so
    every episode gets a lesson; :func:`train_one` fails a SEED run in which none parsed.
    """
    import re

    out = []
    for chat in chats:
        word = re.findall(r"Say the word: (\w+)", chat[-1]["content"])
        skill = f"say {word[0]}" if word else "say the word"
        out.append(json.dumps({"episode_summary": "the answer is the word the task names", "episode_skill": skill}))
    return out


def train_one(method: str, seed: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train ``method`` with its tiny config and run seed ``seed``; final validation success and a short history."""
    import torch

    import baselines.erl
    import baselines.gigpo
    import baselines.grpo
    import baselines.ppo
    import baselines.rloo
    import baselines.sapo
    import baselines.seed
    from agentgym.rl.config import load_config_file, make_args
    from agentgym.rl.trainer import Trainer

    torch.set_num_threads(1)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    cfg = load_config_file(ROOT / CONFIGS[method])
    with tempfile.TemporaryDirectory() as out:
        cfg.update(output_dir=out, exp_name=method, progress=False, plot=False, save_every=0, seed=seed)
        cfg.update(val_tasks=64, val_temperature=0.4)
        cfg.update(overrides or {})
        cfg["val_every"] = cfg["total_iterations"]
        mod = getattr(baselines, method)
        args = make_args(mod.Args, cfg)
        if method == "erl":
            tr = baselines.erl.ErlTrainer(args)
            tr.fit()
        elif method == "seed":
            tr = baselines.seed.SeedTrainer(args)
            tr.lesson_writer.analyse = oracle_analyser
            tr.fit()
        else:
            kw: dict[str, Any] = {}
            if method == "ppo":
                kw["critic_learning_rate"] = args.critic_learning_rate
            if method == "sapo":
                kw["reserved_tokens"] = [baselines.sapo.W_PLUS, baselines.sapo.W_MINUS]
            loss = {"ppo": "ppo_loss", "sapo": "sapo_loss"}.get(method, "policy_loss")
            tr = Trainer(args, algo=method, **kw)
            tr.fit(mod.compute_advantages, getattr(mod, loss))
        hist = list(tr.logger.history)
    if method == "seed" and not any(h.get("seed/lesson_rows", 0.0) > 0 for h in hist):
        # without lessons SEED is GRPO at SEED's sizes: a pass would say nothing about SEED
        raise RuntimeError(f"seed {seed}: no episode got a lesson (the lesson writer's replies did not parse)")
    succ = [h["charts/success_rate"] for h in hist]
    return {
        "method": method,
        "seed": seed,
        "val": float(hist[-1]["val/success_rate"]),
        "train_first3": sum(succ[:3]) / max(1, len(succ[:3])),
        "train_last5": sum(succ[-5:]) / max(1, len(succ[-5:])),
        "wall_s": time.perf_counter() - t_wall,
        "cpu_s": time.process_time() - t_cpu,
        "history": [{k: h[k] for k in DIAGNOSTICS + ("iteration",) if k in h} for h in hist],
    }


def _star(job: tuple[str, int, dict | None]) -> dict[str, Any]:
    return train_one(*job)


@dataclass
class Check:
    """The per-seed validation successes of one method and whether they pass."""

    method: str
    runs: list[dict[str, Any]]

    @property
    def vals(self) -> list[float]:
        return [r["val"] for r in self.runs]

    @property
    def passed(self) -> bool:
        return sum(v >= GOOD for v in self.vals) >= min(NEED, len(self.vals)) and min(self.vals) >= FLOOR

    def line(self) -> str:
        per_seed = "  ".join(f"s{r['seed']}={r['val']:.2f}" for r in self.runs)
        cpu = sum(r["cpu_s"] for r in self.runs)
        verdict = "ok" if self.passed else f"FAIL (want >= {GOOD} in >= {NEED}, none < {FLOOR})"
        return f"{self.method:>6}: {per_seed}  | min {min(self.vals):.2f}  cpu {cpu:.0f} s  {verdict}"


def workers() -> int:
    """Worker processes: the CPUs this process may use (AGENTGYM_TEST_WORKERS overrides), at most 8."""
    env = os.environ.get("AGENTGYM_TEST_WORKERS")
    if env:
        return max(1, int(env))
    return max(1, min(8, len(os.sched_getaffinity(0))))


def run_checks(
    methods: list[str], seeds: tuple[int, ...] = SEEDS, overrides: dict[str, Any] | None = None, n_workers: int = 0
) -> dict[str, Check]:
    """Train every (method, seed) pair in a process pool; returns one :class:`Check` per method."""
    jobs = [(m, s, overrides) for m in methods for s in seeds]
    n = min(len(jobs), n_workers or workers())
    if n <= 1:
        results = [_star(j) for j in jobs]
    else:
        # spawn: no forked torch state
        with mp.get_context("spawn").Pool(n, maxtasksperchild=None) as pool:
            results = pool.map(_star, jobs, chunksize=1)
    out: dict[str, Check] = {}
    for r in results:
        out.setdefault(r["method"], Check(r["method"], [])).runs.append(r)
    return out


def versions() -> str:
    """The package versions a figure was measured with."""
    import platform

    import numpy
    import torch
    import transformers

    return (
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"numpy {numpy.__version__}"
    )


def results_record(checks: dict[str, Check], command: str, wall_s: float, n_workers: int) -> dict[str, Any]:
    """What ``tools/figures.py`` renders: the command, date, versions, timing and every run (with diagnostics)."""
    runs = {m: c.runs for m, c in checks.items()}
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "versions": versions(),
        "wall_s": wall_s,
        "cpu_s": sum(r["cpu_s"] for rs in runs.values() for r in rs),
        "workers": n_workers,
        "runs": runs,
    }


def _seeds(text: str) -> tuple[int, ...]:
    if "-" in text:
        a, b = text.split("-")
        return tuple(range(int(a), int(b) + 1))
    return tuple(int(s) for s in text.split(","))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("methods", nargs="*", default=list(CONFIGS))
    p.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,2,7")
    p.add_argument("--set", default="{}", help="JSON config overrides for every run, e.g. '{\"update_epochs\": 4}'")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--json", default=None, help="write the per-seed results (with diagnostics) here")
    a = p.parse_args(argv)
    t = time.perf_counter()
    checks = run_checks(a.methods, _seeds(a.seeds), json.loads(a.set), a.workers)
    for c in checks.values():
        print(c.line(), flush=True)
    print(f"wall {time.perf_counter() - t:.0f} s with {a.workers or workers()} workers")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                results_record(
                    checks,
                    "python -m tests.baselines.learning " + " ".join(argv or sys.argv[1:]),
                    time.perf_counter() - t,
                    a.workers or workers(),
                )
            )
        )
    return 0 if all(c.passed for c in checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
