"""Loss pieces shared by the baselines: PPO-clip on token ratios, k3 / low-variance KL, clipped value loss.

Names follow TRL (``per_token_logps``, ``old_per_token_logps``, ``ref_per_token_logps``, ``completion_mask``,
``advantages``, ``epsilon_low/high``, ``beta``); every tensor here is ``(B, T)`` over response tokens and
aggregation is verl's ``loss_agg_mode`` (:func:`agg_loss`; token mean by default) over the whole (micro-)batch
unless a caller passes its own normaliser.

These are primitives: each baseline writes its own loss from them (``baselines/grpo.py`` term by term; RLOO,
GiGPO and PPO's actor import GRPO's loss from there). :func:`clipped_policy_loss` and
:func:`add_kl_entropy` read their coefficients from a config (``epsilon_low/high``, ``clip_ratio_c``, ``beta``,
``entropy_coef``, ``loss_agg_mode``); :func:`micro_batch_scale` turns a piece normalised by the mini-batch's
count back into this micro-batch's own mean for reporting; :func:`sft_loss` is the token-mean NLL of supervised
stages.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from agentgym.rl.batch import TurnBatch
from agentgym.rl.config import Args

#: Loss statistics by metric key (detached scalars), as a :data:`~agentgym.rl.trainer.LossFn` returns them.
LossStats = dict[str, torch.Tensor]


class Policy(Protocol):
    """What a loss function needs of the :class:`~agentgym.rl.trainer.Trainer` (no import of it: no cycle)."""

    args: Any

    def forward(self, mb: TurnBatch, *, want_entropy: bool = False, readout: bool = False, model: Any = None) -> Any:
        """Per-token log-probs (``per_token_logps``, and ``entropy`` / ``readout`` when asked) on ``mb``."""


def masked_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of ``values`` where ``mask`` is 1 (NaN-safe: masked-out entries never enter the sum)."""
    return torch.where(mask.bool(), values, torch.zeros_like(values)).sum()


#: verl's ``loss_agg_mode`` values (``verl.trainer.ppo.core_algos.agg_loss``).
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")


