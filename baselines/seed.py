"""SEED: self-distillation of episode lessons into the policy (arXiv 2607.14777), on top of GRPO.

What differs from GRPO (``baselines/grpo.py``; its group advantage is imported from there, its PPO-clip term is
written below from the same primitives of ``agentgym.rl``, beside the distillation term):

* **lessons** -- after each episode the frozen previous policy (the weights that sampled it) reads its
  own transcript and answers a JSON-only analyser prompt with the paper's fields ``episode_summary`` (on
  success the decision rule and action order, on failure the core mistake and its warning signs) and
  ``episode_skill``, the short reusable lesson (``agentgym/prompts/lesson.py``). The lesson writer is an episode-end hook
  (``agentgym.rl.hooks.LessonWriter``), so each lesson is logged with its episode (``Episode.extras``);
  malformed JSON is retried, then the episode keeps no lesson (counted in ``seed/lesson_parse_failures``).
* **teacher / student** -- the teacher is the same model with the lesson inserted into the task prompt
  (after "Your task is to: ...", ``PromptTemplate.build(..., lesson=...)``), scored without gradient; the
  student is the policy with the plain prompt. Both score the *student's own sampled tokens*.
* **gated on-policy distillation** -- per token, Delta = sg[l_skill - l_theta], gate g = sigmoid(beta_g * Delta)
  with beta_g = 5, and L_opd = E[m * g * (sg[l_skill] - l_theta)] (m: response tokens of episodes with a
  lesson). Total L = L_GRPO + lambda_opd * L_opd, lambda_opd = 0.01 (the paper's values; KL 0.01, group 8,
  lr 1e-6, 150 updates, invalid penalty 0.1, gamma 0.95 are in the configs).
* **SFT stage** -- the paper's headline result first fine-tunes on lesson-annotated trajectories
  (180 tasks x 8 rollouts, 3 epochs); without it the ablation scores 86.0 instead of 91.8 (Qwen2.5-3B,
  ALFWorld). As the paper, the SFT rows teach trajectory -> lesson: the analyser chat (the episode's
  transcript) with the ``{"episode_summary", "episode_skill"}`` object as target, token-mean NLL before RL
  starts. The lessons may come from an external analyser model (``analyser_model``, e.g. a larger
  instruct model; None: the policy itself). ``sft_on_trajectories`` adds the successful turns under their
  lesson-conditioned prompt (action-under-lesson rows, off by default). ``no_sft`` skips the stage.

Ours: ``analyser_model: oracle`` has the privileged grid analyser (``agentgym.agents.oracle``) write every lesson
(the upper bound of the lesson mechanism), and ``lesson_probe`` (on in the CPU configs) logs the lesson-conditioned policy's success
against the lesson-free one on the same tasks every iteration.

Ablations: ``no_sft``, ``no_gate`` (g = 1). ``train_fraction`` < 1 trains on a fixed subset of the
training tasks (the paper's data-efficiency run uses 60%).

Run: ``python baselines/seed.py --config baselines/configs/seed/seed_alfworld_qwen2.5-3b.yaml``
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python baselines/seed.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from agentgym.agent_io import EpisodeSpec
from agentgym.agents.oracle import OracleAnalyser
from agentgym.prompts.lesson import build_lesson_messages
from agentgym.rl.batch import TurnBatch, build_batch
from agentgym.rl.config import GroupArgs, parse_args
from agentgym.rl.hooks import LessonWriter, chat_analyser, encode_chat
from agentgym.rl.losses import (
    LossStats,
    add_kl_entropy,
    clipped_policy_loss,
    masked_sum,
    micro_batch_scale,
    scale_stats,
    sft_loss,
)
from agentgym.rl.rollout import RolloutBatch, fit_prompt
from agentgym.rl.toy import BareContextTemplate
from agentgym.rl.trainer import Trainer
from baselines.grpo import compute_advantages


@dataclass
class Args(GroupArgs):
    """SEED settings (GRPO's and the shared ones are inherited)."""

    lambda_opd: float = 0.01
    """weight of the distillation loss (paper: 0.01)"""
    gate_beta: float = 5.0
    """sharpness of the gate sigma(beta * Delta) (paper: 5)"""
    no_gate: bool = False
    """ablation: g = 1 (plain on-policy distillation)"""
    no_sft: bool = False
    """ablation: skip the SFT stage (paper: 86.0 instead of 91.8)"""
    sft_tasks: int = 4
    """tasks of the SFT stage (paper: 180)"""
    sft_group_size: int = 2
    """rollouts per SFT task (paper: 8)"""
    sft_epochs: int = 1
    """passes over the SFT rows (paper: 3)"""
    sft_learning_rate: float | None = None
    """learning rate of the SFT stage; None: ``learning_rate``"""
    sft_temperature: float | None = None
    """sampling temperature of the SFT stage's rollouts; None: ``temperature``"""
    sft_mini_batch_size: int | None = None
    """rows per optimizer step of the SFT stage; None: ``mini_batch_size``"""
    sft_on_analysis: bool = True
    """SFT on trajectory -> lesson: analyser chats with the ``episode_summary``/``episode_skill`` JSON as target
    (the paper's SFT)"""
    sft_on_trajectories: bool = False
    """option: also SFT on successful turns in the lesson-conditioned prompt (action-under-lesson rows)"""
    analyser_model: str | None = None
    """HF id or folder of an external model that writes the SFT stage's lessons (``tiny``: a tiny random
    model); None: the policy writes them; RL-time lessons then come from the policy (self-distillation).
    ``oracle``: the privileged grid analyser (``agentgym.agents.oracle``, ours) writes *every* lesson, SFT
    stage and RL alike -- the upper bound of the lesson mechanism, not self-distillation"""
    lesson_probe: bool = False
    """each iteration, play one lesson-conditioned episode per task that got a lesson (not trained on) and log
    its success against the lesson-free rollouts of the same tasks (``seed/lesson_conditioned_success`` vs
    ``seed/lesson_free_success``): the gap the distillation term closes"""
    lesson_max_new_tokens: int = 256
    """length cap of an analyser reply"""
    lesson_temperature: float | None = None
    """sampling temperature of the analyser; None: ``temperature``"""
    lesson_max_retries: int = 2
    """extra analyser calls for replies that were not valid JSON"""
    lesson_max_prompt_tokens: int = 4096
    """analyser prompt cap (the transcript is clipped in the middle first)"""
    train_fraction: float = 1.0
    """fraction of the training tasks used (paper's data-efficiency run: 0.6); needs ``num_train_tasks``"""
    num_train_tasks: int | None = None
    """size of the training task set (ALFWorld train: 3553 games); tasks are ``{"split", "index"}`` options"""
    log_episodes: bool = True
    """write every episode with its lesson to ``<run>/episodes.jsonl``"""


# -- SEED's gated on-policy distillation (the advantage is GRPO's) -----------------------------------------------------
def seed_gate(teacher_per_token_logps: torch.Tensor, per_token_logps: torch.Tensor, gate_beta: float = 5.0):
    """g = sigma(beta * sg[l_skill - l_theta]) per token, ``(B, T)``, no gradient.

    Tokens the lesson-conditioned teacher finds likelier than the student (Delta > 0) get g > 1/2 and are
    distilled harder; tokens the teacher rejects are softly down-weighted rather than pushed away.
    """
    delta = (teacher_per_token_logps - per_token_logps).detach()  # (B, T)
    return torch.sigmoid(gate_beta * delta)


def opd_loss(
    per_token_logps: torch.Tensor,
    teacher_per_token_logps: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    gate_beta: float = 5.0,
    use_gate: bool = True,
    normalizer: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """L_opd = E[m * g * (sg[l_skill] - l_theta)], token mean over the mask m.

    Only the student (``per_token_logps``) gets gradient: dL/dl_theta = -g * m / n. ``use_gate=False`` is the
    no-gate ablation (g = 1).
    """
    mask = completion_mask.to(per_token_logps.dtype)
    n = mask.sum().clamp(min=1.0) if normalizer is None else normalizer
    teacher = teacher_per_token_logps.detach()
    gate = seed_gate(teacher, per_token_logps, gate_beta) if use_gate else torch.ones_like(per_token_logps)
    per_token = gate * (teacher - per_token_logps)  # (B, T)
    loss = masked_sum(per_token, mask) / n
    with torch.no_grad():
        m = mask.sum().clamp(min=1.0)
        stats = {
            "seed/gate_mean": masked_sum(gate, mask) / m,
            "seed/delta_mean": masked_sum(teacher - per_token_logps.detach(), mask) / m,
        }
    return loss, stats


def seed_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float):
    """GRPO's loss (PPO-clip + beta * KL - entropy) + lambda_opd * L_opd, token means over the mini-batch."""
    a: Args = trainer.args
    out = trainer.forward(mb, want_entropy=a.entropy_coef > 0)
    per_token_logps = out["per_token_logps"]  # (B, T) student: plain prompt, its own sampled tokens
    mask = mb["completion_mask"]
    pg_loss, stats = clipped_policy_loss(a, per_token_logps, mb, mask, n_tokens)
    opd_mask = mask * mb["has_lesson"][:, None]  # (B, T) m: episodes whose lesson parsed
    opd, opd_stats = opd_loss(
        per_token_logps,
        mb["teacher_per_token_logps"],
        opd_mask,
        gate_beta=a.gate_beta,
        use_gate=not a.no_gate,
        normalizer=n_tokens,
    )
    loss = pg_loss + a.lambda_opd * opd
    result = {
        "losses/policy_loss": pg_loss.detach(),
        "losses/opd_loss": opd.detach(),
        "losses/approx_kl": stats["approx_kl"],
        "losses/clipfrac": stats["clipfrac"],
        **opd_stats,
    }
    loss = add_kl_entropy(a, loss, result, out, mb, mask, n_tokens)
    scale = micro_batch_scale(n_tokens, mask)  # report per-micro-batch token means
    return loss, scale_stats(
        result, scale, ("losses/policy_loss", "losses/opd_loss", "losses/kl_ref", "losses/entropy")
    )


def sft_stage_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float) -> tuple[torch.Tensor, LossStats]:
    """Token-mean NLL of the SFT stage (:func:`agentgym.rl.losses.sft_loss`) on the policy's forward.

    Under ``restrict_vocab`` (tiny-model runs) target ids outside the policy's vocabulary are left out: the
    training softmax has no such ids, so their log-prob is the -1e4 floor with no gradient, and counting them
    would report a loss of ~1e4 that nothing can lower. The gradient is the same either way.
    """
    per_token_logps = trainer.forward(mb)["per_token_logps"]  # (B, T)
    mask = mb["completion_mask"]
    if trainer.exclude_ids:
        targets = mb["input_ids"][:, -per_token_logps.shape[1] :]  # (B, T) the response ids
        excluded = torch.tensor(trainer.exclude_ids, dtype=targets.dtype, device=targets.device)
        mask = mask * (~torch.isin(targets, excluded)).to(mask.dtype)  # (B, T)
    return sft_loss(per_token_logps, mask, n_tokens)


