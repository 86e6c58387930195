"""A run's models and what is done with them outside the update: the policy, its reference copy, PPO's critic,
the optimizers, the rollout engine and env pool; forward passes, rollouts and weight sync.

:class:`Actor` builds them with :mod:`agentgym.rl.setup` (verl's actor/rollout/ref worker, in one process);
:class:`~agentgym.rl.trainer.Trainer` adds the iteration loop on top.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from agentgym.agent_io import EpisodeSpec
from agentgym.rl.batch import TurnBatch
from agentgym.rl.config import Args
from agentgym.rl.distributed import DistInfo, copy_weights, init_distributed
from agentgym.rl.logprobs import forward_completion
from agentgym.rl.rollout_engine import export_policy, push_weights
from agentgym.rl.setup import (
    autocast_enabled,
    build_critic,
    build_generator,
    build_policy,
    build_reference,
    build_trained_policy,
    pick_device,
    seed_everything,
)


class Actor:
    """The models, optimizers, rollout engine and env pool of one run, and their forward passes and rollouts.

    Args:
        args: the run's settings.
        algo: name used in logs.
        critic_learning_rate: when set, build a :class:`~agentgym.rl.critic.ValueModel` critic with its own
            AdamW at this learning rate (PPO passes its ``critic_learning_rate``); None: no critic.
        reserved_tokens: names of reserved tokens to allocate (SAPO's w+/w-); they are excluded from the
            policy softmax in sampling, log-probs and entropy, and their raw logits are returned as
            ``batch["readout"]`` by ``Trainer.score``.
    """

    def __init__(
        self,
        args: Args,
        *,
        algo: str,
        critic_learning_rate: float | None = None,
        reserved_tokens: list[str] | None = None,
    ) -> None:
        self.args = args
        self.algo = algo
        self.dist: DistInfo = init_distributed(args.device)
        self.device = pick_device(args, self.dist)
        if torch.device(self.device).type == "cpu":
            from agentgym.models.threads import apply_threads

            self.threads = apply_threads(args.threads, announce=self.dist.is_main).threads
        seed_everything(args.seed + self.dist.rank)
        policy = build_policy(args, self.device, reserved_tokens)
        self.tokenizer = policy.tokenizer
        self.reserved_ids = policy.reserved_ids
        self.exclude_ids: list[int] = policy.exclude_ids
        self.sharded = self.dist.enabled and args.distributed == "fsdp"
        self.ref_model = build_reference(policy.model, args, self.dist, autocast=self.autocast_active)
        self.critic = None
        self.critic_optimizer = None
        if critic_learning_rate is not None:
            self.critic, self.critic_optimizer = build_critic(policy.model, args, self.dist, critic_learning_rate)
        self.model, self.optimizer = build_trained_policy(policy.model, args, self.dist)
        # Any optimizer step (RL update, SEED's SFT stage, ...) makes the rollout engine's copy stale.
        self._engine_stale = False
        self._sync_s = 0.0
        self.optimizer.register_step_post_hook(lambda *_: setattr(self, "_engine_stale", True))
        self.generator = build_generator(args, self.model, self.tokenizer)
        self.template = self._template()
        self.run_dir = args.run_dir
        self._pool = None

    @property
    def autocast_active(self) -> bool:
        """bf16 autocast for forward passes (:func:`agentgym.rl.setup.autocast_enabled`)."""
        return autocast_enabled(self.args, self.device)

    def autocast(self):
        """bf16 autocast when :attr:`autocast_active` (fp32 master weights stay fp32); else nothing."""
        if not self.autocast_active:
            return nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16)

    def _template(self) -> Any:
        """The prompt template of ``args.prompt_style`` (``bare``: :class:`~agentgym.rl.toy.BarePromptTemplate`)."""
        if self.args.prompt_style == "bare":
            from agentgym.rl.toy import BarePromptTemplate

            return BarePromptTemplate()
        from agentgym.prompts import get_template

        return get_template(self.args.env_id, self.args.prompt_style)

    @property
    def pool(self) -> Any:
        """The env pool, started on first use, with room for an iteration's (or a validation's) episodes."""
        if self._pool is None:
            from agentgym.envpool import EnvPool

            val_n = self.args.val_tasks * max(1, self.args.val_group_size)
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
        """This rank's share of ``args.num_tasks``."""
        return max(1, math.ceil(self.args.num_tasks / self.dist.world_size))

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
        both), no read-out logits are needed (SAPO) and nothing is random in the forward (no dropout); the
        trainer adds that the rows must be the sampled ones. Then the old pass would recompute the same numbers
        up to float summation order (tests/rl/test_phases.py).
        """
        a = self.args
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
        )

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
        """The critic's per-token values on ``mb`` (B, T)."""
        with self.autocast():
            return self.critic(mb["input_ids"], mb["attention_mask"], mb.completion_length)

    def sync_reference(self) -> None:
        """Make the reference model a copy of the current policy (collective when sharded)."""
        if self.ref_model is not None:
            copy_weights(self.model, self.ref_model, sharded=self.sharded)

    def export_model(self) -> Path | None:
        """Write the policy as a plain HF folder ``run_dir/model`` (``args.export_model``); None when sharded
        (an FSDP run's weights are in its ``ckpt_*``: ``agentgym.rl.checkpoint.load_model_weights``)."""
        if self.sharded:
            print("export_model: skipped for an FSDP-sharded run (load its ckpt_* instead)", flush=True)
            return None
        if not self.dist.is_main:
            return None
        return export_policy(self.model, self.tokenizer, self.run_dir / "model", self.args, self.template, self.algo)
