"""SAPO (Liang et al., arXiv 2608.19842): the policy is its own critic, read out through two reserved tokens.

What differs from PPO: no critic network. Two reserved vocabulary tokens w+ and w- are never sampled
(suppressed in generation, excluded from the softmax of log-probs and entropy); the gap of their raw
logits in the *same forward pass* that scores the response gives the value read-out

    p(c) = clip((z_{w+}(c) - z_{w-}(c)) / tau_v, -1, 1),

taken at the last token of the state part c^s_t (``V(s_t) = R_max p``) and at the last token of the action
part [c^s_t; a_t] (``Q(s_t, a_t) = R_max p``). Per-turn advantages run backwards with the old policy's values

    delta_t = r_t + gamma (1 - d_t) V_old(s_{t+1}) - V_old(s_t),   A_t = delta_t + gamma lambda (1 - d_t) A_{t+1},

targets ``y^V = V_old + A`` and ``y^Q = r_t + gamma (1 - d_t) Q_old(s_{t+1}, a_{t+1})`` (SARSA); invalid turns get
``A~ = A - c_inv m_inv``; then the batch of all turns is normalised, ``A^ = (A~ - mu_B) / (sigma_B + eps)``, and
copied to the turn's response tokens. Loss: PPO-clip + c_V L_V + c_Q L_Q (clipped squared errors on the
read-outs, per turn) + beta KL - c_H entropy. One rollout per task (no groups).

Values the paper leaves to its supplement are arguments here; **our defaults** (not the paper's):
``tau_v = 5`` (a 5-logit gap reads as the full value; LM logit gaps are O(1-10)), ``r_max = 10`` (the 10 x success
reward scale of ALFWorld/WebShop), ``value_coef = q_coef = 0.5`` (PPO's usual c_V), ``gamma = 0.99``,
``lam = 0.95`` (GAE's usual pair), ``value_clip = 0.2`` (in read-out units p, i.e. +-0.2 R_max per update),
w+/w- = two unused embedding rows past the tokenizer when the checkpoint has them (Qwen2.5), else two added
special tokens. The last turn of an episode has ``d_t = 1`` whether it terminated or was truncated (no state
after it is rolled out).

Two departures, each measured on the tiny-model check (baselines/README.md, "Why PPO and SAPO learned in only
some seeds"): the value and Q losses train the *unclipped* read-out ``R_max (z+ - z-) / tau_v``
(``train_raw_readout``; advantages still use the clipped one), because through ``clip`` a saturated read-out
gets no gradient and stays saturated; and ``invalid_coef = 0`` by default, because the shared protocol's reward
already subtracts ``invalid_penalty`` on an invalid turn and the paper's ``A~ = A - c_inv m_inv`` on top of it
penalises the same action twice (:func:`check_args` refuses both at once).

Run: ``python baselines/sapo.py --config baselines/configs/sapo_alfworld_qwen2.5-1.5b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.rl.advantages import group_normalize
from agentgym.rl.batch import TurnBatch, broadcast_turn_values, episode_groups
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.losses import add_kl_entropy, clipped_policy_loss, micro_batch_scale, scale_stats
from agentgym.rl.trainer import Trainer

#: Names of the two reserved tokens when they must be added to the tokenizer.
W_PLUS, W_MINUS = "<|sapo_w_plus|>", "<|sapo_w_minus|>"


@dataclass
class Args(BaseArgs):
    """SAPO settings (the shared ones are in ``agentgym.rl.config.Args``)."""

    group_size: int = 1
    """one rollout per task (no groups)"""
    tau_v: float = 5.0
    """read-out temperature tau_v (ours)"""
    r_max: float = 10.0
    """value scale R_max (ours: the 10 x success reward)"""
    gamma: float = 0.99
    """discount (ours)"""
    lam: float = 0.95
    """lambda of the per-turn lambda-return (ours)"""
    value_coef: float = 0.5
    """c_V (ours)"""
    q_coef: float = 0.5
    """c_Q (ours)"""
    value_clip: float = 0.2
    """clip of read-out updates in p units (ours); None disables"""
    invalid_coef: float = 0.0
    """c_inv, the paper's advantage penalty of invalid turns (A~ = A - c_inv m_inv). Default 0: the shared protocol's
    reward already subtracts ``invalid_penalty`` (0.1) on those turns, and the two together penalise an invalid
    action twice; use ``invalid_coef > 0`` only with ``invalid_penalty: 0`` (the trainer refuses both)."""
    train_raw_readout: bool = True
    """value/Q losses on the unclipped read-out R_max (z+ - z-) / tau_v (ours; False: on the clipped one, whose
    gradient is 0 once saturated)"""
    adv_eps: float = 1e-6
    """epsilon of the batch normalisation"""
    readout_lr_scale: float = 1.0
    """the w+/w- rows' AdamW step multiplied by this (ours; 1: the paper's one learning rate). Adam moves each weight
    by about the learning rate per step whatever its gradient, so at lr 1e-5 and the ~20 steps of a CPU run the two
    rows (random, norm ~0.5 on SmolLM2) move ~1%: the read-out stays a random projection of the hidden state. A
    scale of 100 gives the two rows lr 1e-3 (a linear probe's rate) and leaves every other weight's step as it is"""


def readout_p(readout: torch.Tensor, tau_v: float, *, clip: bool = True) -> torch.Tensor:
    """``clip((z+ - z-) / tau_v, -1, 1)`` from ``(..., 2)`` raw logits of (w+, w-); ``clip=False``: the raw gap."""
    p = (readout[..., 0] - readout[..., 1]) / tau_v
    return p.clamp(-1.0, 1.0) if clip else p


def state_action_readouts(
    readout: torch.Tensor, completion_mask: torch.Tensor, tau_v: float, r_max: float, *, clip: bool = True
):
    """``V(s_t)`` and ``Q(s_t, a_t)`` per row from ``(B, T+1, 2)`` read-out logits.

    Column 0 is the last prompt token (state end); column ``L_b`` (the response length) is the last response
    token (action end). ``clip=False`` returns ``R_max (z+ - z-) / tau_v`` unclipped (what the value losses train).

    Returns:
        ``(V, Q)``, each ``(B,)``.
    """
    p = readout_p(readout, tau_v, clip=clip)  # (B, T+1)
    last = completion_mask.sum(1).long().clamp(min=1)  # (B,) column of the action's last token
    v = r_max * p[:, 0]
    q = r_max * p.gather(1, last[:, None]).squeeze(1)
    return v, q


def sapo_turn_targets(
    rewards: list[float],
    dones: list[bool],
    v_old: list[float],
    q_old: list[float],
    invalid: list[bool],
    *,
    gamma: float,
    lam: float,
    invalid_coef: float,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """One episode's per-turn (A, A~, y^V, y^Q), computed backwards.

    Returns:
        advantages A_t, penalised advantages A~_t, value targets y^V_t, Q targets y^Q_t (lists of len T).
    """
    n = len(rewards)
    adv = [0.0] * n
    next_adv = 0.0
    for t in reversed(range(n)):
        cont = 0.0 if dones[t] else 1.0
        v_next = v_old[t + 1] if t + 1 < n else 0.0
        delta = rewards[t] + gamma * cont * v_next - v_old[t]
        next_adv = delta + gamma * lam * cont * next_adv
        adv[t] = next_adv
    y_v = [v_old[t] + adv[t] for t in range(n)]
    y_q = [rewards[t] + gamma * (0.0 if dones[t] else 1.0) * (q_old[t + 1] if t + 1 < n else 0.0) for t in range(n)]
    pen = [adv[t] - invalid_coef * float(invalid[t]) for t in range(n)]
    return adv, pen, y_v, y_q


def batch_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over all turns of the batch as one group (std unbiased; one turn gets 0)."""
    return group_normalize(x, [0] * x.numel(), singleton_mean_zero=False, eps=eps)


def readout_corr(x: torch.Tensor, returns: torch.Tensor) -> float:
    """Pearson correlation of a read-out with the returns (0 when either is constant or too short)."""
    if x.numel() <= 2 or float(x.std()) == 0.0 or float(returns.std()) == 0.0:
        return 0.0
    return float(torch.corrcoef(torch.stack([x.float(), returns.float()]))[0, 1])


def explained_variance(x: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - x) / Var(returns)`` (0 when the returns are constant, as PPO's)."""
    var = float(returns.float().var()) if returns.numel() > 1 else 0.0
    if var == 0.0:
        return 0.0
    return 1.0 - float((returns.float() - x.float()).var()) / var


def discounted_returns(meta: list[dict], gamma: float) -> torch.Tensor:
    """The Monte-Carlo discounted return from each turn of a batch (``meta``: the rows' ``episode``, ``t`` and
    ``reward``): what the V and Q read-outs are compared with."""
    mc = torch.zeros(len(meta))
    for rows in episode_groups(meta).values():
        g = 0.0
        for i in reversed(rows):
            g = meta[i]["reward"] + gamma * g
            mc[i] = g
    return mc


def compute_advantages(trainer: Trainer, batch: TurnBatch) -> dict[str, float]:
    a = trainer.args
    check_args(a)
    v_old, q_old = state_action_readouts(batch["readout"], batch["completion_mask"], a.tau_v, a.r_max)
    B = len(batch)
    pen = torch.zeros(B)
    y_v = torch.zeros(B)
    y_q = torch.zeros(B)
    for rows in episode_groups(batch.meta).values():
        rewards = [batch.meta[i]["reward"] for i in rows]
        dones = [bool(batch.meta[i]["done"]) or k == len(rows) - 1 for k, i in enumerate(rows)]
        _, p, yv, yq = sapo_turn_targets(
            rewards,
            dones,
            [float(v_old[i]) for i in rows],
            [float(q_old[i]) for i in rows],
            [not batch.meta[i]["valid"] for i in rows],
            gamma=a.gamma,
            lam=a.lam,
            invalid_coef=a.invalid_coef,
        )
        for k, i in enumerate(rows):
            pen[i], y_v[i], y_q[i] = p[k], yv[k], yq[k]
    adv = batch_normalize(pen, a.adv_eps)
    batch["advantages"] = broadcast_turn_values(adv.tolist(), batch["completion_mask"])
    batch["v_old"], batch["q_old"], batch["y_v"], batch["y_q"] = v_old, q_old, y_v, y_q
    mc = discounted_returns(batch.meta, a.gamma)  # to report how well V tracks the realised returns
    ro = batch["readout"]  # (B, T+1, 2) raw logits of (w+, w-)
    return {
        "sapo/v_mean": float(v_old.mean()),
        "sapo/q_mean": float(q_old.mean()),
        # how well the read-outs track the realised discounted returns from each turn (Q's from the turn's
        # action on, the same Monte-Carlo sample): correlation and explained variance 1 - Var(G - x) / Var(G)
        "sapo/value_return_corr": readout_corr(v_old, mc),
        "sapo/value_return_ev": explained_variance(v_old, mc),
        "sapo/q_return_corr": readout_corr(q_old, mc),
        "sapo/q_return_ev": explained_variance(q_old, mc),
        "sapo/adv_std_raw": float(pen.std()) if B > 1 else 0.0,
        "sapo/readout_abs_logit": float(ro.abs().mean()),
        "sapo/readout_saturated": float((v_old.abs() >= a.r_max).float().mean()),
    }


def _clipped_sq(new: torch.Tensor, old: torch.Tensor, target: torch.Tensor, clip: float | None) -> torch.Tensor:
    err = (new - target) ** 2  # (B,)
    if clip is None:
        return 0.5 * err
    clipped = old + (new - old).clamp(-clip, clip)
    return 0.5 * torch.maximum(err, (clipped - target) ** 2)


def sapo_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float):
    """PPO-clip + c_V L_V + c_Q L_Q + beta KL - c_H entropy, from one forward pass."""
    a = trainer.args
    out = trainer.forward(mb, want_entropy=a.entropy_coef > 0, readout=True)
    per_token_logps = out["per_token_logps"]  # (B, T)
    mask = mb["completion_mask"]
    pg_loss, stats = clipped_policy_loss(a, per_token_logps, mb, mask, n_tokens)
    # The losses train the *unclipped* read-out: through clip() a saturated read-out (|gap| >= tau_v) has zero
    # gradient, so a value stuck at +-R_max could never come back (measured on the tiny-model check: up to 94% of
    # the states saturated, corr(V, return) falling from 0.95 to -0.3 in one seed). Inside [-1, 1] the two agree.
    v_new, q_new = state_action_readouts(
        out["readout"], mask, a.tau_v, a.r_max, clip=not a.train_raw_readout
    )  # (B,), (B,)
    clip = None if a.value_clip is None else a.value_clip * a.r_max
    l_v = _clipped_sq(v_new, mb["v_old"], mb["y_v"], clip).sum() / n_rows
    l_q = _clipped_sq(q_new, mb["q_old"], mb["y_q"], clip).sum() / n_rows
    loss = pg_loss + a.value_coef * l_v + a.q_coef * l_q
    tok_scale = micro_batch_scale(n_tokens, mask)
    row_scale = n_rows / max(float(mask.shape[0]), 1.0)
    result = {
        "losses/policy_loss": pg_loss.detach() * tok_scale,
        "losses/value_loss": l_v.detach() * row_scale,
        "losses/q_loss": l_q.detach() * row_scale,
        "losses/approx_kl": stats["approx_kl"],
        "losses/clipfrac": stats["clipfrac"],
    }
    loss = add_kl_entropy(a, loss, result, out, mb, mask, n_tokens)
    return loss, scale_stats(result, tok_scale, ("losses/kl_ref", "losses/entropy"))


def check_args(args: Args) -> None:
    """Refuse settings that penalise an invalid action twice (in the reward and in the advantage)."""
    if args.readout_lr_scale <= 0:
        raise ValueError(f"readout_lr_scale={args.readout_lr_scale}: give a positive multiplier (1: no scaling)")
    if args.readout_lr_scale != 1.0 and (args.lora_rank or 0) > 0:
        raise ValueError("readout_lr_scale scales the full w+/w- rows' step: it needs full fine-tuning (lora_rank 0)")
    if args.invalid_coef > 0 and args.invalid_penalty > 0:
        raise ValueError(
            f"invalid_coef={args.invalid_coef} and invalid_penalty={args.invalid_penalty} both penalise invalid "
            "actions: keep one (set --invalid-penalty 0 to use the advantage penalty, or --invalid-coef 0)"
        )


def train(args: Args) -> dict[str, float]:
    """Train with SAPO; returns the last iteration's metrics."""
    check_args(args)
    return Trainer(args, algo="sapo", reserved_tokens=[W_PLUS, W_MINUS]).fit(compute_advantages, sapo_loss)


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
