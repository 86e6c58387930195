"""The two passes of an iteration over its training rows: scoring (no gradients) and the mini-batch update.

:func:`score_rows` fills what the loss compares against -- the old policy's per-token log-probs, the reference
model's, the critic's values, SAPO's read-out logits. :func:`update_policy` runs ``update_epochs`` passes of
shuffled mini-batches, each split into micro-batches whose gradients accumulate, then averages gradients over
ranks, clips them and steps AdamW (the policy's and, for PPO, the critic's).

Under torchrun every rank takes part in every collective: when ranks hold different row counts the short ones
run zero-weighted dummy passes (see :mod:`agentgym.rl.distributed`). Both functions take the
:class:`~agentgym.rl.trainer.Trainer` (its models, settings and forward passes) and are its ``score`` and
``update``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from agentgym.rl.batch import TurnBatch
from agentgym.rl.distributed import (
    average_gradients,
    clip_grad_norm,
    gather_for_inference,
    max_over_ranks,
    reshard_for_training,
    sum_over_ranks,
)
from agentgym.rl.losses import loss_counts

#: A :data:`~agentgym.rl.trainer.LossFn`: ``loss_fn(trainer, micro_batch, n_tokens, n_rows) -> (loss, stats)``.
LossCallable = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]

#: The batch keys :func:`score_rows` fills (each only when its model is there).
SCORE_KEYS = ("old_per_token_logps", "ref_per_token_logps", "values", "readout")


# -- scoring ---------------------------------------------------------------------------------------------
@torch.no_grad()
def score_rows(trainer: Any, batch: TurnBatch) -> dict[str, float]:
    """Fill ``old_per_token_logps`` (+ ``readout``), ``ref_per_token_logps`` and ``values``; returns timings."""
    B, T = batch["completion_mask"].shape
    scores: dict[str, torch.Tensor | None] = {
        "old_per_token_logps": torch.zeros(B, T),
        "ref_per_token_logps": torch.zeros(B, T) if trainer.ref_model is not None else None,
        "values": torch.zeros(B, T) if trainer.critic is not None else None,
        "readout": torch.zeros(B, T + 1, len(trainer.reserved_ids)) if trainer.reserved_ids else None,
    }
    times = {"time/old_logprob_s": 0.0, "time/ref_logprob_s": 0.0, "time/critic_s": 0.0}
    mbs = max(1, trainer.args.micro_batch_size)
    was_training = trainer.model.training
    trainer.model.eval()  # no dropout in scoring (the training forward's dropout is 0 for our models too)
    n_mb = -(-B // mbs)
    # the sampler's log-probs are the old policy's (see Trainer.sampling_logps_are_old): no old-policy forward
    reuse = "sampling_per_token_logps" in batch and trainer.sampling_logps_are_old
    if trainer.sharded and (trainer.ref_model is not None or trainer.critic is not None):
        n_mb = max_over_ranks(n_mb, trainer.dist)  # sharded ref/critic forwards: the same count on every rank
    for k in range(n_mb):
        rows = list(range(k * mbs, min(B, k * mbs + mbs)))
        if rows:
            _score_micro_batch(trainer, batch, rows, scores, times, reuse=reuse)
        else:  # padding for the other ranks: a forward whose output is dropped
            _padding_forwards(trainer, batch)
    if was_training:
        trainer.model.train()
    _store_scores(batch, scores, times, reuse=reuse)
    return times


def _padding_forwards(trainer: Any, batch: TurnBatch) -> None:
    """The sharded reference/critic forwards of a rank with no rows left (outputs dropped)."""
    mb = batch.select([0]).to(trainer.device)
    if trainer.ref_model is not None:
        trainer.forward(mb, model=trainer.ref_model)
    if trainer.critic is not None:
        trainer.critic_values(mb)


def _score_micro_batch(
    trainer: Any,
    batch: TurnBatch,
    rows: list[int],
    scores: dict[str, torch.Tensor | None],
    times: dict[str, float],
    *,
    reuse: bool,
) -> None:
    """The no-grad forwards of consecutive ``rows``, written into ``scores`` (timed into ``times``)."""
    s, e = rows[0], rows[0] + len(rows)
    old, ref, values, readout = (scores[k] for k in SCORE_KEYS)
    mb = batch.select(rows).to(trainer.device)
    t_mb = mb.completion_length
    t0 = time.perf_counter()
    if not reuse:
        out = trainer.forward(mb, readout=readout is not None)
        old[s:e, :t_mb] = out["per_token_logps"].float().cpu()
        if readout is not None:
            readout[s:e, : t_mb + 1] = out["readout"].float().cpu()
    t1 = time.perf_counter()
    times["time/old_logprob_s"] += t1 - t0
    if ref is not None:
        ref[s:e, :t_mb] = trainer.forward(mb, model=trainer.ref_model)["per_token_logps"].float().cpu()
        times["time/ref_logprob_s"] += time.perf_counter() - t1
    if values is not None:
        t2 = time.perf_counter()
        values[s:e, :t_mb] = trainer.critic_values(mb).float().cpu()
        times["time/critic_s"] += time.perf_counter() - t2


def _store_scores(
    batch: TurnBatch, scores: dict[str, torch.Tensor | None], times: dict[str, float], *, reuse: bool
) -> None:
    """Put the scores into ``batch``; with a separate rollout engine, log its log-prob gap to the trainer's."""
    old = scores["old_per_token_logps"]
    if reuse:
        old = batch["sampling_per_token_logps"].float() * batch["completion_mask"].float()  # (B, T)
    batch["old_per_token_logps"] = old
    if "sampling_per_token_logps" in batch and not reuse:  # the rollout engine's log-probs vs the trainer's
        mask = batch["completion_mask"].float()
        gap = (batch["sampling_per_token_logps"] - old).abs() * mask
        times["rollout/logprob_diff"] = float(gap.sum() / mask.sum().clamp(min=1.0))
        times["rollout/logprob_diff_max"] = float(gap.max())
    for key in SCORE_KEYS[1:]:
        if scores[key] is not None:
            batch[key] = scores[key]


