"""PPO with a critic for multi-turn agents (Schulman et al. 2017, arXiv 1707.06347; verl's GAE PPO as verl-agent runs it).

What differs from GRPO: no groups (one rollout per task; 128 tasks x 1 to match GRPO's 16 x 8 budget) and
a learned critic (:class:`agentgym.rl.critic.ValueModel`, its own AdamW at ``critic_learning_rate``).
Advantages are token-level GAE,

    delta_k = r_k + gamma V_{k+1} - V_k,   A_k = delta_k + gamma lambda A_{k+1}   (gamma = lambda = 1),

run one of two ways (``episode_advantage``, the key GRPO's row/episode choice uses too):

* ``"rows"`` (default; verl-agent): every turn is its own row and its own GAE sequence, as verl's
  ``compute_gae_advantage_return`` sees verl-agent's step rows; the row's score, on its last response token, is
  the *episode* reward minus the invalid-action penalty of that turn (verl-agent ``EpisodeRewardManager`` puts
  ``episode_rewards`` there; the penalty is per step). V past the row's last token = 0.
* ``"episodes"``: one GAE sequence over the episode's response tokens in order (all turns concatenated), the
  shaped reward of each turn on its last token; V past the episode's last token = 0.

Returns ``A + V`` are the critic's targets; advantages are whitened over the batch (verl ``masked_whiten``).
Loss: PPO-clip actor loss (GRPO's ``policy_loss``, imported from ``baselines/grpo.py``) + the clipped value
loss ``0.5 max((V - y)^2, (clip(V, V_old +- c) - y)^2)`` with c = ``value_clip`` (verl default 0.5).

Run: ``python baselines/ppo.py --config baselines/configs/ppo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.batch import TurnBatch, episode_groups
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.distributed import DistInfo, sum_over_ranks
from agentgym.rl.losses import LossStats, clipped_value_loss, loss_normalizer
from agentgym.rl.rewards import turn_penalties
from agentgym.rl.trainer import Trainer
from baselines.grpo import policy_loss


@dataclass
class Args(BaseArgs):
    """PPO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    group_size: int = 1
    """one rollout per task"""
    critic_learning_rate: float = 1e-5
    """critic AdamW learning rate (paper: 1e-5)"""
    gamma: float = 1.0
    """GAE discount (verl-agent: 1.0)"""
    lam: float = 1.0
    """GAE lambda (verl-agent: 1.0)"""
    value_clip: float = 0.5
    """value clipping range around the old values (verl ``cliprange_value``: 0.5)"""
    vf_coef: float = 1.0
    """value-loss weight (the critic has its own optimizer, so this only scales its gradients)"""
    value_loss_factor: float = 0.5
    """the value loss is ``factor x max(squared errors)``: 0.5 in verl-agent f974dc5 and verl 0.9.1, 1.0 in d0b9724"""
    episode_advantage: str = "rows"
    """``rows``: per-turn GAE with the episode reward on each turn (verl-agent); ``episodes``: GAE over the
    episode's concatenated turns with each turn's own reward"""
    whiten_advantages: bool = True
    """whiten advantages over the batch's response tokens (verl GAE)"""


