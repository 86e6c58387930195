"""The training loop every baseline shares; a baseline supplies only its advantage and loss functions.

Methods that change more than those (ERL's reflect-and-retry, SEED's lesson teacher and SFT stage) override
the hooks of :meth:`Trainer.train_iteration` -- ``before_iteration``, ``collect``, ``training_batch``,
``score_batch``, ``iteration_metrics`` -- never the iteration itself. The primitives the baselines build their
advantages and losses from are in :mod:`agentgym.rl.advantages` and :mod:`agentgym.rl.losses`.

Where the rest lives: :mod:`agentgym.rl.setup` builds the run's pieces (policy, reference model, critic, LoRA,
FSDP/DDP, optimizers, rollout engine); :class:`~agentgym.rl.actor.Actor`, the base of :class:`Trainer`, holds
them with their forward passes and rollouts; :mod:`agentgym.rl.update` runs the scoring pass and the
mini-batch update.

One iteration (verl-agent's order):

1. **rollout** -- ``collect_rollouts`` plays ``num_tasks x group_size`` episodes with the current policy
   (one batched generate call per turn); every turn becomes one training row (prompt + response).
2. **score** -- with no gradients: the old policy's per-token log-probs (recomputed with the training
   forward, so ratios start at exactly 1), the reference model's (KL), SAPO's read-out logits, the
   critic's values.
3. **advantages** -- the baseline's ``advantage_fn(trainer, batch)`` fills ``batch["advantages"]`` (B, T)
   (and whatever targets its loss needs) from the per-turn shaped rewards in ``batch.meta``.
4. **update** -- ``update_epochs`` passes over shuffled mini-batches; each mini-batch is split into
   micro-batches whose gradients accumulate, normalised so the loss is the token mean over the whole
   mini-batch (``loss_norm="micro-batch"``: verl-agent's mean per micro-batch over the accumulation steps); grads are averaged across ranks, clipped, and AdamW steps (policy and, for PPO, critic).
5. **log / checkpoint** -- shared metric keys to TensorBoard/wandb/metrics.jsonl; an atomic checkpoint
   every ``save_every`` iterations. ``--resume`` restores weights, optimizers, RNGs and the task-order
   generator, so a resumed run is identical to an uninterrupted one (on the CPU thread count it was checkpointed
   on: the checkpoint records it, and the SFT refuses to resume on another).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.agent_io import EpisodeSpec
from agentgym.rl.actor import Actor
from agentgym.rl.batch import TurnBatch, build_batch, turn_meta
from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, set_aside_old_run
from agentgym.rl.config import Args, to_dict
from agentgym.rl.distributed import (
    DistInfo,
    all_gather_objects,
    full_state_dicts,
    gather_for_inference,
    load_full_state_dicts,
    reshard_for_training,
)
from agentgym.rl.losses import episode_returns
from agentgym.rl.metrics import MetricsLogger, plot_learning_curve
from agentgym.rl.rewards import penalised, turn_rewards
from agentgym.rl.runinfo import RunInfo
from agentgym.rl.update import StepCheckpoints, score_rows, update_policy

AdvantageFn = Callable[["Trainer", TurnBatch], dict[str, float] | None]
LossFn = Callable[["Trainer", TurnBatch, float, float], tuple[torch.Tensor, dict[str, torch.Tensor]]]


class Trainer(Actor):
    """The iteration loop of one run -- rollout, score, advantages, update, log, checkpoint -- and its hooks.

    The models, optimizers and rollouts come from :class:`~agentgym.rl.actor.Actor` (same arguments: ``args``,
    ``algo``, ``critic_learning_rate``, ``reserved_tokens``); the loop starts at the latest checkpoint with
    ``args.resume``.
    """

    def __init__(self, args: Args, **kw: Any) -> None:
        super().__init__(args, **kw)
        self.task_rng = np.random.default_rng(args.seed)
        self.iteration = 0
        self.history: list[dict[str, float]] = []
        #: a checkpoint taken inside iteration ``self.iteration + 1`` was resumed: its ``StepCheckpoints`` state
        self.partial: dict[str, Any] | None = None
        #: the CPU thread count the resumed checkpoint was written on (None: not resumed, or an older checkpoint);
        #: on another count the CPU kernels split their sums otherwise and the weights go on differently
        self.resumed_threads: int | None = None
        if args.resume:
            self._resume()
            self._engine_stale = True
        elif self.dist.is_main and (Path(self.run_dir) / "metrics.jsonl").exists():
            set_aside_old_run(self.run_dir)
        self.logger = MetricsLogger(
            self.run_dir,
            track=args.track and self.dist.is_main,
            project=args.wandb_project,
            config=to_dict(args),
            history=self.history,
            enabled=self.dist.is_main,
        )
        self._closeables: list[Any] = []  # closed when fit() ends (episode writers, ...)
        if self.sharded:  # rollouts and scoring run on whole layers (see agentgym.rl.distributed)
            gather_for_inference(self.model)

    def open_episode_log(self, enabled: bool = True) -> Any:
        """A ``JsonlWriter`` on ``run_dir/episodes.jsonl`` (main rank, when ``enabled``), closed when fit() ends.

        Returns None where nothing is logged.
        """
        if not (enabled and self.dist.is_main):
            return None
        from agentgym.episodes import JsonlWriter

        self.run_dir.mkdir(parents=True, exist_ok=True)
        writer = JsonlWriter(self.run_dir / "episodes.jsonl")
        self._closeables.append(writer)
        return writer

    # -- rollouts --------------------------------------------------------------------------------------
    def next_tasks(self) -> list[EpisodeSpec]:
        """This iteration's tasks (drawn from the run's task generator; this rank's share)."""
        seeds = self.task_rng.integers(0, 2**31 - 1, size=self.args.num_tasks)
        options = {"split": self.args.task_split} if self.args.task_split else None
        specs = [EpisodeSpec(seed=int(s), options=dict(options) if options else None) for s in seeds]
        return specs[self.dist.rank :: self.dist.world_size]

    @property
    def sampling_logps_are_old(self) -> bool:
        """:attr:`Actor.sampling_logps_are_old`, and the rows are the sampled (prompt, response) pairs: no method
        rewrites them (``collect``, ``training_batch`` and ``score_batch`` are this class's)."""
        cls = type(self)
        return bool(
            super().sampling_logps_are_old
            and cls.collect is Trainer.collect
            and cls.training_batch is Trainer.training_batch
            and cls.score_batch is Trainer.score_batch
        )

    def make_batch(self, rb: Any) -> TurnBatch:
        """Training rows of a rollout: one per turn, with shaped rewards in ``meta``."""
        a = self.args
        rewards = turn_rewards(
            rb.turns,
            a.env_id,
            invalid_penalty=a.invalid_penalty,
            reward=a.reward,
            success_reward=a.success_reward,
            penalty_on=a.invalid_penalty_on,
        )
        meta = [
            turn_meta(t, r, env_reward=t.reward, penalty=a.invalid_penalty * penalised(t, a.invalid_penalty_on))
            for t, r in zip(rb.turns, rewards)
        ]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        batch = build_batch(
            [t.prompt_ids for t in rb.turns],
            [t.response_ids for t in rb.turns],
            pad_id=int(pad),
            meta=meta,
        )
        if rb.turns and all(t.old_logprobs is not None for t in rb.turns):  # a separate engine's sampling log-probs
            sampled = torch.zeros(batch["completion_mask"].shape)  # (B, T)
            for i, t in enumerate(rb.turns):
                sampled[i, : len(t.old_logprobs)] = torch.tensor(t.old_logprobs, dtype=torch.float32)
            batch["sampling_per_token_logps"] = sampled
        return batch

    # -- score, update --------------------------------------------------------------------------------
    def score(self, batch: TurnBatch) -> dict[str, float]:
        """Fill ``old_per_token_logps`` (+ ``readout``), ``ref_per_token_logps`` and ``values``; returns timings
        (:func:`agentgym.rl.update.score_rows`)."""
        return score_rows(self, batch)

    def update(
        self,
        batch: TurnBatch,
        loss_fn: LossFn,
        *,
        iteration: int,
        mini_batch_size: int | None = None,
        steps: StepCheckpoints | None = None,
    ) -> dict[str, float]:
        """Mini-batch epochs of ``loss_fn`` with gradient accumulation, clipping and AdamW steps
        (:func:`agentgym.rl.update.update_policy`; ``mini_batch_size`` None: ``args.mini_batch_size``;
        ``steps``: checkpoints inside the update)."""
        return update_policy(self, batch, loss_fn, iteration=iteration, mini_batch_size=mini_batch_size, steps=steps)

    # -- validation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """``val/success_rate`` on ``val_split`` (the headline) and ``val/<split>/success_rate`` on each extra split."""
        out = {"val/success_rate": self._validate_split(self.args.val_split)}
        for split in self.args.val_extra_splits:
            out[f"val/{split}/success_rate"] = self._validate_split(split)
        return out

    def _validate_split(self, split: str | None) -> float:
        a = self.args
        # With a split, validation plays its first val_tasks games in order (ALFWorld/WebShop take {"split", "index"}),
        # so every validation covers the same fixed tasks; without one, fixed seeds.
        tasks = [
            EpisodeSpec(seed=10_000_000 + i, options={"split": split, "index": i} if split else None)
            for i in range(a.val_tasks)
        ]
        tasks = tasks[self.dist.rank :: self.dist.world_size]
        rb = self.rollout(
            tasks,
            group_size=max(1, a.val_group_size),
            temperature=a.val_temperature,
            top_p=a.val_top_p,
            top_k=a.val_top_k,
            seed=a.seed + 7,
        )
        succ = [s for part in all_gather_objects(rb.episode_success(), self.dist) for s in part]
        return float(np.mean(succ)) if succ else 0.0

    # -- checkpoints -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        model_state, optim_state = full_state_dicts(self.model, self.optimizer)
        state: dict[str, Any] = {
            "model": model_state,
            "optimizer": optim_state,
            "task_rng": self.task_rng.bit_generator.state,
            "history": self.logger.history if hasattr(self, "logger") else self.history,
            "args": to_dict(self.args),
            "reserved_ids": self.reserved_ids,
            "threads": torch.get_num_threads(),
        }
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def _resume(self) -> None:
        path = latest_checkpoint(self.run_dir)
        if path is None:
            return
        state = load_checkpoint(path)
        load_full_state_dicts(self.model, self.optimizer, state["model"], state["optimizer"])
        if self.critic is not None and "critic" in state:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.task_rng.bit_generator.state = state["task_rng"]
        self.iteration = int(state["iteration"])
        self.history = list(state.get("history", []))
        self.partial = state.get("partial")
        self.resumed_threads = state.get("threads")

    def save(self, partial: dict[str, Any] | None = None) -> None:
        """Checkpoint the run after ``self.iteration`` iterations; ``partial``: saved inside the next one (an SFT
        epoch's :class:`~agentgym.rl.update.StepCheckpoints`), what a resume needs to finish it (``self.partial``)."""
        if self.sharded:
            reshard_for_training(self.model)  # state dicts are gathered from the shards
        state = self.state_dict()  # collective when the model is sharded: every rank takes part
        if partial is not None:
            state["partial"] = partial
        if self.sharded:
            gather_for_inference(self.model)
        if self.dist.is_main:
            # one checkpoint: the write is atomic, so the previous one is only deleted once this one is whole
            save_checkpoint(self.run_dir, self.iteration, state, keep=1)

    def end_of_iteration(self, done_here: int) -> bool:
        """After iteration ``self.iteration``: checkpoint every ``save_every`` iterations and after the last one;
        True where this process stops here (``stop_after``: ``done_here`` iterations run by it)."""
        a = self.args
        if (a.save_every and self.iteration % a.save_every == 0) or self.iteration >= a.total_iterations:
            self.save()
        return a.stop_after is not None and done_here >= a.stop_after

    # -- the loop --------------------------------------------------------------------------------------
    def fit(self, advantage_fn: AdvantageFn | None, loss_fn: LossFn) -> dict[str, float]:
        """Run iterations ``self.iteration .. total_iterations - 1``; returns the last iteration's metrics."""
        a = self.args
        bar = None
        if a.progress and self.dist.is_main:
            from tqdm.auto import tqdm

            bar = tqdm(total=a.total_iterations, initial=self.iteration, desc=f"{self.algo} {a.exp_name}")
        info = RunInfo(self.run_dir, a, device=str(self.device), console=bar is None, enabled=self.dist.is_main)
        last: dict[str, float] = {}
        done_here = 0
        try:
            while self.iteration < a.total_iterations:
                last = self.train_iteration(advantage_fn, loss_fn)
                done_here += 1
                info.iteration(self.iteration, a.total_iterations, last)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(
                        success=f"{last['charts/success_rate']:.2f}", ret=f"{last['charts/episodic_return']:.2f}"
                    )
                if self.end_of_iteration(done_here):
                    break
        finally:
            info.close()
            if bar is not None:
                bar.close()
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            while self._closeables:
                self._closeables.pop(0).close()
        if a.export_model and self.iteration >= a.total_iterations:
            self.export_model()
        if a.plot and self.dist.is_main and self.iteration >= a.total_iterations:
            plot_learning_curve(
                self.logger.history, self.run_dir / "learning_curve.png", title=f"{self.algo} {a.env_id}"
            )
        self.logger.close()
        return last

    # -- one iteration, and the hooks a method overrides -----------------------------------------------
    def train_iteration(self, advantage_fn: AdvantageFn | None, loss_fn: LossFn) -> dict[str, float]:
        """One iteration: :meth:`before_iteration`, :meth:`collect`, :meth:`training_batch`, :meth:`score_batch`,
        ``advantage_fn``, :meth:`update`, :meth:`iteration_metrics`, then :meth:`end_iteration`.

        A method changes only the hooks its paper changes (ERL: collect / training_batch / iteration_metrics;
        SEED: before_iteration / collect / score_batch / iteration_metrics). ``advantage_fn`` None: the
        training batch already carries its advantages.
        """
        a = self.args
        pre = self.before_iteration()
        it = self.iteration
        t_start = time.perf_counter()
        collected = self.collect(self.next_tasks(), seed=a.seed * 7919 + it * 104_729)
        batch, part_stats = self.training_batch(collected)
        times: dict[str, float] = {}
        adv_stats: dict[str, float] = {}
        stats: dict[str, float] = {}
        adv_s = update_s = 0.0
        if batch is not None:
            times = self.score_batch(collected, batch)
            t0 = time.perf_counter()
            adv_stats = (advantage_fn(self, batch) or {}) if advantage_fn is not None else {}
            adv_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            stats = self.update(batch, loss_fn, iteration=it)
            update_s = time.perf_counter() - t0
        sync_s, self._sync_s = self._sync_s, 0.0
        elapsed = time.perf_counter() - t_start
        metrics = self.iteration_metrics(collected, batch, elapsed)
        if "time/old_logprob_s" in times:
            metrics["time/logprob_s"] = times["time/old_logprob_s"] + times.get("time/ref_logprob_s", 0.0)
        metrics.update(
            {
                **times,
                "time/advantage_s": adv_s,
                "time/update_s": update_s,
                "time/weight_sync_s": sync_s,
                "time/iteration_s": elapsed,
                "losses/policy_loss": 0.0,
                "losses/value_loss": 0.0,
                "losses/approx_kl": 0.0,
                "losses/clipfrac": 0.0,
                **{k: float(v) for k, v in adv_stats.items()},
                **part_stats,
                **stats,
                **pre,
            }
        )
        return self.end_iteration(it, metrics)

    def before_iteration(self) -> dict[str, float]:
        """Work before an iteration's rollouts (SEED: the SFT stage); returns metrics. Default: nothing."""
        return {}

    def collect(self, tasks: list[EpisodeSpec], *, seed: int) -> Any:
        """The iteration's experience: by default ``group_size`` rollouts of each task (a ``RolloutBatch``)."""
        return self.rollout(tasks, group_size=self.args.group_size, temperature=self.args.temperature, seed=seed)

    def training_batch(self, collected: Any) -> tuple[TurnBatch | None, dict[str, float]]:
        """Training rows of :meth:`collect`'s result and metrics about them; None: nothing to train on."""
        return self.make_batch(collected), {}

    def score_batch(self, collected: Any, batch: TurnBatch) -> dict[str, float]:
        """No-grad forwards the loss needs (:meth:`score`; SEED adds its teacher); returns timings."""
        return self.score(batch)

    def iteration_metrics(self, collected: Any, batch: TurnBatch | None, elapsed: float) -> dict[str, float]:
        """The rollout's shared metrics (``charts/*``, ``rollout/*``), gathered over ranks."""
        return rollout_metrics(collected, batch, self.dist, elapsed)

    def end_iteration(self, it: int, metrics: dict[str, float]) -> dict[str, float]:
        """Close iteration ``it``: count it, validate every ``val_every`` iterations, log the metrics."""
        self.iteration = it + 1
        if self.args.val_every and self.iteration % self.args.val_every == 0:
            metrics.update(self.validate())
        self.logger.log(self.iteration, metrics)
        return metrics


