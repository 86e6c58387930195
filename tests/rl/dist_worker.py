"""A manual multi-process check: run under ``torchrun --nproc_per_node 2``, train, then report per rank.

Usage: ``torchrun --nproc_per_node 2 tests/rl/dist_worker.py ALGO STRATEGY OUT_DIR``. Rank 0 plays 2 tasks and
rank 1 one (``num_tasks: 3``), episodes last 1-3 turns, so the ranks' row and forward counts differ.
Each rank writes ``rank<r>.json`` with the hash of the full (gathered) parameters; rank 0 also ``params.pt``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from agentgym.rl.distributed import reshard_for_training
from agentgym.rl.testing import tiny_echo_args


def main(algo: str, strategy: str, out: str) -> None:
    torch.set_num_threads(1)
    common = dict(
        num_tasks=3,
        learning_rate=1e-2,
        mini_batch_size=4,
        micro_batch_size=2,
        beta=0.01,
        save_every=1,
        distributed=strategy,
    )
    run_dir = Path(out) / f"{algo}-{strategy}"
    if algo == "grpo":
        import baselines.grpo as m
        from agentgym.rl.trainer import Trainer

        tr = Trainer(tiny_echo_args(m.Args, run_dir, **common), algo="grpo")
        tr.fit(m.compute_advantages, m.policy_loss)
    elif algo == "ppo":
        import baselines.ppo as m
        from agentgym.rl.trainer import Trainer

        common.update(group_size=1)
        args = tiny_echo_args(m.Args, run_dir, **common)
        tr = Trainer(args, algo="ppo", critic_learning_rate=args.critic_learning_rate)
        tr.fit(m.compute_advantages, m.ppo_loss)
    elif algo == "erl":
        import baselines.erl as m

        common.update(max_turns=1, reflection_max_new_tokens=3)
        tr = m.ErlTrainer(tiny_echo_args(m.Args, run_dir, **common))
        tr.fit()
    else:
        raise SystemExit(f"unknown algo {algo}")
    if tr.sharded:
        reshard_for_training(tr.model)  # parameters are DTensor shards again: gather each one whole
    digest = hashlib.sha256()
    flat = []
    for name, p in tr.model.named_parameters():
        t = p.full_tensor() if type(p).__name__ == "DTensor" else p  # collective, same order on every rank
        t = t.detach().float().cpu()
        digest.update(name.encode())
        digest.update(t.numpy().tobytes())
        flat.append(t.flatten())
    if tr.dist.rank == 0:
        torch.save(torch.cat(flat), Path(out, "params.pt"))
    rank = tr.dist.rank
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"params": digest.hexdigest(), "iterations": tr.iteration, "sharded": tr.sharded})
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
