"""GiGPO: Group-in-Group Policy Optimization (Feng et al. 2025, arXiv 2505.10978; verl-agent ``gigpo/core_gigpo.py``).

What differs from GRPO: a second, step-level advantage. Within a task's group, turns whose observation
is *identical* (an "anchor state" reached by several episodes) form a step group; each turn's
discounted step return ``R_t = sum_k gamma^k r_{t+k}`` (gamma = 0.95) is normalised within its step group.
The joint advantage of a turn is

    A = A_episode + omega * A_step       (omega = 1)

* episode level: ``(s - mean) / (std + eps)`` over the group ("w/ std", ``mode="mean_std_norm"``) or
  ``s - mean`` ("w/o std", ``mode="mean_norm"``). As verl-agent (``episode_norm_reward`` with
  ``compute_mean_std_cross_all_data=True``), each turn row's score is its episode's reward minus that turn's
  invalid-action penalty and the mean/std are taken over the group's turn rows, so longer episodes weigh
  more; a group of one has mean 0, std 1. ``episode_advantage="episodes"``: one summed shaped return per
  episode, mean/std over the G episodes (verl-agent's ``compute_mean_std_cross_all_data=False``).
* step level: same normalisation over the step group; a singleton step group gets 0 (its own mean). The step
  return, ``step_return="verl-agent"`` (the table configs): ``R_t = sum_k gamma^k r_{t+k} - penalty_t``, the
  discounted *unpenalised* rewards (``10 x success``) minus this turn's own invalid-action penalty, as
  verl-agent's ``compute_step_discounted_returns`` then ``apply_invalid_action_penalty`` on ``step_rewards``
  (f974dc5 and d0b9724). ``step_return="penalised"`` (ours, the default): the discounted sum of the
  *penalised* turn rewards, so a later invalid turn lowers every earlier turn's return.

Actor loss: GRPO's ``policy_loss``, imported from ``baselines/grpo.py`` (PPO-clip, KL, entropy).

Run: ``python baselines/gigpo.py --config baselines/configs/gigpo_std_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.advantages import group_normalize, normalize_contiguous_groups
from agentgym.rl.batch import TurnBatch, broadcast_turn_values, episode_groups
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.losses import episode_returns
from agentgym.rl.rewards import step_row_scores, turn_penalties
from agentgym.rl.trainer import Trainer
from baselines.grpo import policy_loss


@dataclass
class Args(BaseArgs):
    """GiGPO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    mode: str = "mean_std_norm"
    """``mean_std_norm`` (GiGPO w/ std) or ``mean_norm`` (GiGPO w/o std)"""
    gamma: float = 0.95
    """discount of step returns (paper: 0.95)"""
    step_advantage_w: float = 1.0
    """omega, weight of the step-level advantage (paper: 1)"""
    step_return: str = "penalised"
    """``verl-agent``: discounted unpenalised rewards minus the turn's own penalty (the table configs);
    ``penalised`` (ours): discounted sum of the penalised turn rewards"""
    episode_advantage: str = "rows"
    """episode level: ``rows`` (verl-agent: turn rows scored episode reward - penalty(turn), statistics over all
    rows of the group) or ``episodes`` (summed episode returns, statistics over the G episodes)"""