def rollout_metrics(rb: Any, batch: TurnBatch | None, dist: DistInfo, elapsed: float) -> dict[str, float]:
    """The shared ``charts/*``, ``rollout/*`` and ``perf/*`` metrics of rollout ``rb`` and its rows, over all ranks."""
    returns = episode_returns(batch) if batch is not None else {}
    meta = batch.meta if batch is not None else []
    local = {
        "returns": [returns.get(e, 0.0) for e in range(len(rb.episodes))],
        "success": rb.episode_success(),
        "invalid": [not m["valid"] for m in meta],
        "resp": batch["completion_mask"].sum(1).tolist() if batch is not None else [],
    }
    parts = all_gather_objects(local, dist)
    cat = {k: [x for p in parts for x in p[k]] for k in local}
    train_tokens = float(batch["attention_mask"].sum()) * dist.world_size if batch is not None else 0.0
    return {
        "charts/episodic_return": float(np.mean(cat["returns"])) if cat["returns"] else 0.0,
        "charts/success_rate": float(np.mean(cat["success"])) if cat["success"] else 0.0,
        "charts/SPS": len(cat["invalid"]) / max(elapsed, 1e-9),
        "rollout/invalid_action_rate": float(np.mean(cat["invalid"])) if cat["invalid"] else 0.0,
        "rollout/response_length": float(np.mean(cat["resp"])) if cat["resp"] else 0.0,
        "rollout/num_turns": float(len(cat["invalid"])),
        "perf/generated_tokens": float(sum(cat["resp"])),
        "perf/train_tokens": train_tokens,
        "time/generation_s": float(rb.stats.get("generation_s", 0.0)),
        "time/env_s": float(rb.stats.get("env_s", 0.0)),
    }
