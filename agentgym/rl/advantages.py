"""Group-relative advantages (GRPO, Shao et al. 2024), shared by GRPO and the methods built on it (ERL, SEED).

Each task is played by a group of G episodes; an episode's advantage is its return normalised within
its group, ``A_i = (R_i - mean_G(R)) / (std_G(R) + eps)``, copied to every turn and response token.
"""

from __future__ import annotations

import torch

from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.losses import Policy, episode_returns


def grpo_advantages(
    returns: torch.Tensor, group_size: int, *, norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-normalised episode advantages.

    Args:
        returns: ``(N,)`` episode returns, episodes of a group contiguous (``N = groups x group_size``).

    Returns:
        ``(N,)`` advantages ``(R - mean_G) / (std_G + eps)`` (std unbiased, as verl's ``torch.std``).
    """
    r = returns.view(-1, group_size)  # (groups, G)
    mean = r.mean(dim=1, keepdim=True)
    adv = r - mean
    if norm_by_std:
        std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.ones_like(mean)
        adv = adv / (std + eps)
    return adv.view(-1)


def group_advantages(trainer: Policy, batch: TurnBatch) -> dict[str, float]:
    """GRPO's advantage function: episode advantages broadcast to every turn and response token of the episode.

    Fills ``batch["advantages"]`` (B, T); reads ``trainer.args.group_size`` and ``norm_adv_by_std``.
    """
    rets = episode_returns(batch)
    n = max(rets) + 1
    returns = torch.tensor([rets.get(e, 0.0) for e in range(n)])
    adv = grpo_advantages(returns, trainer.args.group_size, norm_by_std=trainer.args.norm_adv_by_std)
    per_turn = [float(adv[m["episode"]]) for m in batch.meta]
    batch["advantages"] = broadcast_turn_values(per_turn, batch["completion_mask"])  # (B, T)
    return {
        "adv/mean_abs": float(adv.abs().mean()),
        "adv/groups_all_equal": float(flat_group_fraction(returns, trainer.args.group_size)),
    }


def flat_group_fraction(returns: torch.Tensor, group_size: int) -> float:
    """Fraction of groups whose returns are all equal (their advantages are all 0: nothing to learn)."""
    r = returns.view(-1, group_size)
    return float(((r.max(1).values - r.min(1).values) == 0).float().mean())