def agg_loss(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Aggregate a ``(B, T)`` per-token loss into a scalar the way verl's ``agg_loss`` does.

    * ``token-mean``: the sum over unmasked tokens / ``normalizer`` (default: this call's token count);
    * ``seq-mean-token-sum``: each row's token sum, summed over rows / ``normalizer`` (default: rows with a token);
    * ``seq-mean-token-mean``: each row's token mean, summed over rows / ``normalizer`` (same default).

    With ``normalizer`` the whole (mini-)batch's token or row count, summing the calls over its micro-batches
    gives the (mini-)batch's aggregate (:func:`loss_normalizer` picks it).
    """
    m = mask.to(loss_mat.dtype)
    if mode == "token-mean":
        n = m.sum().clamp(min=1.0) if normalizer is None else normalizer
        return masked_sum(loss_mat, m) / n
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {mode!r}: use one of {', '.join(LOSS_AGG_MODES)}")
    tokens = m.sum(dim=-1)  # (B,)
    seq = torch.where(m.bool(), loss_mat, torch.zeros_like(loss_mat)).sum(dim=-1)  # (B,) token sums
    if mode == "seq-mean-token-mean":
        seq = seq / (tokens + 1e-8)
    has = tokens > 0
    n = has.sum().clamp(min=1).to(loss_mat.dtype) if normalizer is None else normalizer
    return torch.where(has, seq, torch.zeros_like(seq)).sum() / n


def loss_normalizer(args: Any, n_tokens: float, n_rows: float) -> float:
    """The divisor :func:`agg_loss` needs under ``args.loss_agg_mode``: tokens for token-mean, else rows."""
    return n_tokens if args.loss_agg_mode == "token-mean" else n_rows


#: ``loss_norm`` values: ours (one mean over the mini-batch) and verl-agent's (a mean per micro-batch).
LOSS_NORMS = ("mini-batch", "micro-batch")


def loss_counts(
    mini_mask: torch.Tensor, micro_mask: torch.Tensor, n_micro: int, loss_norm: str = "mini-batch"
) -> tuple[float, float]:
    """``(n_tokens, n_rows)`` a micro-batch's loss is divided by, so that the micro-batch losses add up.

    ``mini-batch``: the mini-batch's own counts (every token weighs the same whatever the split). ``micro-batch``
    (verl-agent ``dp_actor.py``: each micro-batch's mean, divided by the gradient-accumulation steps): the
    micro-batch's counts times ``n_micro``, so a token's weight depends on how many tokens share its micro-batch.

    Args:
        mini_mask: ``(B, T)`` response mask of the mini-batch; micro_mask: ``(b, T)`` that of this micro-batch.
    """
    if loss_norm not in LOSS_NORMS:
        raise ValueError(f"unknown loss_norm {loss_norm!r}: use mini-batch (ours) or micro-batch (verl-agent)")
    mask = micro_mask if loss_norm == "micro-batch" else mini_mask
    scale = n_micro if loss_norm == "micro-batch" else 1
    return float(mask.sum().clamp(min=1.0)) * scale, float(mask.shape[0]) * scale


def low_var_kl(per_token_logps: torch.Tensor, ref_per_token_logps: torch.Tensor) -> torch.Tensor:
    """k3 estimator of KL(pi || pi_ref) per token, clamped to [-10, 10] as verl's ``low_var_kl``.

    k3 = exp(ref - logp) - (ref - logp) - 1 (Schulman, "Approximating KL divergence"); unbiased, >= 0.
    """
    log_ratio = (ref_per_token_logps - per_token_logps).clamp(-20.0, 20.0)  # (B, T) verl clamps before exp
    kl = torch.exp(log_ratio) - log_ratio - 1.0
    return kl.clamp(-10.0, 10.0)


def dual_clip(per_token_loss: torch.Tensor, advantages: torch.Tensor, clip_ratio_c: float) -> torch.Tensor:
    """Dual-clip PPO (Ye et al. 2020, arXiv 1912.09729; verl ``compute_policy_loss``, ``clip_ratio_c`` 3).

    Where ``A < 0`` the clipped loss ``max(-r A, -clip(r) A)`` grows without bound in ``r``; dual-clip caps it
    at ``-c A`` (the ratio counts as at most ``c``), so one very off-policy token cannot dominate the update.
    Tokens with ``A >= 0`` keep ``per_token_loss``.

    Args:
        per_token_loss: ``(B, T)`` the PPO-clip loss ``max(-r A, -clip(r) A)``.
        advantages: ``(B, T)``.
        clip_ratio_c: the cap ``c`` (> 1).
    """
    if not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (verl uses 3.0), got {clip_ratio_c}")
    capped = torch.minimum(per_token_loss, -advantages * clip_ratio_c)  # (B, T)
    return torch.where(advantages < 0, capped, per_token_loss)


def ppo_clip_loss(
    per_token_logps: torch.Tensor,
    old_per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    normalizer: float | torch.Tensor | None = None,
    clip_ratio_c: float | None = None,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clip surrogate on token ratios, aggregated by :func:`agg_loss` (token mean by default).

    loss_t = -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t), r_t = exp(logp - old_logp).

    Args:
        normalizer: number of tokens to divide by (the whole batch's count under gradient accumulation);
            None divides by this call's own token count.
        clip_ratio_c: when set, :func:`dual_clip` caps the loss of negative-advantage tokens at ``-c A``.
        loss_agg_mode: :func:`agg_loss`'s mode (``normalizer`` then counts rows for the ``seq-mean-*`` modes).

    Returns:
        ``(loss, stats)`` with ``approx_kl`` (k3 of old vs new, as cleanrl) and ``clipfrac`` (token means);
        with ``clip_ratio_c``, also ``clipfrac_lower`` (tokens where the dual clip was active).
    """
    mask = completion_mask.to(per_token_logps.dtype)
    log_ratio = per_token_logps - old_per_token_logps  # (B, T)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - epsilon_low, 1.0 + epsilon_high)
    per_token_loss = torch.maximum(loss1, loss2)  # (B, T)
    clipped_loss = per_token_loss
    if clip_ratio_c is not None:
        per_token_loss = dual_clip(per_token_loss, advantages, clip_ratio_c)
    loss = agg_loss(per_token_loss, mask, loss_agg_mode, normalizer)
    with torch.no_grad():
        m = mask.sum().clamp(min=1.0)
        approx_kl = masked_sum((ratio - 1.0) - log_ratio, mask) / m
        clipped = ((ratio < 1.0 - epsilon_low) & (advantages < 0)) | ((ratio > 1.0 + epsilon_high) & (advantages > 0))
        clipfrac = masked_sum(clipped.to(mask.dtype), mask) / m
        stats = {"approx_kl": approx_kl, "clipfrac": clipfrac}
        if clip_ratio_c is not None:
            stats["clipfrac_lower"] = masked_sum((per_token_loss < clipped_loss).to(mask.dtype), mask) / m
    return loss, stats


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float | None,
    normalizer: float | torch.Tensor | None = None,
    factor: float = 0.5,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """factor * max((V - y)^2, (clip(V, V_old +- c) - y)^2), aggregated by :func:`agg_loss` (verl
    ``compute_value_loss``; its factor is 0.5 in verl-agent f974dc5 and verl 0.9.1, 1.0 in verl-agent d0b9724).

    Returns:
        ``(loss, clipfrac)``: the loss and the fraction of entries where the clipped term was larger.
    """
    mask = mask.to(values.dtype)
    err1 = (values - returns) ** 2
    if clip is None:
        return factor * agg_loss(err1, mask, loss_agg_mode, normalizer), values.new_zeros(())
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    err2 = (clipped - returns) ** 2
    loss = factor * agg_loss(torch.maximum(err1, err2), mask, loss_agg_mode, normalizer)
    with torch.no_grad():
        frac = masked_sum((err2 > err1).to(mask.dtype), mask) / mask.sum().clamp(min=1.0)
    return loss, frac


def episode_returns(batch: TurnBatch) -> dict[int, float]:
    """Sum of shaped turn rewards (``meta["reward"]``) per episode index."""
    out: dict[int, float] = {}
    for m in batch.meta:
        out[m["episode"]] = out.get(m["episode"], 0.0) + float(m["reward"])
    return out


def clipped_policy_loss(
    a: Args, per_token_logps: torch.Tensor, mb: TurnBatch, mask: torch.Tensor, normalizer: float
) -> tuple[torch.Tensor, LossStats]:
    """PPO-clip of ``per_token_logps`` (B, T) on ``mb``'s advantages over ``mask`` (B, T), ``a``'s epsilons.

    Returns:
        ``(loss, stats)`` with ``approx_kl`` and ``clipfrac`` (see :func:`ppo_clip_loss`).
    """
    return ppo_clip_loss(
        per_token_logps,
        mb["old_per_token_logps"],
        mb["advantages"],
        mask,
        epsilon_low=a.epsilon_low,
        epsilon_high=a.epsilon_high,
        normalizer=normalizer,
        clip_ratio_c=a.clip_ratio_c,
        loss_agg_mode=a.loss_agg_mode,
    )


def add_kl_entropy(
    a: Args,
    loss: torch.Tensor,
    result: LossStats,
    out: dict[str, torch.Tensor],
    mb: TurnBatch,
    mask: torch.Tensor,
    normalizer: float,
) -> torch.Tensor:
    """``loss + beta * low_var_kl - entropy_coef * entropy`` (each when its coefficient is > 0).

    Args:
        out: the forward's outputs (``per_token_logps``, and ``entropy`` when ``a.entropy_coef > 0``).

    Returns:
        The new loss; writes ``losses/kl_ref`` / ``losses/entropy`` (detached, unscaled) into ``result``.
    """
    mode = a.loss_agg_mode
    if a.beta > 0:
        kl = agg_loss(low_var_kl(out["per_token_logps"], mb["ref_per_token_logps"]), mask, mode, normalizer)
        loss = loss + a.beta * kl
        result["losses/kl_ref"] = kl.detach()
    if a.entropy_coef > 0:
        ent = agg_loss(out["entropy"], mask, mode, normalizer)
        loss = loss - a.entropy_coef * ent
        result["losses/entropy"] = ent.detach()
    return loss


def micro_batch_scale(normalizer: float, completion_mask: torch.Tensor, loss_agg_mode: str = "token-mean") -> float:
    """The factor that turns a loss piece divided by ``normalizer`` into this micro-batch's own mean.

    A piece aggregated with the whole mini-batch's count (so that micro-batch losses add up) is reported as the
    micro-batch's token mean (``token-mean``) or row mean (the ``seq-mean-*`` modes: rows with a response token).
    """
    mask = completion_mask
    own = float(mask.sum()) if loss_agg_mode == "token-mean" else float((mask.sum(-1) > 0).sum())
    return normalizer / max(own, 1.0)


def sft_loss(
    per_token_logps: torch.Tensor, completion_mask: torch.Tensor, normalizer: float
) -> tuple[torch.Tensor, LossStats]:
    """Token-mean NLL of the target tokens: ``-sum(completion_mask * per_token_logps) / normalizer``.

    Args:
        per_token_logps: ``(B, T)`` log-probs of the target tokens.
        completion_mask: ``(B, T)`` 1 on the tokens that count.
        normalizer: the mini-batch's token count (gradient accumulation sums the micro-batch losses).

    Returns:
        ``(loss, stats)``; ``losses/sft_loss`` is reported as this micro-batch's own token mean.
    """
    loss = -masked_sum(per_token_logps, completion_mask) / normalizer
    return loss, {"losses/sft_loss": loss.detach() * normalizer / max(float(completion_mask.sum()), 1.0)}


#: The loss pieces a policy-gradient loss reports rescaled to its micro-batch's own mean.
SCALED_STATS = ("losses/policy_loss", "losses/kl_ref", "losses/entropy")


def scale_stats(stats: LossStats, scale: float, keys: tuple[str, ...] = SCALED_STATS) -> LossStats:
    """``stats`` with the entries named in ``keys`` multiplied by ``scale`` (:func:`micro_batch_scale`)."""
    return {k: v * scale if k in keys else v for k, v in stats.items()}