class SeedTrainer(Trainer):
    """The shared :class:`Trainer` with SEED's lesson hook, teacher scoring, OPD loss and SFT stage."""

    def __init__(self, args: Args, **kw: Any) -> None:
        if not 0.0 < args.train_fraction <= 1.0:
            raise ValueError(f"train_fraction must be in (0, 1], got {args.train_fraction}")
        if args.train_fraction < 1.0 and not args.num_train_tasks:
            raise ValueError("train_fraction < 1 needs num_train_tasks (the size of the training task set)")
        self.sft_done = False
        super().__init__(args, algo="seed", **kw)
        oracle = args.analyser_model == "oracle"
        analyse = (
            OracleAnalyser()
            if oracle
            else chat_analyser(
                self.generator,
                self.tokenizer,
                max_new_tokens=args.lesson_max_new_tokens,
                temperature=args.temperature if args.lesson_temperature is None else args.lesson_temperature,
                max_prompt_tokens=args.lesson_max_prompt_tokens,
                seed=args.seed * 31,
            )
        )
        self._writer = self.open_episode_log(args.log_episodes)  # closed by Trainer.fit
        then = [self._writer] if self._writer is not None else []
        self.lesson_writer = LessonWriter(analyse, max_retries=args.lesson_max_retries, then=then)
        self.sft_analyse = None  # the external analyser of the SFT stage (None: the policy's own)
        self.probe_metrics: dict[str, float] = {}
        self.probe_pairs: list[dict[str, float]] = []  # the lesson probe's per-task pairs, last collection
        if args.analyser_model and not oracle and not args.no_sft and not self.sft_done:
            self.sft_analyse = self._external_analyser()
        self.task_subset: list[int] | None = None
        if args.num_train_tasks:
            k = max(1, int(args.train_fraction * args.num_train_tasks))
            # a fixed subset, drawn once from the run seed (the same subset on resume)
            self.task_subset = sorted(np.random.default_rng(args.seed).permutation(args.num_train_tasks)[:k].tolist())

    def _external_analyser(self):
        """A chat analyser on ``args.analyser_model`` (loaded like the policy, never trained)."""
        import dataclasses

        from agentgym.models.generation import HFGenerator
        from agentgym.rl.setup import load_policy

        a = self.args
        model, tokenizer = load_policy(
            dataclasses.replace(a, model=a.analyser_model, seed=a.seed + 1), self.device, trained=False
        )
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        self.analyser_model = model
        return chat_analyser(
            HFGenerator(model, tokenizer),
            tokenizer,
            max_new_tokens=a.lesson_max_new_tokens,
            temperature=a.temperature if a.lesson_temperature is None else a.lesson_temperature,
            max_prompt_tokens=a.lesson_max_prompt_tokens,
            seed=a.seed * 37,
        )

    def _template(self):
        if self.args.prompt_style == "bare":
            return BareContextTemplate()
        return super()._template()

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["seed"] = {"sft_done": self.sft_done}
        return state

    def _resume(self) -> None:
        super()._resume()
        from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint

        path = latest_checkpoint(self.run_dir)
        if path is not None:
            self.sft_done = bool(load_checkpoint(path, restore_rng=False).get("seed", {}).get("sft_done", False))

    # -- tasks and rollouts --------------------------------------------------------------------------------
    def next_tasks(self) -> list[EpisodeSpec]:
        if self.task_subset is None:
            return super().next_tasks()
        idx = self.task_rng.choice(self.task_subset, size=self.args.num_tasks)
        split = self.args.task_split or "train"
        specs = [EpisodeSpec(seed=int(i), options={"split": split, "index": int(i)}) for i in idx]
        return specs[self.dist.rank :: self.dist.world_size]

    def play(
        self, tasks: list[EpisodeSpec], *, group_size: int, seed: int, temperature: float | None = None
    ) -> RolloutBatch:
        """``Trainer.rollout`` with the lesson writer as hook; lessons are written before returning."""
        temperature = self.args.temperature if temperature is None else temperature
        rb = self.rollout(tasks, group_size=group_size, temperature=temperature, seed=seed, hooks=[self.lesson_writer])
        with torch.no_grad():
            self.lesson_writer.flush()  # the frozen previous policy analyses its own episodes
        return rb

    def lesson_prompts(self, rb: RolloutBatch) -> tuple[list[list[int]], list[float]]:
        """Teacher prompt of every turn (the lesson after the task sentence) and whether it has a lesson."""
        a = self.args
        prompts, has = [], []
        for t in rb.turns:
            lesson = rb.episodes[t.episode].extras.get("lesson")
            if lesson:
                _, ids, _ = fit_prompt(
                    self.template, self.tokenizer, t.inp, a.history_length, a.max_prompt_tokens, {"lesson": lesson}
                )
            else:
                ids = t.prompt_ids
            prompts.append(ids)
            has.append(1.0 if lesson else 0.0)
        return prompts, has

    @torch.no_grad()
    def score_teacher(self, rb: RolloutBatch, batch: TurnBatch) -> float:
        """``batch["teacher_per_token_logps"]``: the lesson-conditioned model on the student's tokens (no grad)."""
        t0 = time.perf_counter()
        prompts, has = self.lesson_prompts(rb)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        teacher = build_batch(prompts, [t.response_ids for t in rb.turns], pad_id=int(pad))
        B, T = teacher["completion_mask"].shape
        out = torch.zeros(B, T)
        mbs = max(1, self.args.micro_batch_size)
        was_training = self.model.training
        self.model.eval()
        for s in range(0, B, mbs):
            mb = teacher.select(list(range(s, min(B, s + mbs)))).to(self.device)
            # l_skill: the current (= sampling) weights on the lesson prompt, scored on the student's tokens
            out[s : s + mbs, : mb.completion_length] = self.forward(mb)["per_token_logps"].float().cpu()
        if was_training:
            self.model.train()
        batch["teacher_per_token_logps"] = out  # (B, T), same T as the student's rows
        batch["has_lesson"] = torch.tensor(has, dtype=torch.float32)  # (B,)
        return time.perf_counter() - t0

    # -- SFT stage -----------------------------------------------------------------------------------------
    def sft_rows(self, rb: RolloutBatch) -> tuple[list[list[int]], list[list[int]]]:
        """SFT rows of a lesson-annotated rollout (see the module docstring)."""
        a = self.args
        prompts, responses = [], []
        if a.sft_on_trajectories:
            teacher_prompts, has = self.lesson_prompts(rb)
            for t, p, h in zip(rb.turns, teacher_prompts, has):
                if h and rb.episodes[t.episode].success and t.response_ids:
                    prompts.append(p)
                    responses.append(list(t.response_ids))
        if a.sft_on_analysis:
            import json

            for ep in rb.episodes:
                seed = ep.extras.get("seed", {})
                if not seed.get("lesson"):
                    continue
                fields = seed.get("fields") or {}
                target = json.dumps(
                    {
                        "episode_summary": fields.get("episode_summary", ""),
                        "episode_skill": fields.get("episode_skill") or seed["lesson"],
                    }
                )
                eos = self.tokenizer.eos_token or ""
                prompts.append(encode_chat(self.tokenizer, build_lesson_messages(ep), a.lesson_max_prompt_tokens))
                responses.append(list(self.tokenizer(target + eos, add_special_tokens=False)["input_ids"]))
        return prompts, responses

    def sft_stage(self) -> dict[str, float]:
        """Collect ``sft_tasks x sft_group_size`` annotated rollouts and fine-tune on them (once per run)."""
        a = self.args
        prompts, responses = [], []
        n_eps = n_succ = 0
        done = 0
        own_analyse = self.lesson_writer.analyse
        if self.sft_analyse is not None:  # the external analyser writes the SFT lessons
            self.lesson_writer.analyse = self.sft_analyse
        try:
            while done < a.sft_tasks:
                tasks = self.next_tasks()[: a.sft_tasks - done]
                rb = self.play(
                    tasks, group_size=a.sft_group_size, seed=a.seed * 104_723 + done, temperature=a.sft_temperature
                )
                p, r = self.sft_rows(rb)
                prompts += p
                responses += r
                n_eps += len(rb.episodes)
                n_succ += sum(rb.episode_success())
                done += len(tasks)
        finally:
            self.lesson_writer.analyse = own_analyse
            self.sft_analyse = None
            self.analyser_model = None  # frees the external model: RL-time lessons are the policy's
        stats = {
            "sft/episodes": float(n_eps),
            "sft/success_rate": n_succ / max(n_eps, 1),
            "sft/rows": float(len(prompts)),
        }
        stats.update({k.replace("seed/", "sft/"): v for k, v in self.lesson_writer.metrics().items()})
        if prompts:
            pad = (
                self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
            )
            batch = build_batch(prompts, responses, pad_id=int(pad))
            lr = a.learning_rate if a.sft_learning_rate is None else a.sft_learning_rate
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            try:
                for epoch in range(a.sft_epochs):
                    stats.update(
                        self.update(
                            batch, sft_stage_loss, iteration=1_000_000 + epoch, mini_batch_size=a.sft_mini_batch_size
                        )
                    )
            finally:
                for group in self.optimizer.param_groups:
                    group["lr"] = a.learning_rate
        self.sft_done = True
        return stats

    # -- the Trainer hooks SEED changes --------------------------------------------------------------------
    def before_iteration(self) -> dict[str, float]:
        if self.args.no_sft or self.sft_done or self.iteration != 0:
            return {}
        stats = self.sft_stage()
        if self.ref_model is not None:  # the KL anchor is the SFT model, as for any RL after SFT
            self.sync_reference()
        return stats

    def collect(self, tasks: list[EpisodeSpec], *, seed: int) -> RolloutBatch:
        rb = self.play(tasks, group_size=self.args.group_size, seed=seed)
        self.probe_metrics = self.lesson_probe(tasks, rb, seed=seed + 7919) if self.args.lesson_probe else {}
        return rb

    @torch.no_grad()
    def lesson_probe(self, tasks: list[EpisodeSpec], rb: RolloutBatch, *, seed: int) -> dict[str, float]:
        """Success of the lesson-conditioned policy against the lesson-free one on the same tasks.

        For every task with a lesson (its group's first episode that has one), one more episode is played with
        that lesson in the prompt (the teacher's prompt); its success is compared with the mean success of the
        task's lesson-free rollouts. These episodes are measured only: never trained on, never counted as
        training episodes.
        """
        G = self.args.group_size
        picked: list[tuple[int, str]] = []
        source: list[float] = []  # success of the episode each lesson was written about
        for g in range(len(tasks)):
            for e in range(g * G, min((g + 1) * G, len(rb.episodes))):
                lesson = rb.episodes[e].extras.get("lesson")
                if lesson:
                    picked.append((g, lesson))
                    source.append(float(rb.episodes[e].success))
                    break
        self.probe_pairs = []
        if not picked:
            return {"seed/probe_tasks": 0.0}
        probe = self.rollout(
            [tasks[g] for g, _ in picked],
            group_size=1,
            temperature=self.args.temperature,
            seed=seed,
            build_kwargs=lambda inp, i: {"lesson": picked[i][1]},
        )
        success = rb.episode_success()
        free = [float(np.mean(success[g * G : (g + 1) * G])) for g, _ in picked]
        cond = [float(ep.success) for ep in probe.episodes]
        # per task, for a paired test over many tasks (tools/mechanism_probe.py --lessons)
        self.probe_pairs = [
            {"task": float(g), "conditioned": c, "free": f, "lesson_from_success": s}
            for (g, _), c, f, s in zip(picked, cond, free, source, strict=True)
        ]
        return {
            "seed/probe_tasks": float(len(picked)),
            "seed/lesson_conditioned_success": float(np.mean(cond)),
            "seed/lesson_free_success": float(np.mean(free)),
            "seed/lesson_gap": float(np.mean(cond) - np.mean(free)),
        }

    def score_batch(self, collected: RolloutBatch, batch: TurnBatch) -> dict[str, float]:
        times = self.score(batch)
        times["time/teacher_logprob_s"] = self.score_teacher(collected, batch)
        return times

    def iteration_metrics(self, collected: RolloutBatch, batch: TurnBatch | None, elapsed: float) -> dict[str, float]:
        metrics = super().iteration_metrics(collected, batch, elapsed)
        metrics["seed/lesson_rows"] = float(batch["has_lesson"].sum()) if batch is not None else 0.0
        metrics.update(self.lesson_writer.metrics())
        metrics.update(self.probe_metrics)
        return metrics

    def fit(self, advantage_fn=None, loss_fn=None) -> dict[str, float]:
        return super().fit(advantage_fn or compute_advantages, loss_fn or seed_loss)


def train(args: Args) -> dict[str, float]:
    """Train with SEED (SFT stage, then GRPO + gated lesson distillation); returns the last metrics."""
    return SeedTrainer(args).fit()


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
