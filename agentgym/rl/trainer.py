"""The training loop every baseline shares; a baseline supplies only its advantage and loss functions.

Methods that change more than those (ERL's reflect-and-retry, SEED's lesson teacher and SFT stage) override
the hooks of :meth:`Trainer.train_iteration` -- ``before_iteration``, ``collect``, ``training_batch``,
``score_batch``, ``iteration_metrics`` -- never the iteration itself. The primitives the baselines build their
advantages and losses from are in :mod:`agentgym.rl.advantages` and :mod:`agentgym.rl.losses`.

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
   generator, so a resumed run is identical to an uninterrupted one.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.models.loading import cpu_has_native_bf16, resolve_dtype
from agentgym.records import EpisodeSpec
from agentgym.rl.batch import TurnBatch, build_batch, turn_meta
from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint, load_model_weights, save_checkpoint
from agentgym.rl.config import Args, to_dict
from agentgym.rl.distributed import (
    DistInfo,
    all_gather_objects,
    average_gradients,
    clip_grad_norm,
    full_state_dicts,
    gather_for_inference,
    init_distributed,
    load_full_state_dicts,
    max_over_ranks,
    reshard_for_training,
    shard_model,
    sum_over_ranks,
)
from agentgym.rl.engine import ENGINES, apply_lora, build_vllm_generator, push_weights
from agentgym.rl.logprobs import forward_completion
from agentgym.rl.losses import episode_returns, loss_counts
from agentgym.rl.metrics import MetricsLogger, plot_learning_curve
from agentgym.rl.rewards import penalised, turn_rewards
from agentgym.rl.runinfo import RunInfo

AdvantageFn = Callable[["Trainer", TurnBatch], dict[str, float] | None]
LossFn = Callable[["Trainer", TurnBatch, float, float], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def load_policy(args: Args, device: str, *, trained: bool = True) -> tuple[Any, Any]:
    """The policy and tokenizer named by ``args.model`` (``tiny``: a tiny random Llama, built in memory).

    A ``trained`` model is loaded in ``args.master_weights`` (fp32 by default: mixed precision, the compute
    dtype is applied by :meth:`Trainer.autocast`); a frozen one (an analyser) in ``args.dtype``.
    """
    from agentgym.models.loading import load_model

    dtype = train_dtype(args) if trained else args.dtype
    if args.model == "tiny":
        from agentgym.models.tiny import make_tiny_model

        model, tokenizer = make_tiny_model(None, seed=args.seed)
        torch_dtype = resolve_dtype(dtype)
        model = model.to(device=device, dtype=torch_dtype) if torch_dtype not in (None, "auto") else model.to(device)
        return model, tokenizer
    return load_model(args.model, dtype=dtype, device=device)


def train_dtype(args: Args) -> str:
    """The dtype the trained weights live in: ``args.master_weights``, or ``args.dtype`` when that is ``same``."""
    master = getattr(args, "master_weights", "float32")
    if master == "same":
        return args.dtype
    if master not in ("float32", "fp32"):
        raise ValueError(f"unknown master_weights {master!r}: use float32 or same")
    return "float32"


def reserve_tokens(model: Any, tokenizer: Any, names: list[str]) -> list[int]:
    """Ids for reserved tokens that the tokenizer never produces from text (SAPO's w+ and w-).

    Checkpoints whose embedding matrix has unused rows past the tokenizer (Qwen2.5: 151,936 rows for
    151,665 tokens) use those rows, so the model is unchanged; otherwise the names are added as special
    tokens and the embeddings resized.
    """
    rows = model.get_input_embeddings().weight.shape[0]
    if rows >= len(tokenizer) + len(names):
        return list(range(len(tokenizer), len(tokenizer) + len(names)))
    tokenizer.add_special_tokens({"additional_special_tokens": list(names)}, replace_extra_special_tokens=False)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return [int(tokenizer.convert_tokens_to_ids(n)) for n in names]


class Trainer:
    """Model, optimizers, rollouts, scoring, updates, logging and checkpoints of one run.

    Args:
        args: the run's settings.
        algo: name used in logs.
        use_critic: build a :class:`~agentgym.rl.critic.ValueModel` critic with its own AdamW
            (``args.critic_learning_rate``).
        reserved_tokens: names of reserved tokens to allocate (SAPO's w+/w-); they are excluded from the
            policy softmax in sampling, log-probs and entropy, and their raw logits are returned as
            ``batch["readout"]`` by :meth:`score`.
    """

    def __init__(
        self,
        args: Args,
        *,
        algo: str,
        use_critic: bool = False,
        reserved_tokens: list[str] | None = None,
    ) -> None:
        self.args = args
        self.algo = algo
        self.dist: DistInfo = init_distributed(args.device)
        if args.device is not None:
            self.device = args.device
        elif torch.cuda.is_available():
            self.device = f"cuda:{self.dist.local_rank}"
        else:
            self.device = "cpu"
        if torch.device(self.device).type == "cpu":
            from agentgym.models.threads import apply_threads

            self.threads = apply_threads(args.threads, announce=self.dist.is_main).threads
        seed_everything(args.seed + self.dist.rank)
        self.model, self.tokenizer = load_policy(args, self.device)
        if args.init_from:  # SFT -> RL: the policy (and so the reference model) starts from that run's weights
            load_model_weights(self.model, args.init_from, model_name=args.model)
        if args.restrict_vocab and args.model == "tiny":
            from agentgym.rl.toy import add_word_tokens

            add_word_tokens(self.model, self.tokenizer, args.restrict_vocab)
        self.reserved_ids = reserve_tokens(self.model, self.tokenizer, reserved_tokens) if reserved_tokens else []
        vocab_rows = self.model.get_output_embeddings().weight.shape[0]
        suppress: set[int] = set(self.reserved_ids)
        if args.restrict_vocab:
            from agentgym.rl.toy import suppress_all_but

            suppress.update(
                suppress_all_but(self.tokenizer, args.restrict_vocab, allow_eos=args.allow_eos, vocab_size=vocab_rows)
            )
        # The same ids are never sampled and are excluded from the training softmax (ratios start at 1).
        self.exclude_ids: list[int] = sorted(suppress)
        if args.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
            self.model.config.use_cache = False
        strategy = getattr(args, "distributed", "ddp")
        self.sharded = self.dist.enabled and strategy == "fsdp"
        self.ref_model = None
        if args.beta > 0:
            self.ref_model = copy.deepcopy(self.model).eval()
            compute = resolve_dtype(args.dtype)
            if (
                self.autocast_active
                and isinstance(compute, torch.dtype)
                and compute != resolve_dtype(train_dtype(args))
            ):
                self.ref_model.to(dtype=compute)  # frozen: held in the compute dtype
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
            self.ref_model = shard_model(self.ref_model, strategy, self.dist)
        self.critic = None
        self.critic_optimizer = None
        if use_critic:
            from agentgym.rl.critic import ValueModel

            self.critic = ValueModel.from_causal_lm(self.model)  # from the whole model, then sharded like it
            if args.gradient_checkpointing:
                self.critic.gradient_checkpointing_enable()
            self.critic = shard_model(self.critic, strategy, self.dist)
            self.critic.train()
            self.critic_optimizer = torch.optim.AdamW(
                self.critic.parameters(),
                lr=float(getattr(args, "critic_learning_rate", 1e-5)),
                weight_decay=args.weight_decay,
            )
        if args.lora_rank > 0:  # after the reference and critic copies: only the policy gets the adapter
            self.model = apply_lora(
                self.model,
                rank=args.lora_rank,
                alpha=args.lora_alpha,
                dropout=args.lora_dropout,
                target_modules=args.lora_target_modules,
            )
        self.model = shard_model(self.model, strategy, self.dist)
        self.model.train()
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=args.learning_rate,
            weight_decay=args.weight_decay,
        )
        # Any optimizer step (RL update, SEED's SFT stage, ...) makes the rollout engine's copy stale.
        self._engine_stale = False
        self._sync_s = 0.0
        self.optimizer.register_step_post_hook(lambda *_: setattr(self, "_engine_stale", True))
        self.generator = self._rollout_generator()
        self.template = self._template()
        self.task_rng = np.random.default_rng(args.seed)
        self.iteration = 0
        self.history: list[dict[str, float]] = []
        self.run_dir = args.run_dir
        if args.resume:
            self._resume()
            self._engine_stale = True
        elif self.dist.is_main and (Path(self.run_dir) / "metrics.jsonl").exists():
            self._set_aside_old_run()
        self.logger = MetricsLogger(
            self.run_dir,
            track=args.track and self.dist.is_main,
            project=args.wandb_project,
            config=to_dict(args),
            history=self.history,
            enabled=self.dist.is_main,
        )
        self._pool = None
        self._closeables: list[Any] = []  # closed when fit() ends (episode writers, ...)
        if self.sharded:  # rollouts and scoring run on whole layers (see agentgym.rl.distributed)
            gather_for_inference(self.model)

    def _set_aside_old_run(self) -> None:
        """A fresh run into a used run folder: move the old run to ``<run_dir>.old-N`` (never mix, never delete)."""
        old = Path(self.run_dir)
        n = 1
        while old.with_name(f"{old.name}.old-{n}").exists():
            n += 1
        dest = old.with_name(f"{old.name}.old-{n}")
        old.rename(dest)
        print(f"{old} held an earlier run (pass --resume to continue it); moved it to {dest}")

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

    # -- setup helpers ---------------------------------------------------------------------------------
    def _template(self):
        if self.args.prompt_style == "bare":
            from agentgym.rl.toy import BarePromptTemplate

            return BarePromptTemplate()
        from agentgym.prompts import get_template

        return get_template(self.args.env_id, self.args.prompt_style)

    @property
    def pool(self):
        if self._pool is None:
            from agentgym.envpool import EnvPool

            val_n = self.args.val_tasks * max(1, getattr(self.args, "val_group_size", 1))
            n = max(self.tasks_per_rank * self.args.group_size, val_n if self.args.val_every else 0)
            self._pool = EnvPool(
                self.args.env_id,
                n,
                env_kwargs=self.args.env_kwargs or None,
                backend=self.args.env_backend,
                num_workers=self.args.num_env_workers,
            )
        return self._pool

    @property
    def tasks_per_rank(self) -> int:
        return max(1, math.ceil(self.args.num_tasks / self.dist.world_size))

    @property
    def autocast_active(self) -> bool:
        """bf16 autocast (``args.bf16_autocast``) on CUDA, and on CPU when ``args.dtype`` asks for bfloat16 and the
        CPU has native bf16 instructions (emulated bf16 is ~3x slower than fp32: ``cpu_has_native_bf16``)."""
        if not self.args.bf16_autocast:
            return False
        kind = torch.device(self.device).type
        if kind == "cuda":
            return True
        return kind == "cpu" and resolve_dtype(self.args.dtype) == torch.bfloat16 and cpu_has_native_bf16()

    def autocast(self):
        """bf16 autocast when :attr:`autocast_active` (fp32 master weights stay fp32); else nothing."""
        if not self.autocast_active:
            return nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16)

    # -- rollouts --------------------------------------------------------------------------------------
    def next_tasks(self) -> list[EpisodeSpec]:
        """This iteration's tasks (drawn from the run's task generator; this rank's share)."""
        seeds = self.task_rng.integers(0, 2**31 - 1, size=self.args.num_tasks)
        options = {"split": self.args.task_split} if self.args.task_split else None
        specs = [EpisodeSpec(seed=int(s), options=dict(options) if options else None) for s in seeds]
        return specs[self.dist.rank :: self.dist.world_size]

    def rollout(
        self,
        tasks: list[EpisodeSpec],
        *,
        group_size: int,
        temperature: float,
        seed: int,
        hooks: Sequence[Any] = (),
        build_kwargs: Callable[..., dict[str, Any]] | None = None,
        top_p: float | None = None,
        top_k: int = 0,
    ):
        """``collect_rollouts`` with the run's settings; ``hooks``/``build_kwargs`` are passed through.

        ``top_p`` None uses ``args.top_p``; ``top_k`` 0 means no top-k cut (validation may set both).
        """
        from agentgym.rl.rollout import collect_rollouts

        a = self.args
        self.sync_rollout_engine()
        with self.autocast():  # the HF engine generates with the trained (fp32 master) weights in bf16
            return collect_rollouts(
                self.generator,
                self.tokenizer,
                a.env_id,
                tasks,
                group_size=group_size,
                template=self.template,
                max_turns=a.max_turns,
                history_length=a.history_length,
                max_prompt_tokens=a.max_prompt_tokens,
                max_new_tokens=a.max_new_tokens,
                temperature=temperature,
                top_p=a.top_p if top_p is None else top_p,
                top_k=top_k,
                # another engine's are kept to measure drift; the HF engine's replace score()'s old-policy pass
                return_logprobs=a.rollout_engine != "hf" or self.sampling_logps_are_old,
                suppress_token_ids=self.exclude_ids or None,
                env_kwargs=a.env_kwargs or None,
                seed=seed,
                pool=self.pool,
                agent_name=f"{self.algo}:{a.model}",
                hooks=hooks,
                build_kwargs=build_kwargs,
            )

    def _rollout_generator(self) -> Any:
        """The generator of ``args.rollout_engine`` (see :mod:`agentgym.rl.engine`)."""
        engine = self.args.rollout_engine
        if engine not in ENGINES:
            raise ValueError(f"unknown rollout_engine {engine!r}: use one of {', '.join(ENGINES)}")
        if engine == "vllm":  # under torchrun every rank runs its own engine over the gathered policy (TP 1)
            return build_vllm_generator(self.model, self.tokenizer, self.args)
        from agentgym.models.generation import HFGenerator

        return HFGenerator(self.model, self.tokenizer)

    def sync_rollout_engine(self) -> float:
        """Push the policy's weights into a separate rollout engine when an update made its copy stale.

        Returns the seconds spent (0 for the HF engine, which generates with the trained model itself).
        """
        if not self._engine_stale:
            return 0.0
        t0 = time.perf_counter()
        push_weights(self.generator, self.model)
        self._engine_stale = False
        spent = time.perf_counter() - t0
        self._sync_s += spent
        return spent

    @property
    def sampling_logps_are_old(self) -> bool:
        """Whether the HF rollout's sampling log-probs are the old policy's ``old_per_token_logps`` (no rescoring).

        They are when the rollout samples with the trained weights themselves (HF engine, not sharded) in fp32
        (no bf16 autocast), from the full tempered softmax the loss uses (top_p 1; suppressed ids excluded in
        both), the rows are the sampled (prompt, response) pairs (no method rewrites them: ``collect``,
        ``training_batch`` and ``score_batch`` are this class's), no read-out logits are needed (SAPO) and
        nothing is random in the forward (no dropout). Then the old pass would recompute the same numbers up
        to float summation order (tests/rl/test_phases.py).
        """
        a = self.args
        cls = type(self)
        cfg = getattr(getattr(self.model, "config", None), "attention_dropout", 0.0) or 0.0
        return bool(
            a.reuse_sampling_logprobs
            and a.rollout_engine == "hf"
            and not self.sharded
            and not self.autocast_active
            and a.top_p >= 1.0
            and not self.reserved_ids
            and (a.lora_rank == 0 or a.lora_dropout == 0)
            and float(cfg) == 0.0
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
            success_scale=a.success_reward,
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

    # -- forward passes --------------------------------------------------------------------------------
    def forward(self, mb: TurnBatch, *, want_entropy: bool = False, readout: bool = False, model: Any = None):
        """The policy's (or ``model``'s) per-token log-probs / entropy / read-outs on ``mb``."""
        with self.autocast():
            return forward_completion(
                model if model is not None else self.model,
                mb["input_ids"],
                mb["attention_mask"],
                mb.completion_length,
                temperature=self.args.temperature,
                chunk_size=self.args.logprob_chunk_size,
                exclude_token_ids=self.exclude_ids or None,
                readout_token_ids=self.reserved_ids if readout and self.reserved_ids else None,
                want_entropy=want_entropy,
            )

    def critic_values(self, mb: TurnBatch) -> torch.Tensor:
        with self.autocast():
            return self.critic(mb["input_ids"], mb["attention_mask"], mb.completion_length)

    @torch.no_grad()
    def score(self, batch: TurnBatch) -> dict[str, float]:
        """Fill ``old_per_token_logps`` (+ ``readout``), ``ref_per_token_logps`` and ``values``; returns timings."""
        B, T = batch["completion_mask"].shape
        old = torch.zeros(B, T)
        ref = torch.zeros(B, T) if self.ref_model is not None else None
        values = torch.zeros(B, T) if self.critic is not None else None
        readout = torch.zeros(B, T + 1, len(self.reserved_ids)) if self.reserved_ids else None
        times = {"time/old_logprob_s": 0.0, "time/ref_logprob_s": 0.0, "time/critic_s": 0.0}
        mbs = max(1, self.args.micro_batch_size)
        was_training = self.model.training
        self.model.eval()  # no dropout in scoring (the training forward's dropout is 0 for our models too)
        n_mb = -(-B // mbs)
        # the sampler's log-probs are the old policy's (see sampling_logps_are_old): no old-policy forward
        reuse = "sampling_per_token_logps" in batch and self.sampling_logps_are_old
        if self.sharded and (self.ref_model is not None or self.critic is not None):
            n_mb = max_over_ranks(n_mb, self.dist)  # sharded ref/critic forwards: the same count on every rank
        for k in range(n_mb):
            s = k * mbs
            rows = list(range(s, min(B, s + mbs)))
            if not rows:  # padding for the other ranks: a forward whose output is dropped
                mb = batch.select([0]).to(self.device)
                if self.ref_model is not None:
                    self.forward(mb, model=self.ref_model)
                if self.critic is not None:
                    self.critic_values(mb)
                continue
            mb = batch.select(rows).to(self.device)
            t_mb = mb.completion_length
            t0 = time.perf_counter()
            if not reuse:
                out = self.forward(mb, readout=readout is not None)
                old[s : s + len(rows), :t_mb] = out["per_token_logps"].float().cpu()
                if readout is not None:
                    readout[s : s + len(rows), : t_mb + 1] = out["readout"].float().cpu()
            t1 = time.perf_counter()
            times["time/old_logprob_s"] += t1 - t0
            if ref is not None:
                ref[s : s + len(rows), :t_mb] = self.forward(mb, model=self.ref_model)["per_token_logps"].float().cpu()
                times["time/ref_logprob_s"] += time.perf_counter() - t1
            if values is not None:
                t2 = time.perf_counter()
                values[s : s + len(rows), :t_mb] = self.critic_values(mb).float().cpu()
                times["time/critic_s"] += time.perf_counter() - t2
        if was_training:
            self.model.train()
        if reuse:
            old = batch["sampling_per_token_logps"].float() * batch["completion_mask"].float()  # (B, T)
        batch["old_per_token_logps"] = old
        if "sampling_per_token_logps" in batch and not reuse:  # the rollout engine's log-probs vs the trainer's
            mask = batch["completion_mask"].float()
            gap = (batch["sampling_per_token_logps"] - old).abs() * mask
            times["rollout/logprob_diff"] = float(gap.sum() / mask.sum().clamp(min=1.0))
            times["rollout/logprob_diff_max"] = float(gap.max())
        if ref is not None:
            batch["ref_per_token_logps"] = ref
        if values is not None:
            batch["values"] = values
        if readout is not None:
            batch["readout"] = readout
        return times

    # -- update ----------------------------------------------------------------------------------------
    def _optimizers(self) -> list[tuple[Any, torch.optim.Optimizer]]:
        out: list[tuple[Any, torch.optim.Optimizer]] = [(self.model, self.optimizer)]
        if self.critic is not None and self.critic_optimizer is not None:
            out.append((self.critic, self.critic_optimizer))
        return out

    def update(
        self, batch: TurnBatch, loss_fn: LossFn, *, iteration: int, mini_batch_size: int | None = None
    ) -> dict[str, float]:
        """Mini-batch epochs of ``loss_fn`` with gradient accumulation, clipping and AdamW steps.

        ``loss_fn(trainer, micro_batch, n_tokens, n_rows)`` returns ``(loss, stats)`` where ``loss`` is already
        divided by the mini-batch's token count ``n_tokens`` (token-mean) or row count ``n_rows`` (per-turn
        terms), so summing micro-batch losses gives the mini-batch loss.
        """
        a = self.args
        B = len(batch)
        mini_batch_size = a.mini_batch_size if mini_batch_size is None else mini_batch_size  # a stage's own size
        mini = mini_batch_size if mini_batch_size > 0 else B
        scope = a.mini_batch_scope
        if scope not in ("rank", "global"):
            raise ValueError(f"unknown mini_batch_scope {scope!r}: use rank (ours) or global (verl)")
        global_scope = scope == "global" and self.dist.enabled
        if global_scope and mini_batch_size > 0:  # verl: the global mini-batch, split evenly over the ranks
            mini = max(1, -(-mini_batch_size // self.dist.world_size))
        micro = max(1, a.micro_batch_size)
        g = torch.Generator().manual_seed(a.seed * 1_000_003 + iteration)
        totals: dict[str, float] = {}
        weight = 0.0
        grad_norms = []
        if self.sharded:
            reshard_for_training(self.model)
        # Every rank takes the same number of optimizer steps (gradients are averaged at each) and, when
        # sharded, the same number of forward/backward passes: missing ones are zero-weighted dummies.
        n_mini = max_over_ranks(-(-B // mini), self.dist)
        for _ in range(a.update_epochs):
            perm = torch.randperm(B, generator=g).tolist()
            for i in range(n_mini):
                rows = perm[i * mini : (i + 1) * mini]
                real = bool(rows)
                rows = rows or perm[:1]
                mini_mask = batch["completion_mask"][rows]
                world_counts = None
                if global_scope and a.loss_norm == "mini-batch":  # verl 0.9.1: global counts (x W: ranks average)
                    own = [float(mini_mask.sum()), float(len(rows))] if real else [0.0, 0.0]
                    tokens, n_rows_all = sum_over_ranks(own, self.dist)
                    w = self.dist.world_size
                    world_counts = (max(tokens, 1.0) / w, max(n_rows_all, 1.0) / w)
                for _, opt in self._optimizers():
                    opt.zero_grad(set_to_none=True)
                n_micro = -(-len(rows) // micro)
                if self.sharded:
                    n_micro = max_over_ranks(n_micro, self.dist)
                for m in range(n_micro):
                    sub = rows[m * micro : (m + 1) * micro]
                    dummy = not (real and sub)
                    mb = batch.select(sub or rows[:1]).to(self.device)
                    n_tokens, n_rows = world_counts or loss_counts(
                        mini_mask, mb["completion_mask"], n_micro, a.loss_norm
                    )
                    loss, stats = loss_fn(self, mb, n_tokens, n_rows)
                    if dummy:
                        loss = loss * 0.0
                    loss.backward()
                    if dummy:
                        continue
                    w = float(mb["completion_mask"].sum())
                    for k, v in stats.items():
                        totals[k] = totals.get(k, 0.0) + float(v) * w
                    weight += w
                for module, opt in self._optimizers():
                    average_gradients(module, self.dist)
                    params = [p for p in module.parameters() if p.grad is not None]
                    if params:
                        norm = clip_grad_norm(params, a.max_grad_norm, self.dist)
                        if module is self.model:
                            grad_norms.append(float(norm))
                    opt.step()
        if self.sharded:
            gather_for_inference(self.model)  # the next rollouts run on whole layers
        out = {k: v / max(weight, 1.0) for k, v in totals.items()}
        if grad_norms:
            out["losses/grad_norm"] = float(np.mean(grad_norms))
        return out

    # -- validation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """``val/success_rate`` on ``val_split`` (the headline) and ``val/<split>/success_rate`` on each extra split."""
        out = {"val/success_rate": self._validate_split(self.args.val_split)}
        for split in getattr(self.args, "val_extra_splits", None) or []:
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
            group_size=max(1, getattr(a, "val_group_size", 1)),
            temperature=a.val_temperature,
            top_p=getattr(a, "val_top_p", None),
            top_k=getattr(a, "val_top_k", 0),
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

    def sync_reference(self) -> None:
        """Make the reference model a copy of the current policy (collective when sharded)."""
        if self.ref_model is None:
            return
        if not self.sharded:
            self.ref_model.load_state_dict(self.model.state_dict())
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            set_model_state_dict,
        )

        reshard_for_training(self.model)
        full = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        gather_for_inference(self.model)
        set_model_state_dict(self.ref_model, full, options=StateDictOptions(full_state_dict=True))

    def export_model(self) -> Path | None:
        """Write the policy as a plain HF folder ``run_dir/model`` (``args.export_model``); None when sharded
        (an FSDP run's weights are in its ``ckpt_*``: ``agentgym.rl.checkpoint.load_model_weights``)."""
        if self.sharded:
            print("export_model: skipped for an FSDP-sharded run (load its ckpt_* instead)", flush=True)
            return None
        if not self.dist.is_main:
            return None
        from agentgym.models.prompt_settings import write_prompt_settings
        from agentgym.rl.engine import save_policy_folder

        folder = save_policy_folder(self.model, self.tokenizer, self.run_dir / "model")
        a = self.args
        write_prompt_settings(  # `agentgym eval --agent hf:<folder>` then prompts as training did
            folder,
            env_id=a.env_id,
            style=a.prompt_style,
            template=getattr(self.template, "id", type(self.template).__name__),
            history_length=a.history_length,
            max_new_tokens=a.max_new_tokens,
            max_prompt_tokens=a.max_prompt_tokens,
            answer_format=self.template.format_answer("...", "ACTION"),
            trained_by=self.algo,
        )
        return folder

    def save(self) -> None:
        if self.sharded:
            reshard_for_training(self.model)  # state dicts are gathered from the shards
        state = self.state_dict()  # collective when the model is sharded: every rank takes part
        if self.sharded:
            gather_for_inference(self.model)
        if self.dist.is_main:
            # one checkpoint: the write is atomic, so the previous one is only deleted once this one is whole
            save_checkpoint(self.run_dir, self.iteration, state, keep=1)

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
                final = self.iteration >= a.total_iterations
                if (a.save_every and self.iteration % a.save_every == 0) or final:
                    self.save()
                if a.stop_after is not None and done_here >= a.stop_after:
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
        rb = collected
        returns = episode_returns(batch) if batch is not None else {}
        meta = batch.meta if batch is not None else []
        local = {
            "returns": [returns.get(e, 0.0) for e in range(len(rb.episodes))],
            "success": rb.episode_success(),
            "invalid": [not m["valid"] for m in meta],
            "resp": batch["completion_mask"].sum(1).tolist() if batch is not None else [],
        }
        parts = all_gather_objects(local, self.dist)
        cat = {k: [x for p in parts for x in p[k]] for k in local}
        train_tokens = float(batch["attention_mask"].sum()) * self.dist.world_size if batch is not None else 0.0
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

    def end_iteration(self, it: int, metrics: dict[str, float]) -> dict[str, float]:
        """Close iteration ``it``: count it, validate every ``val_every`` iterations, log the metrics."""
        self.iteration = it + 1
        if self.args.val_every and self.iteration % self.args.val_every == 0:
            metrics.update(self.validate())
        self.logger.log(self.iteration, metrics)
        return metrics


def param_vector(model: Any) -> torch.Tensor:
    """All parameters flattened into one CPU vector (tests compare runs with it)."""
    return torch.cat([p.detach().float().reshape(-1).cpu() for p in model.parameters()])