# -- update ----------------------------------------------------------------------------------------------
@dataclass
class _Tally:
    """Token-weighted sums of the loss statistics, and the policy's gradient norms, over an update."""

    totals: dict[str, float] = field(default_factory=dict)
    weight: float = 0.0
    grad_norms: list[float] = field(default_factory=list)


@dataclass
class StepCheckpoints:
    """Checkpoints inside one update (an SFT epoch can take an hour on CPU), and the resume of one.

    Every ``every`` optimizer steps (0: never; not after the last, the caller's own checkpoint follows)
    :func:`update_policy` calls ``save(step, tally)``: the steps taken and the loss-statistics sums so far (plain
    values). A run resumed from such a checkpoint passes them back as ``done`` and ``tally``: the update draws the
    same shuffled order (seeded by run seed and iteration), skips the ``done`` steps and continues the sums, so
    it ends with the weights and statistics of an update that was never stopped.
    """

    every: int = 0
    save: Callable[[int, dict[str, Any]], None] = lambda step, tally: None
    done: int = 0
    tally: dict[str, Any] = field(default_factory=dict)


def optimizers(trainer: Any) -> list[tuple[Any, torch.optim.Optimizer]]:
    """(module, optimizer) pairs stepped by an update: the policy's, then the critic's when there is one."""
    out: list[tuple[Any, torch.optim.Optimizer]] = [(trainer.model, trainer.optimizer)]
    if trainer.critic is not None and trainer.critic_optimizer is not None:
        out.append((trainer.critic, trainer.critic_optimizer))
    return out


