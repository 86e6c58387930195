"""Group-relative advantages (GRPO, Shao et al. 2024), shared by GRPO and the methods built on it (RLOO, GiGPO,
ERL, SEED).

Each task is played by a group of G episodes. Two forms (``episode_advantage``):

* ``rows`` (verl-agent, the source of the GiGPO/SAPO table rows): every turn is a row scored
  ``s = R_episode - 0.1 * invalid(turn)`` (:func:`agentgym.rl.rewards.step_row_scores`), normalised over *all
  rows* of its group (verl-agent ``compute_mean_std_cross_all_data=True``): ``A = (s - mean) / (std + eps)``.
* ``episodes`` (the textbook form): one summed return per episode, ``A_i = (R_i - mean_G(R)) / (std_G(R) + eps)``,
  copied to every turn and response token of the episode.
"""

from __future__ import annotations

import torch

from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.losses import Policy, episode_returns
from agentgym.rl.rewards import step_row_scores


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


#: ``episode_advantage`` values: verl-agent's per-row scores and statistics, or one return per episode.
EPISODE_ADVANTAGE_MODES = ("rows", "episodes")


def check_episode_advantage(mode: str) -> None:
    if mode not in EPISODE_ADVANTAGE_MODES:
        raise ValueError(
            f"unknown episode_advantage {mode!r}: use 'rows' (verl-agent, the table configs) or 'episodes'"
        )


def group_members(groups: list) -> dict:
    """Row indices of each group label, in first-seen order."""
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def row_advantages(scores: torch.Tensor, groups: list, *, norm_by_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Row scores normalised over all rows of their group (verl-agent ``compute_mean_std_cross_all_data``).

    Args:
        scores: ``(N,)`` one score per turn row.
        groups: ``(N,)`` hashable group (task) label of each row.

    Returns:
        ``(N,)`` ``(s - mean_group) / (std_group + eps)`` (std unbiased); a group with a single row uses mean 0
        and std 1, as verl-agent.
    """
    out = scores.clone()
    for rows in group_members(groups).values():
        vals = scores[rows]
        if len(rows) == 1:
            mean, std = scores.new_tensor(0.0), scores.new_tensor(1.0)
        else:
            mean, std = vals.mean(), vals.std()
        out[rows] = (vals - mean) / (std + eps) if norm_by_std else vals - mean
    return out


def group_advantages(trainer: Policy, batch: TurnBatch) -> dict[str, float]:
    """GRPO's advantage function: group-normalised advantages on every response token.

    Per row (``episode_advantage="rows"``, verl-agent) or per episode (``"episodes"``); fills
    ``batch["advantages"]`` (B, T); reads ``trainer.args.group_size``, ``norm_adv_by_std``, ``invalid_penalty``.
    """
    a = trainer.args
    mode = getattr(a, "episode_advantage", "rows")
    check_episode_advantage(mode)
    rets = episode_returns(batch)
    returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])
    if mode == "rows":
        scores = torch.tensor(step_row_scores(batch.meta, a.invalid_penalty))
        per_turn = row_advantages(scores, [m["group"] for m in batch.meta], norm_by_std=a.norm_adv_by_std).tolist()
    else:
        adv = grpo_advantages(returns, a.group_size, norm_by_std=a.norm_adv_by_std)
        per_turn = [float(adv[m["episode"]]) for m in batch.meta]
    batch["advantages"] = broadcast_turn_values(per_turn, batch["completion_mask"])  # (B, T)
    return {
        "adv/mean_abs": float(torch.tensor(per_turn).abs().mean()),
        "adv/groups_all_equal": float(flat_group_fraction(returns, a.group_size)),
    }


def flat_group_fraction(returns: torch.Tensor, group_size: int) -> float:
    """Fraction of groups whose returns are all equal (their advantages are all 0: nothing to learn)."""
    r = returns.view(-1, group_size)
    return float(((r.max(1).values - r.min(1).values) == 0).float().mean())
