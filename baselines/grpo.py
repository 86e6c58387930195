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
loss is PPO-clip on token ratios, aggregated over the mini-batch (verl's ``loss_agg_mode``, token mean by
default), plus beta * k3 KL to the reference model and minus an entropy bonus (verl-agent's GRPO settings in
the GiGPO/SAPO table):

    L = agg(-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)) + beta agg(k3) - c_H agg(H),   r = pi / pi_old.

Both are written below (:func:`compute_advantages`, :func:`policy_loss`) from the primitives of
``agentgym.rl.advantages`` and ``agentgym.rl.losses``.

Run: ``python baselines/grpo.py --config baselines/configs/grpo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python baselines/grpo.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.advantages import flat_group_fraction, group_normalize, normalize_contiguous_groups
from agentgym.rl.batch import TurnBatch, broadcast_turn_values
from agentgym.rl.config import GroupArgs, parse_args
from agentgym.rl.losses import (
    LossStats,
    agg_loss,
    clipped_policy_loss,
    episode_returns,
    loss_normalizer,
    low_var_kl,
    micro_batch_scale,
    scale_stats,
)
from agentgym.rl.rewards import step_row_scores
from agentgym.rl.trainer import Trainer


@dataclass
class Args(GroupArgs):
    """GRPO settings (``norm_adv_by_std``, ``episode_advantage``, ``distributed`` and the shared ones are in
    ``agentgym.rl.config``)."""


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    """GRPO's advantage on every response token: group-normalised row scores (or episode returns).

    Fills ``batch["advantages"]`` (B, T); reads ``group_size``, ``norm_adv_by_std``, ``episode_advantage`` and
    ``invalid_penalty`` from ``trainer.args``.
    """
    a = trainer.args
    if a.episode_advantage not in ("rows", "episodes"):
        raise ValueError(
            f"unknown episode_advantage {a.episode_advantage!r}: use 'rows' (verl-agent, the table configs) or "
            "'episodes'"
        )
    rets = episode_returns(batch)
    returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])  # (N,) episodes, groups contiguous
    if a.episode_advantage == "rows":  # verl-agent: statistics over all turn rows of the task group
        scores = torch.tensor(step_row_scores(batch.meta, a.invalid_penalty))  # (B,) R_episode - penalty(turn)
        groups = [m["group"] for m in batch.meta]
        per_turn = group_normalize(scores, groups, norm_by_std=a.norm_adv_by_std).tolist()
    else:  # statistics over the group's G episode returns
        adv = normalize_contiguous_groups(returns, a.group_size, norm_by_std=a.norm_adv_by_std)  # (N,)
        per_turn = [float(adv[m["episode"]]) for m in batch.meta]
    batch["advantages"] = broadcast_turn_values(per_turn, batch["completion_mask"])  # (B, T)
    return {
        "adv/mean_abs": float(torch.tensor(per_turn).abs().mean()),
        "adv/groups_all_equal": float(flat_group_fraction(returns, a.group_size)),
    }


def policy_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float) -> tuple[torch.Tensor, LossStats]:
    """GRPO's loss on a micro-batch: PPO-clip + beta * k3 KL - entropy_coef * entropy (verl's actor loss).

    ``n_tokens`` / ``n_rows`` are the mini-batch's counts (:func:`agentgym.rl.losses.loss_counts`), so the
    micro-batch losses add up to the mini-batch's aggregate.
    """
    a = trainer.args
    out = trainer.forward(mb, want_entropy=a.entropy_coef > 0)
    per_token_logps = out["per_token_logps"]  # (B, T)
    mask = mb["completion_mask"]  # (B, T)
    norm = loss_normalizer(a, n_tokens, n_rows)  # tokens (token-mean) or rows (seq-mean-*)
    # -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) per token, r = exp(logp - old_logp), aggregated by
    # loss_agg_mode; dual clip when clip_ratio_c (ppo_clip_loss with the config's epsilons)
    pg_loss, stats = clipped_policy_loss(a, per_token_logps, mb, mask, norm)
    loss = pg_loss
    result: LossStats = {"losses/policy_loss": pg_loss.detach(), **{f"losses/{k}": v for k, v in stats.items()}}
    if a.beta > 0:  # k3 estimate of KL(pi || pi_ref) per token
        kl = agg_loss(low_var_kl(per_token_logps, mb["ref_per_token_logps"]), mask, a.loss_agg_mode, norm)
        loss = loss + a.beta * kl
        result["losses/kl_ref"] = kl.detach()
    if a.entropy_coef > 0:
        entropy = agg_loss(out["entropy"], mask, a.loss_agg_mode, norm)
        loss = loss - a.entropy_coef * entropy
        result["losses/entropy"] = entropy.detach()
    return loss, scale_stats(result, micro_batch_scale(norm, mask, a.loss_agg_mode))  # micro-batch means


def train(args: Args) -> dict[str, float]:
    """Train with GRPO; returns the last iteration's metrics."""
    trainer = Trainer(args, algo="grpo")
    return trainer.fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
