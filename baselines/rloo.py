"""RLOO for multi-turn agents (Ahmadian et al. 2024, "Back to Basics", arXiv 2402.14740; Kool et al. 2019).

What differs from GRPO: the baseline of episode i is the mean return of the *other* G-1 episodes of its
group, and there is no std scaling:

    A_i = R_i - (sum_{j != i} R_j) / (G - 1)  ( = G/(G-1) * (R_i - mean_G) ),

As verl-agent (``compute_rloo_outcome_advantage`` with ``compute_mean_std_cross_all_data=True``, the
default of the table's scripts), the default ``episode_advantage="rows"`` applies this to turn rows: each row
is scored episode reward - 0.1 * invalid(turn) (as GRPO) and the baseline is the mean of the other rows of
its group, ``A_row = n/(n-1) * (s_row - mean_rows)`` with ``n`` the group's row count, copied to the row's
tokens. ``episode_advantage="episodes"`` is the formula above on summed episode returns, copied to every
turn of the episode. Actor loss: GRPO's ``policy_loss``, imported from ``baselines/grpo.py`` (PPO-clip, KL, entropy).

Run: ``python baselines/rloo.py --config baselines/configs/rloo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.advantages import group_members
from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.losses import episode_returns
from agentgym.rl.rewards import step_row_scores
from agentgym.rl.trainer import Trainer
from baselines.grpo import policy_loss


@dataclass
class Args(BaseArgs):
    """RLOO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    episode_advantage: str = "rows"
    """``rows``: turn rows scored episode reward - penalty(turn), leave-one-out over all rows of the group
    (verl-agent); ``episodes``: leave-one-out over the group's G summed episode returns"""


def rloo_advantages(returns: torch.Tensor, group_size: int) -> torch.Tensor:
    """``(N,)`` leave-one-out advantages; groups contiguous. Needs ``group_size >= 2``."""
    if group_size < 2:
        raise ValueError("RLOO needs group_size >= 2 (the baseline is the mean of the other episodes)")
    r = returns.view(-1, group_size)  # (groups, G)
    others = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)  # (groups, G)
    return (r - others).view(-1)


def rloo_row_advantages(scores: torch.Tensor, groups: list) -> torch.Tensor:
    """``(N,)`` leave-one-out advantages of row scores over all rows of their group (verl-agent).

    ``A = n/(n-1) * (s - mean_group)`` with ``n`` rows in the group (= ``s`` minus the mean of the other rows);
    a group with a single row keeps its score (verl-agent: baseline 0).
    """
    out = scores.clone()
    for rows in group_members(groups).values():
        n = len(rows)
        if n > 1:
            vals = scores[rows]
            out[rows] = (vals - vals.mean()) * n / (n - 1)
    return out


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    """RLOO's advantage on every response token: leave-one-out over the group's rows (or episodes)."""
    a = trainer.args
    mode = a.episode_advantage
    if mode not in ("rows", "episodes"):
        raise ValueError(
            f"unknown episode_advantage {mode!r}: use 'rows' (verl-agent, the table configs) or 'episodes'"
        )
    if mode == "rows":
        if a.group_size < 2:
            raise ValueError("RLOO needs group_size >= 2 (the baseline is the mean of the other episodes)")
        scores = torch.tensor(step_row_scores(batch.meta, a.invalid_penalty))
        per_turn = rloo_row_advantages(scores, [m["group"] for m in batch.meta]).tolist()
    else:
        rets = episode_returns(batch)
        returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])
        adv = rloo_advantages(returns, a.group_size)
        per_turn = [float(adv[m["episode"]]) for m in batch.meta]
    batch["advantages"] = broadcast_turn_values(per_turn, batch["completion_mask"])  # (B, T)
    return {"adv/mean_abs": float(torch.tensor(per_turn).abs().mean())}


def train(args: Args) -> dict[str, float]:
    """Train with RLOO; returns the last iteration's metrics."""
    return Trainer(args, algo="rloo").fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