def token_gae(
    rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over one token sequence (``(N,)`` rewards and values; the value after the last token is 0).

    Returns:
        ``(advantages, returns)``, each ``(N,)``, ``returns = advantages + values``.
    """
    n = rewards.shape[0]
    adv = torch.zeros(n)
    last = 0.0
    for k in reversed(range(n)):
        next_v = values[k + 1] if k + 1 < n else 0.0
        delta = rewards[k] + gamma * next_v - values[k]
        last = delta + gamma * lam * last
        adv[k] = last
    return adv, adv + values


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8, dist: DistInfo | None = None
) -> torch.Tensor:
    """(x - mean) / std over masked entries (verl: unbiased variance); masked-out entries become 0.

    Args:
        dist: when given and distributed, mean and variance are taken over every rank's masked entries (verl
            whitens the global batch on its driver); each rank gets its own entries whitened.
    """
    m = mask.bool()
    x = values[m]
    if dist is not None and dist.enabled:
        n, total = sum_over_ranks([x.numel(), float(x.double().sum())], dist)
        if n < 2:
            return values * mask
        mean = total / n
        (sq,) = sum_over_ranks([float(((x.double() - mean) ** 2).sum())], dist)
        return (values - mean) / torch.sqrt(torch.tensor(sq / (n - 1) + eps)) * mask
    if x.numel() < 2:
        return values * mask
    out = (values - x.mean()) / torch.sqrt(x.var() + eps)
    return out * mask


def row_scores(meta: list[dict], rows: list[int], invalid_penalty: float) -> list[float]:
    """verl-agent's per-turn scores of one episode: episode reward - ``invalid_penalty`` x (this turn invalid).

    The episode reward is the sum of the turns' shaped rewards with their invalid penalties added back
    (10 x success on ALFWorld/WebShop), so each penalty counts on its own turn only.
    """
    pen = turn_penalties([meta[i] for i in rows], invalid_penalty)
    episode = sum(meta[i]["reward"] + p for i, p in zip(rows, pen))
    return [episode - p for p in pen]


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    a = trainer.args
    if a.episode_advantage not in ("rows", "episodes"):
        raise ValueError(
            "episode_advantage must be 'rows' (verl-agent, GAE per turn) or 'episodes' (turns concatenated), "
            f"got {a.episode_advantage!r}"
        )
    mask = batch["completion_mask"]
    values = batch["values"]  # (B, T) old critic values
    adv = torch.zeros_like(values)
    returns = torch.zeros_like(values)
    for rows in episode_groups(batch.meta).values():
        lens = [int(mask[i].sum()) for i in rows]
        if a.episode_advantage == "rows":
            for i, n, score in zip(rows, lens, row_scores(batch.meta, rows, a.invalid_penalty)):
                if n:
                    r = torch.zeros(n)
                    r[-1] = score
                    adv[i, :n], returns[i, :n] = token_gae(r, values[i, :n], a.gamma, a.lam)
            continue
        r_seq, v_seq = [], []
        for i, n in zip(rows, lens):
            r = torch.zeros(n)
            if n:
                r[-1] = batch.meta[i]["reward"]
            r_seq.append(r)
            v_seq.append(values[i, :n])
        A, R = token_gae(torch.cat(r_seq), torch.cat(v_seq), a.gamma, a.lam)
        k = 0
        for i, n in zip(rows, lens):
            adv[i, :n], returns[i, :n] = A[k : k + n], R[k : k + n]
            k += n
    batch["returns"] = returns
    world = trainer.dist if a.mini_batch_scope == "global" else None  # verl
    batch["advantages"] = masked_whiten(adv, mask, dist=world) if a.whiten_advantages else adv
    m = mask.bool()
    ret_var = returns[m].var() if m.sum() > 1 else torch.tensor(0.0)
    explained = 1.0 - float((returns[m] - values[m]).var() / ret_var) if float(ret_var) > 0 else 0.0
    return {
        "adv/mean_abs_raw": float((adv.abs() * mask).sum() / mask.sum().clamp(min=1)),
        "adv/std_raw": float(adv[m].std()) if m.sum() > 1 else 0.0,
        "critic/value_mean": float((values * mask).sum() / mask.sum().clamp(min=1)),
        "critic/explained_variance": explained,  # 1 - Var(G - V) / Var(G) over response tokens
    }


def ppo_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float) -> tuple[torch.Tensor, LossStats]:
    """Actor loss (GRPO's: PPO-clip + beta * k3 KL - entropy bonus) + vf_coef * clipped value loss.

    Both aggregated by ``loss_agg_mode`` over the mini-batch (token means by default).
    """
    a = trainer.args
    loss, stats = policy_loss(trainer, mb, n_tokens, n_rows)  # the actor's: GRPO's loss
    mask = mb["completion_mask"]  # (B, T)
    values = trainer.critic_values(mb)  # (B, T)
    v_loss, v_clipfrac = clipped_value_loss(
        values,
        mb["values"],
        mb["returns"],
        mask,
        clip=a.value_clip,
        normalizer=loss_normalizer(a, n_tokens, n_rows),
        factor=a.value_loss_factor,
        loss_agg_mode=a.loss_agg_mode,
    )
    stats["losses/value_loss"] = v_loss.detach() * n_tokens / max(float(mask.sum()), 1.0)
    stats["losses/value_clipfrac"] = v_clipfrac
    return loss + a.vf_coef * v_loss, stats


def train(args: Args) -> dict[str, float]:
    """Train with PPO; returns the last iteration's metrics."""
    return Trainer(args, algo="ppo", critic_learning_rate=args.critic_learning_rate).fit(compute_advantages, ppo_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
