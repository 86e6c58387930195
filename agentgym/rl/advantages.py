"""Advantage primitives shared by the baselines: group normalisation and group statistics.

Each method's advantage (GRPO's group-relative one, RLOO's leave-one-out, GiGPO's two levels, ERL's per-part
groups) is written in its own file under ``baselines/`` and built from these.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def group_members(groups: Sequence[Hashable]) -> dict:
    """Row indices of each group label, in first-seen order."""
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def group_normalize(
    scores: torch.Tensor,
    groups: Sequence[Hashable],
    *,
    norm_by_std: bool = True,
    singleton_mean_zero: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Scores normalised within their group: ``(s - mean_group) / (std_group + eps)`` (std unbiased).

    This is GRPO's advantage (Shao et al. 2024) over any grouping: verl-agent's rows of a task group
    (``compute_mean_std_cross_all_data=True``), a task's G episodes, GiGPO's anchor-state step groups.

    Args:
        scores: ``(N,)`` one score per row.
        groups: ``(N,)`` hashable group label of each row.
        norm_by_std: divide by the group's std (+eps); False: only subtract the mean.
        singleton_mean_zero: a one-member group uses mean 0 and std 1 (verl-agent's episode level: the score
            itself); False: its own mean (an advantage of 0, as GiGPO's step level and a group of one episode).

    Returns:
        ``(N,)`` normalised scores.
    """
    out = scores.clone()
    for rows in group_members(groups).values():
        vals = scores[rows]
        if len(rows) == 1:
            mean = scores.new_tensor(0.0) if singleton_mean_zero else vals.mean()
            std = scores.new_tensor(1.0)
        else:
            mean, std = vals.mean(), vals.std()
        out[rows] = (vals - mean) / (std + eps) if norm_by_std else vals - mean
    return out


def normalize_contiguous_groups(
    values: torch.Tensor, group_size: int, *, norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """:func:`group_normalize` of rows laid out in contiguous groups of ``group_size`` (a task's G episodes).

    Computed on the ``(groups, G)`` view in one batched reduction, as verl's ``compute_grpo_outcome_advantage``;
    the batched sums can round differently in the last bit from :func:`group_normalize`'s group-by-group ones,
    so the episode-level advantages keep this form. A group of one gets 0 (its own mean).

    Args:
        values: ``(N,)`` with ``N = groups x group_size``.

    Returns:
        ``(N,)`` ``(v - mean_G) / (std_G + eps)`` (std unbiased), or ``v - mean_G`` without ``norm_by_std``.
    """
    r = values.view(-1, group_size)  # (groups, G)
    mean = r.mean(dim=1, keepdim=True)
    adv = r - mean
    if norm_by_std:
        std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.ones_like(mean)
        adv = adv / (std + eps)
    return adv.view(-1)


def flat_group_fraction(returns: torch.Tensor, group_size: int) -> float:
    """Fraction of groups whose returns are all equal (their advantages are all 0: nothing to learn).

    Args:
        returns: ``(N,)`` episode returns, the episodes of a group contiguous (``N = groups x group_size``).
    """
    r = returns.view(-1, group_size)  # (groups, G)
    return float(((r.max(1).values - r.min(1).values) == 0).float().mean())
