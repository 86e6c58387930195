"""GRPO for multi-turn agents (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300; verl-agent's multi-turn form).

What differs from PPO: no critic. Each task is played by a group of G episodes (``group_size``). As
verl-agent (the source of the GiGPO/SAPO table rows), every turn is one training row whose score is its
episode's reward minus that turn's invalid-action penalty,

    s_row = R_episode - 0.1 * invalid(turn),

and the row's advantage is its score normalised over *all rows* of its group (verl-agent
``compute_mean_std_cross_all_data=True``, so longer episodes weigh more in the statistics),

    A_row = (s_row - mean_rows(s)) / (std_rows(s) + 1e-6),

copied to every response token of the row. ``episode_advantage="episodes"`` keeps the textbook form:
one summed return per episode, normalised over the group's G episodes, copied to all its turns. The
loss is PPO-clip on token ratios, token-mean aggregated over the batch, plus beta * low-variance KL to
the reference model and minus an entropy bonus (verl-agent's GRPO settings in the GiGPO/SAPO table). The
advantage is ``agentgym.rl.advantages.group_advantages``, the loss ``agentgym.rl.losses.policy_loss``.

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
from agentgym.rl.advantages import grpo_advantages, row_advantages
from agentgym.rl.config import GroupArgs, parse_args
from agentgym.rl.losses import clipped_policy_loss, episode_returns, policy_loss
from agentgym.rl.trainer import Trainer

__all__ = [
    "Args",
    "clipped_policy_loss",
    "compute_advantages",
    "episode_returns",
    "grpo_advantages",
    "main",
    "policy_loss",
    "row_advantages",
    "train",
]


@dataclass
class Args(GroupArgs):
    """GRPO settings (``norm_adv_by_std``, ``episode_advantage``, ``distributed`` and the shared ones are in
    ``agentgym.rl.config``)."""


def train(args: Args) -> dict[str, float]:
    """Train with GRPO; returns the last iteration's metrics."""
    trainer = Trainer(args, algo="grpo")
    return trainer.fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
