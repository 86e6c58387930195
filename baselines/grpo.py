"""GRPO for multi-turn agents (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300; verl-agent's multi-turn form).

What differs from PPO: no critic. Each task is played by a group of G episodes (``group_size``); an
episode's advantage is its return normalised within its group,

    A_i = (R_i - mean_G(R)) / (std_G(R) + 1e-6),

and is copied to every turn and every response token of that episode. The loss is PPO-clip on token
ratios, token-mean aggregated over the batch, plus beta * low-variance KL to the reference model and
minus an entropy bonus (verl-agent's GRPO settings in the GiGPO/SAPO table). The advantage is
``agentgym.rl.advantages.grpo_advantages`` / ``group_advantages``, the loss ``agentgym.rl.losses.policy_loss``.

Run: ``python baselines/grpo.py --config baselines/configs/grpo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python baselines/grpo.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# GRPO's advantage and actor loss are shared by the methods built on it (ERL, SEED, RLOO, GiGPO, PPO's actor),
# so they live in agentgym.rl; this file names them and shows how they are put together.
from agentgym.rl.advantages import group_advantages as compute_advantages
from agentgym.rl.advantages import grpo_advantages
from agentgym.rl.config import GroupArgs, parse_args
from agentgym.rl.losses import episode_returns, policy_loss
from agentgym.rl.trainer import Trainer

__all__ = ["Args", "compute_advantages", "episode_returns", "grpo_advantages", "main", "policy_loss", "train"]


@dataclass
class Args(GroupArgs):
    """GRPO settings (``norm_adv_by_std``, ``distributed`` and the shared ones are in ``agentgym.rl.config``)."""


def train(args: Args) -> dict[str, float]:
    """Train with GRPO; returns the last iteration's metrics."""
    trainer = Trainer(args, algo="grpo")
    return trainer.fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