def discounted_step_returns(rewards: list[float], gamma: float) -> list[float]:
    """``R_t = r_t + gamma R_{t+1}`` over one episode's turn rewards (GiGPO Eq. 5)."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def step_returns(meta: list[dict], gamma: float, invalid_penalty: float, mode: str = "penalised") -> list[float]:
    """Each turn row's step return (see the module docstring for the two ``mode`` values).

    Args:
        meta: turn rows (``episode``, shaped ``reward``, and ``penalty`` or ``valid``), an episode's rows in order.
    """
    if mode not in ("verl-agent", "penalised"):
        raise ValueError(f"unknown step_return {mode!r}: use verl-agent (the table configs) or penalised (ours)")
    pen = turn_penalties(meta, invalid_penalty)
    out = [0.0] * len(meta)
    for rows in episode_groups(meta).values():
        if mode == "verl-agent":
            raw = [meta[i]["reward"] + pen[i] for i in rows]
            for i, r in zip(rows, discounted_step_returns(raw, gamma)):
                out[i] = r - pen[i]
        else:
            for i, r in zip(rows, discounted_step_returns([meta[i]["reward"] for i in rows], gamma)):
                out[i] = r
    return out


def gigpo_advantages(
    episode_return: torch.Tensor,
    step_return: torch.Tensor,
    task_group: list[int],
    anchor_obs: list[str],
    *,
    mode: str = "mean_std_norm",
    step_advantage_w: float = 1.0,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-turn GiGPO advantages.

    Args:
        episode_return: ``(N,)`` the return of the episode each turn row belongs to.
        step_return: ``(N,)`` each turn's discounted step return.
        task_group: ``(N,)`` task (episode group) index of each row.
        anchor_obs: ``(N,)`` the observation each row's prompt was built for.

    Returns:
        ``(joint, episode_level, step_level)`` advantages, each ``(N,)``.
    """
    if mode not in ("mean_std_norm", "mean_norm"):
        raise ValueError(f"unknown GiGPO mode {mode!r}: use mean_std_norm (w/ std) or mean_norm (w/o std)")
    use_std = mode == "mean_std_norm"
    # episode level: a task group of one row has mean 0, std 1 (verl-agent)
    a_ep = group_normalize(episode_return, list(task_group), norm_by_std=use_std, singleton_mean_zero=True, eps=eps)
    # step level: rows of one task that saw the same observation (anchor state); a singleton step group gets 0
    step_groups = [(g, o) for g, o in zip(task_group, anchor_obs)]
    a_step = group_normalize(step_return, step_groups, norm_by_std=use_std, singleton_mean_zero=False, eps=eps)
    return a_ep + step_advantage_w * a_step, a_ep, a_step


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    """GiGPO's joint advantage (episode level + omega x step level) on every response token."""
    a = trainer.args
    mode = a.episode_advantage
    if mode not in ("rows", "episodes"):
        raise ValueError(
            f"unknown episode_advantage {mode!r}: use 'rows' (verl-agent, the table configs) or 'episodes'"
        )
    rets = episode_returns(batch)
    step_ret = step_returns(batch.meta, a.gamma, a.invalid_penalty, a.step_return)
    if mode == "rows":
        row_score = torch.tensor(step_row_scores(batch.meta, a.invalid_penalty))
    else:
        row_score = torch.tensor([rets[m["episode"]] for m in batch.meta])
    joint, a_ep, a_step = gigpo_advantages(
        row_score,
        torch.tensor(step_ret),
        [m["group"] for m in batch.meta],
        [m["observation"] for m in batch.meta],
        mode=a.mode,
        step_advantage_w=a.step_advantage_w,
    )
    if mode == "episodes":  # statistics over the G episodes, not over rows
        returns = torch.tensor([rets.get(e, 0.0) for e in range(max(rets) + 1)])
        a_ep_epi = normalize_contiguous_groups(returns, a.group_size, norm_by_std=a.mode == "mean_std_norm")
        a_ep = torch.tensor([float(a_ep_epi[m["episode"]]) for m in batch.meta])
        joint = a_ep + a.step_advantage_w * a_step
    batch["advantages"] = broadcast_turn_values(joint.tolist(), batch["completion_mask"])  # (B, T)
    n_groups = len({(m["group"], m["observation"]) for m in batch.meta})
    return {
        "adv/episode_mean_abs": float(a_ep.abs().mean()),
        "adv/step_mean_abs": float(a_step.abs().mean()),
        "adv/mean_step_group_size": len(batch) / max(n_groups, 1),
    }


def train(args: Args) -> dict[str, float]:
    """Train with GiGPO; returns the last iteration's metrics."""
    return Trainer(args, algo=f"gigpo-{args.mode}").fit(compute_advantages, policy_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
