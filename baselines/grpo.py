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
the reference model and minus an entropy bonus (verl-agent's GRPO settings in the GiGPO/SAPO table).

Run: ``python baselines/grpo.py --config baselines/configs/grpo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python baselines/grpo.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.losses import low_var_kl, masked_sum, ppo_clip_loss
from agentgym.rl.rewards import step_row_scores
from agentgym.rl.trainer import Trainer

#: ``episode_advantage`` values: verl-agent's per-row scores and statistics, or one return per episode.
EPISODE_ADVANTAGE_MODES = ("rows", "episodes")


@dataclass
class Args(BaseArgs):
    """GRPO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    norm_adv_by_std: bool = True
    """divide by the group's std (GRPO); False gives Dr.GRPO-style mean-centring only"""
    episode_advantage: str = "rows"
    """``rows``: each turn row scored episode reward - penalty(turn), mean/std over all rows of the group
    (verl-agent ``compute_mean_std_cross_all_data=True``); ``episodes``: one summed return per episode,
    mean/std over the group's G episodes"""
    distributed: str = "ddp"
    """multi-GPU strategy under torchrun: ddp (replicated) or fsdp (decoder layers sharded)"""


def episode_returns(batch: TurnBatch) -> dict[int, float]:
    """Sum of shaped turn rewards per episode."""
    out: dict[int, float] = {}
    for m in batch.meta:
        out[m["episode"]] = out.get(m["episode"], 0.0) + float(m["reward"])
    return out


def grpo_advantages(returns: torch.Tensor, group_size: int, *, norm_by_std: bool = True, eps: float = 1e-6):
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


def row_advantages(scores: torch.Tensor, groups: list, *, norm_by_std: bool = True, eps: float = 1e-6):
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


def group_members(groups: list) -> dict:
    """Row indices of each group label, in first-seen order."""
    members: dict = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    return members


def check_episode_advantage(mode: str) -> None:
    if mode not in EPISODE_ADVANTAGE_MODES:
        raise ValueError(
            f"unknown episode_advantage {mode!r}: use 'rows' (verl-agent, the table configs) or 'episodes'"
        )


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    """Group-normalised advantages on every response token (per row, or per episode: ``episode_advantage``)."""
    a = trainer.args
    mode = getattr(a, "episode_advantage", "rows")
    check_episode_advantage(mode)
    rets = episode_returns(batch)
    returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])
    if mode == "rows":
        scores = torch.tensor(step_row_scores(batch.meta, a.invalid_penalty))
        adv_rows = row_advantages(scores, [m["group"] for m in batch.meta], norm_by_std=a.norm_adv_by_std)
        per_turn = adv_rows.tolist()
    else:
        adv = grpo_advantages(returns, a.group_size, norm_by_std=a.norm_adv_by_std)
        per_turn = [float(adv[m["episode"]]) for m in batch.meta]
    batch["advantages"] = broadcast_turn_values(per_turn, batch["completion_mask"])  # (B, T)
    return {
        "adv/mean_abs": float(torch.tensor(per_turn).abs().mean()),
        "adv/groups_all_equal": float(_frac_flat_groups(returns, a.group_size)),
    }


def _frac_flat_groups(returns: torch.Tensor, g: int) -> float:
    r = returns.view(-1, g)
    return float(((r.max(1).values - r.min(1).values) == 0).float().mean())


def clipped_policy_loss(a, per_token_logps: torch.Tensor, mb: TurnBatch, mask: torch.Tensor, normalizer: float):
    """PPO-clip on ``mb``'s advantages over ``mask`` (GRPO's policy term, shared by ERL/SEED/SAPO)."""
    return ppo_clip_loss(
        per_token_logps,
        mb["old_per_token_logps"],
        mb["advantages"],
        mask,
        epsilon_low=a.epsilon_low,
        epsilon_high=a.epsilon_high,
        normalizer=normalizer,
        clip_ratio_c=getattr(a, "clip_ratio_c", None),
    )


def add_kl_entropy(
    a, loss: torch.Tensor, result: dict, out: dict, mb: TurnBatch, mask: torch.Tensor, normalizer: float
) -> torch.Tensor:
    """``loss + beta * low_var_kl - entropy_coef * entropy`` (each when its coefficient is > 0).

    Writes ``losses/kl_ref`` / ``losses/entropy`` (detached, unscaled) into ``result``.
    """
    if a.beta > 0:
        kl = masked_sum(low_var_kl(out["per_token_logps"], mb["ref_per_token_logps"]), mask) / normalizer
        loss = loss + a.beta * kl
        result["losses/kl_ref"] = kl.detach()
    if a.entropy_coef > 0:
        ent = masked_sum(out["entropy"], mask) / normalizer
        loss = loss - a.entropy_coef * ent
        result["losses/entropy"] = ent.detach()
    return loss


def policy_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float):
    """PPO-clip + beta * low_var_kl - entropy_coef * entropy, each a token mean over the mini-batch."""
    a = trainer.args
    out = trainer.forward(mb, want_entropy=a.entropy_coef > 0)
    per_token_logps = out["per_token_logps"]  # (B, T)
    mask = mb["completion_mask"]
    pg_loss, stats = clipped_policy_loss(a, per_token_logps, mb, mask, n_tokens)
    result = {
        "losses/policy_loss": pg_loss.detach(),
        "losses/approx_kl": stats["approx_kl"],
        "losses/clipfrac": stats["clipfrac"],
    }
    if "clipfrac_lower" in stats:
        result["losses/clipfrac_lower"] = stats["clipfrac_lower"]
    loss = add_kl_entropy(a, pg_loss, result, out, mb, mask, n_tokens)
    # stats are reported per micro-batch token mean; rescale the summed pieces back to that scale
    scale = n_tokens / max(float(mask.sum()), 1.0)
    for k in ("losses/policy_loss", "losses/kl_ref", "losses/entropy"):
        if k in result:
            result[k] = result[k] * scale
    return loss, result


def train(args: Args) -> dict[str, float]:
    """Train with GRPO; returns the last iteration's metrics."""
    trainer = Trainer(args, algo="grpo")
    return trainer.fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
