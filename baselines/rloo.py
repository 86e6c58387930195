"""RLOO for multi-turn agents (Ahmadian et al. 2024, "Back to Basics", arXiv 2402.14740; Kool et al. 2019).

What differs from GRPO: the baseline of episode i is the mean return of the *other* G-1 episodes of its
group, and there is no std scaling:

    A_i = R_i - (sum_{j != i} R_j) / (G - 1)  ( = G/(G-1) * (R_i - mean_G) ),

copied to every turn and token of the episode. Actor loss as GRPO (PPO-clip, token mean, KL, entropy).

Run: ``python baselines/rloo.py --config baselines/configs/rloo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.losses import episode_returns, policy_loss
from agentgym.rl.trainer import Trainer


@dataclass
class Args(BaseArgs):
    """RLOO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    distributed: str = "ddp"
    """multi-GPU strategy under torchrun: ddp or fsdp"""


def rloo_advantages(returns: torch.Tensor, group_size: int) -> torch.Tensor:
    """``(N,)`` leave-one-out advantages; groups contiguous. Needs ``group_size >= 2``."""
    if group_size < 2:
        raise ValueError("RLOO needs group_size >= 2 (the baseline is the mean of the other episodes)")
    r = returns.view(-1, group_size)  # (groups, G)
    others = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)  # (groups, G)
    return (r - others).view(-1)


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    rets = episode_returns(batch)
    returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])
    adv = rloo_advantages(returns, trainer.args.group_size)
    batch["advantages"] = broadcast_turn_values(
        [float(adv[m["episode"]]) for m in batch.meta], batch["completion_mask"]
    )
    return {"adv/mean_abs": float(adv.abs().mean())}


def train(args: Args) -> dict[str, float]:
    """Train with RLOO; returns the last iteration's metrics."""
    return Trainer(args, algo="rloo").fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