def update_policy(
    trainer: Any,
    batch: TurnBatch,
    loss_fn: LossCallable,
    *,
    iteration: int,
    mini_batch_size: int | None = None,
    steps: StepCheckpoints | None = None,
) -> dict[str, float]:
    """Mini-batch epochs of ``loss_fn`` with gradient accumulation, clipping and AdamW steps.

    ``loss_fn(trainer, micro_batch, n_tokens, n_rows)`` returns ``(loss, stats)`` where ``loss`` is already
    divided by the mini-batch's token count ``n_tokens`` (token-mean) or row count ``n_rows`` (per-turn
    terms), so summing micro-batch losses gives the mini-batch loss. ``mini_batch_size`` None: the run's.
    ``steps``: checkpoints inside the update, and where a resumed one starts (see :class:`StepCheckpoints`).
    """
    a = trainer.args
    B = len(batch)
    mini, global_scope = _mini_batch_rows(
        trainer, B, a.mini_batch_size if mini_batch_size is None else mini_batch_size
    )
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + iteration)
    steps = steps or StepCheckpoints()
    if steps.every and trainer.sharded:
        raise ValueError("checkpoints inside an update need the whole model on one rank: run it unsharded")
    tally = _Tally(**steps.tally) if steps.done else _Tally()
    if trainer.sharded:
        reshard_for_training(trainer.model)
    # Every rank takes the same number of optimizer steps (gradients are averaged at each) and, when
    # sharded, the same number of forward/backward passes: missing ones are zero-weighted dummies.
    n_mini = max_over_ranks(-(-B // mini), trainer.dist)
    n_steps, step = a.update_epochs * n_mini, 0
    for _ in range(a.update_epochs):
        perm = torch.randperm(B, generator=g).tolist()  # drawn for a skipped epoch too: the same order after it
        for i in range(n_mini):
            step += 1
            if step <= steps.done:  # taken before the checkpoint this update resumed from
                continue
            rows = perm[i * mini : (i + 1) * mini]
            _mini_batch_step(
                trainer, batch, loss_fn, rows or perm[:1], tally, real=bool(rows), global_scope=global_scope
            )
            if steps.every and step % steps.every == 0 and step < n_steps:
                steps.save(step, asdict(tally))
    if trainer.sharded:
        gather_for_inference(trainer.model)  # the next rollouts run on whole layers
    out = {k: v / max(tally.weight, 1.0) for k, v in tally.totals.items()}
    if tally.grad_norms:
        out["losses/grad_norm"] = float(np.mean(tally.grad_norms))
    return out


def _mini_batch_rows(trainer: Any, B: int, mini_batch_size: int) -> tuple[int, bool]:
    """Rows per mini-batch on this rank, and whether ``mini_batch_size`` counts rows over all ranks (verl)."""
    mini = mini_batch_size if mini_batch_size > 0 else B
    scope = trainer.args.mini_batch_scope
    if scope not in ("rank", "global"):
        raise ValueError(f"unknown mini_batch_scope {scope!r}: use rank (ours) or global (verl)")
    global_scope = scope == "global" and trainer.dist.enabled
    if global_scope and mini_batch_size > 0:  # verl: the global mini-batch, split evenly over the ranks
        mini = max(1, -(-mini_batch_size // trainer.dist.world_size))
    return mini, global_scope


def _mini_batch_step(
    trainer: Any,
    batch: TurnBatch,
    loss_fn: LossCallable,
    rows: list[int],
    tally: _Tally,
    *,
    real: bool,
    global_scope: bool,
) -> None:
    """One optimizer step on ``rows`` (``real`` False: a dummy step of a rank with no rows left)."""
    a = trainer.args
    micro = max(1, a.micro_batch_size)
    mini_mask = batch["completion_mask"][rows]
    world_counts = None
    if global_scope and a.loss_norm == "mini-batch":  # verl 0.9.1: global counts (x W: ranks average)
        own = [float(mini_mask.sum()), float(len(rows))] if real else [0.0, 0.0]
        tokens, n_rows_all = sum_over_ranks(own, trainer.dist)
        w = trainer.dist.world_size
        world_counts = (max(tokens, 1.0) / w, max(n_rows_all, 1.0) / w)
    for _, opt in optimizers(trainer):
        opt.zero_grad(set_to_none=True)
    n_micro = -(-len(rows) // micro)
    if trainer.sharded:
        n_micro = max_over_ranks(n_micro, trainer.dist)
    for m in range(n_micro):
        sub = rows[m * micro : (m + 1) * micro]
        mb = batch.select(sub or rows[:1]).to(trainer.device)
        counts = world_counts or loss_counts(mini_mask, mb["completion_mask"], n_micro, a.loss_norm)
        _micro_batch_backward(trainer, mb, loss_fn, counts, tally, dummy=not (real and sub))
    _optimizer_steps(trainer, tally)


def _micro_batch_backward(
    trainer: Any, mb: TurnBatch, loss_fn: LossCallable, counts: tuple[float, float], tally: _Tally, *, dummy: bool
) -> None:
    """Accumulate one micro-batch's gradients (zero-weighted for a ``dummy``) and its token-weighted stats."""
    n_tokens, n_rows = counts
    loss, stats = loss_fn(trainer, mb, n_tokens, n_rows)
    if dummy:
        loss = loss * 0.0
    loss.backward()
    if dummy:
        return
    w = float(mb["completion_mask"].sum())
    for k, v in stats.items():
        tally.totals[k] = tally.totals.get(k, 0.0) + float(v) * w
    tally.weight += w


def _optimizer_steps(trainer: Any, tally: _Tally) -> None:
    """Average gradients over ranks, clip them and step each optimizer (the policy's grad norm is kept)."""
    for module, opt in optimizers(trainer):
        average_gradients(module, trainer.dist)
        params = [p for p in module.parameters() if p.grad is not None]
        if params:
            norm = clip_grad_norm(params, trainer.args.max_grad_norm, trainer.dist)
            if module is trainer.model:
                tally.grad_norms.append(float(norm))
        scale = getattr(trainer.args, "readout_lr_scale", 1.0) if module is trainer.model else 1.0
        if scale != 1.0 and trainer.reserved_ids:
            if trainer.sharded:
                raise ValueError("readout_lr_scale needs the whole w+/w- rows on one rank: run it unsharded")
            _step_scaling_rows(module, opt, trainer.reserved_ids, scale)
        else:
            opt.step()


def _step_scaling_rows(model: Any, opt: torch.optim.Optimizer, ids: list[int], scale: float) -> None:
    """``opt.step()`` with the output-embedding rows ``ids`` moved ``scale`` times as far as the optimizer moved
    them (SAPO's ``readout_lr_scale`` on its w+/w- rows: a per-row learning rate under Adam, whose step does not
    grow with the gradient); every other weight steps as usual."""
    weight = model.get_output_embeddings().weight
    rows = torch.tensor(ids, device=weight.device)
    before = weight.detach()[rows].clone()
    opt.step()
    with torch.no_grad():
        weight[rows] = before + scale * (weight[rows] - before)
