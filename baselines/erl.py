"""ERL: Experiential Reinforcement Learning (Shi et al. 2026, arXiv 2602.13949; code: microsoft/experiential_rl).

What differs from GRPO (``baselines/grpo.py``; the group normalisation and the PPO-clip, KL and entropy terms are
the same primitives of ``agentgym.rl``): each iteration is an experience -> reflection -> consolidation loop.

1. **first attempt** y1 ~ pi(.|x): G episodes per task, feedback and return r1 (as GRPO).
2. **reflection** for every first attempt that failed (below ``success_threshold`` / not ``info["success"]``):
   the same policy writes a reflection D from (x, y1, feedback, r1, memory m), where m is the last
   reflection that led to a successful second attempt; then a **second attempt** y2 ~ pi(.|x, D) on the same
   task (same seed/options). When y2 succeeds, D becomes the memory.
3. **RL** (GRPO advantages within each task's group, PPO-clip loss) on first attempts, on reflections
   (a reflection's reward is its second attempt's return) and on second attempts.
4. **consolidation**: every second attempt with a positive return is distilled into the policy *without* the
   reflection in its context (each turn's prompt rebuilt from the original task prompt):
   L_distill = -E[w(r2) * log pi(y2 | x)], so at deployment the model acts well with no reflection step.
   ``consolidation_weight="indicator"`` (default, the paper): w = 1(r2 > 0); ``"raft"`` (the authors' code:
   distilled trajectories use verl's ``raft`` advantage, the outcome reward clamped at 0): w = max(r2, 0),
   which weighs HotpotQA's partial answers by their F1. With 0/1 rewards the two are the same. Total loss = PPO-clip(first, reflection, second) + consolidation_coef * L_distill
   + beta * KL - entropy bonus.

Two reflection forms (``reflection_form``, see ``agentgym/prompts/reflection.py``):
``in_context`` (the paper's description; D is placed before the current turn,
``PromptTemplate.build(..., reflection=D)``) and ``rulebook`` (the authors' code, ``ErlSokobanWorkflow`` +
``ErlPromptUpdater``: D is a rewritten system prompt, ``build(..., system=D)``). The table configs use
``rulebook``, the form the authors' code trains; ``in_context`` is the ablation. As in the authors' code,
only failed tasks are re-run, and the memory holds one item (their ``last_improved_prompt``). Their updater
can write one rulebook from a minibatch of up to 8 attempts, but their flow scripts run with a batch of 1
(``ERL_SOKOBAN_BATCH_SIZE`` / ``ERL_BATCH_SIZE`` default 1, ``train_erl_*_flow.py``), so each rulebook
comes from one failed attempt, as every reflection does here (the paper's algorithm).

Ablations (the paper's, and the authors' flags): ``no_memory`` (m is never shown), ``no_reflection`` (the
second attempt sees the raw first attempt and feedback instead of a model-written reflection; nothing
trains the reflector), ``no_consolidation`` (no distillation term); ``train_first_attempt``,
``train_reflection``, ``train_second_attempt`` drop a part from the RL loss.

Ours: ``reflector: oracle`` has the privileged grid analyser (``agentgym.agents.oracle``) write the reflections
(the upper bound of the reflection mechanism); ``erl/first_success_same_tasks`` is the first-attempt success of the
tasks the second attempts re-play (each failure's other G - 1 first attempts), the paired comparison for
``erl/second_success_rate``.

Every first and second attempt is written to ``<run>/episodes.jsonl`` with ``extras["erl"]`` holding its
reflection, the memory it saw, both returns and whether the memory was updated.

Run: ``python baselines/erl.py --config baselines/configs/erl/erl_sokoban_qwen3-4b.yaml``
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python baselines/erl.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from agentgym.agent_io import EpisodeSpec
from agentgym.agents.oracle import oracle_reflection_reply
from agentgym.prompts.reflection import (
    FORMS,
    build_reflection_messages,
    episode_feedback,
    parse_reflection,
    raw_attempt_context,
    reflection_record,
)
from agentgym.rl.advantages import group_normalize
from agentgym.rl.batch import TurnBatch, broadcast_turn_values, build_batch, turn_meta
from agentgym.rl.config import GroupArgs, parse_args
from agentgym.rl.distributed import all_gather_objects
from agentgym.rl.hooks import ReflectionLog, encode_chat
from agentgym.rl.losses import add_kl_entropy, clipped_policy_loss, masked_sum, scale_stats
from agentgym.rl.rewards import turn_rewards
from agentgym.rl.rollout import RolloutBatch, fit_prompt
from agentgym.rl.toy import BareContextTemplate
from agentgym.rl.trainer import Trainer

PARTS = ("first", "reflection", "second", "consolidation")


@dataclass
class Args(GroupArgs):
    """ERL settings (GRPO's and the shared ones are inherited)."""

    reflection_form: str = "in_context"
    """``in_context`` (paper: reflection before the current turn) or ``rulebook`` (authors' code: new system prompt)"""
    success_threshold: float | None = None
    """first-attempt env return at or above which no reflection is made; None: the env's ``info["success"]``"""
    reflection_max_new_tokens: int = 256
    """length cap of a reflection"""
    reflection_temperature: float | None = None
    """sampling temperature of reflections; None: ``temperature``"""
    no_memory: bool = False
    """ablation: never show the memory (last successful reflection) to the reflector"""
    no_reflection: bool = False
    """ablation: the second attempt sees the raw first attempt + feedback, no model-written reflection"""
    no_consolidation: bool = False
    """ablation: no distillation of rewarded second attempts (r2 > 0) into the reflection-free context"""
    train_first_attempt: bool = True
    """RL on first attempts"""
    train_reflection: bool = True
    """RL on reflections (reward = second attempt's return)"""
    train_second_attempt: bool = True
    """RL on second attempts (in their reflection context)"""
    consolidation_coef: float = 1.0
    """weight of the consolidation (distillation) loss"""
    consolidation_weight: str = "indicator"
    """per second attempt: ``indicator`` 1(r2 > 0) (the paper) or ``raft`` max(r2, 0) (the authors' code)"""
    log_episodes: bool = True
    """write every attempt with its reflection to ``<run>/episodes.jsonl``"""
    loss_agg_mode: str = "seq-mean-token-sum"
    """``seq-mean-token-sum`` (the authors' verl setting: each row's token sum, averaged over rows, so long
    reflections do not outweigh short actions) or ``token-mean`` (the GRPO baseline's)"""
    reflector: str = "policy"
    """who writes the reflections: ``policy`` (the paper: the same model) or ``oracle`` (ours: the privileged
    grid analyser of ``agentgym.agents.oracle``, which names the first mistake and the solver's plan -- the
    upper bound of the reflection mechanism; its replies are not trained on, as the policy did not sample them)"""
    restrict_reflection_vocab: bool = True
    """with ``restrict_vocab``: reflections are sampled from the same restricted vocabulary"""


# -- advantages and losses --------------------------------------------------------------------------------
def grouped_advantages(returns: list[float], groups: list[int], *, norm_by_std: bool = True) -> list[float]:
    """GRPO advantages over groups of any size (reflections and second attempts of one task form a group).

    ``(R - mean_group) / (std_group + 1e-6)``; a group of one gets advantage 0 (nothing to compare against).
    """
    if not returns:
        return []
    adv = group_normalize(torch.tensor(returns), groups, norm_by_std=norm_by_std, singleton_mean_zero=False)
    return adv.tolist()


def consolidation_loss(
    per_token_logps: torch.Tensor,
    completion_mask: torch.Tensor,
    keep: torch.Tensor,
    *,
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """L_distill = -E[keep * log pi(y2 | x)], token mean; ``keep`` is ``(B,)``: each row's weight w(r2) (0: not distilled).

    ``per_token_logps`` must come from the reflection-free context x (the distillation rows' prompts).
    """
    weight = keep.to(per_token_logps.dtype)[:, None] * completion_mask.to(per_token_logps.dtype)  # (B, T)
    mask = weight > 0  # masked_sum reads its mask as 0/1: the weights multiply the log-probs instead
    n = mask.sum().clamp(min=1).to(per_token_logps.dtype) if normalizer is None else normalizer
    return -masked_sum(per_token_logps * weight, mask) / n


def erl_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float):
    """PPO-clip on RL rows + consolidation NLL on distillation rows + beta * KL - entropy, token means."""
    a: Args = trainer.args
    if a.loss_agg_mode not in ("token-mean", "seq-mean-token-sum"):
        raise ValueError(f"loss_agg_mode must be token-mean or seq-mean-token-sum, got {a.loss_agg_mode!r}")
    norm = n_rows if a.loss_agg_mode == "seq-mean-token-sum" else n_tokens  # sum over tokens / rows, or token mean
    out = trainer.forward(mb, want_entropy=a.entropy_coef > 0)
    per_token_logps = out["per_token_logps"]  # (B, T)
    mask = mb["completion_mask"]
    rl_mask = mask * mb["rl_weight"][:, None]  # (B, T) first / reflection / second rows
    pg_loss, stats = clipped_policy_loss(a, per_token_logps, mb, rl_mask, norm)
    distill = consolidation_loss(per_token_logps, mask, mb["distill_weight"], normalizer=norm)
    loss = pg_loss + a.consolidation_coef * distill
    result = {
        "losses/policy_loss": pg_loss.detach(),
        "losses/consolidation_loss": distill.detach(),
        "losses/approx_kl": stats["approx_kl"],
        "losses/clipfrac": stats["clipfrac"],
    }
    loss = add_kl_entropy(a, loss, result, out, mb, mask, norm)
    # report per-micro-batch means (per token, or per row under seq-mean-token-sum)
    scale = norm / max(float(mask.sum() if norm is n_tokens else mask.shape[0]), 1.0)
    keys = ("losses/policy_loss", "losses/consolidation_loss", "losses/kl_ref", "losses/entropy")
    return loss, scale_stats(result, scale, keys)


def consolidation_weight(second_return: float, mode: str) -> float:
    """w(r2) of the distillation term: ``indicator`` 1(r2 > 0) (paper), ``raft`` max(r2, 0) (authors' code)."""
    if mode == "indicator":
        return 1.0 if second_return > 0 else 0.0
    if mode == "raft":
        return max(float(second_return), 0.0)
    raise ValueError(f"consolidation_weight must be 'indicator' or 'raft', got {mode!r}")


# -- the experience -> reflection -> second attempt step ------------------------------------------------------
@dataclass
class Experience:
    """One iteration's attempts.

    Attributes:
        first: the first attempts (``first.episodes[e]``; group ``e // G`` is the task).
        failed: first-attempt episode indices that were below the success threshold.
        reflections: ``failed[i] -> D`` (None when the reply was empty; the second attempt then has no context).
        reflection_rows: ``failed[i] -> (prompt_ids, response_ids)`` of the reflector call (absent with no_reflection).
        second: the second attempts; episode ``i`` re-plays the task of ``failed[i]``.
        memory_in / memory_out: the memory before and after this iteration.
    """

    first: RolloutBatch
    failed: list[int]
    reflections: dict[int, str | None]
    reflection_rows: dict[int, tuple[list[int], list[int]]]
    reflection_raw: dict[int, str]
    second: RolloutBatch | None
    memory_in: str | None
    memory_out: str | None
    memory_updates: int = 0


def reflection_tagged(text: str, form: str) -> bool:
    """Whether a reflector reply holds a closed ``<reflection>`` (``in_context``) or ``<prompt>`` (``rulebook``) block."""
    tag = "reflection" if form == "in_context" else "prompt"
    start = text.find(f"<{tag}>")
    return start >= 0 and text.find(f"</{tag}>", start) >= 0


def other_attempts_success(successes: list, e: int, group_size: int) -> float:
    """Success rate of the other first attempts of episode ``e``'s task (its group of ``group_size``, without
    ``e``): an unbiased estimate of how often a fresh first attempt at the task succeeds. Counting the failed
    attempt ``e`` itself would pull the estimate down by ``(G - 1) / G`` and flatter the second attempts."""
    g = e // group_size * group_size
    others = [float(successes[j]) for j in range(g, g + group_size) if j != e]
    return sum(others) / len(others)


def is_success(episode: Any, threshold: float | None) -> bool:
    return bool(episode.success) if threshold is None else episode.total_return >= threshold


class ErlTrainer(Trainer):
    """The shared :class:`Trainer` with ERL's iteration (rollout -> reflect -> retry -> update)."""

    def __init__(self, args: Args, **kw: Any) -> None:
        if args.reflection_form not in FORMS:
            raise ValueError(f"reflection_form must be one of {FORMS}, got {args.reflection_form!r}")
        consolidation_weight(1.0, args.consolidation_weight)  # an unknown mode fails here, not after a rollout
        if args.reflector not in ("policy", "oracle"):
            raise ValueError(f"reflector must be 'policy' or 'oracle', got {args.reflector!r}")
        self.memory: str | None = None
        self.total_episodes = 0
        super().__init__(args, algo="erl", **kw)
        self.log = ReflectionLog()
        self._writer = self.open_episode_log(args.log_episodes)  # closed by Trainer.fit
        if self._writer is not None:
            self.log.then.append(self._writer)

    def _template(self):
        if self.args.prompt_style == "bare":
            return BareContextTemplate()
        return super()._template()

    # -- state (memory survives --resume) ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["erl"] = {"memory": self.memory, "total_episodes": self.total_episodes}
        return state

    def _resume(self) -> None:
        super()._resume()
        from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint

        path = latest_checkpoint(self.run_dir)
        if path is not None:
            erl = load_checkpoint(path, restore_rng=False).get("erl", {})
            self.memory = erl.get("memory")
            self.total_episodes = int(erl.get("total_episodes", 0))

    # -- rollouts ------------------------------------------------------------------------------------------
    def play(self, tasks: list[EpisodeSpec], *, group_size: int, seed: int, build_kwargs=None) -> RolloutBatch:
        """``Trainer.rollout`` with per-episode prompt kwargs (the reflection) and the reflection log as hook."""
        return self.rollout(
            tasks,
            group_size=group_size,
            temperature=self.args.temperature,
            seed=seed,
            hooks=[self.log],
            build_kwargs=build_kwargs,
        )

    def second_attempt_kwargs(self, context: str | None) -> dict[str, Any]:
        """``template.build`` kwargs that put a reflection in the prompt, in the configured form."""
        if not context:
            return {}
        if self.args.reflection_form == "rulebook" and not self.args.no_reflection:
            base = self.template.system_prompt
            return {"system": f"{context}\n\n{base}" if base else context}
        return {"reflection": context}

    @torch.no_grad()
    def reflect(self, episodes: list[Any], memory: str | None, seed: int) -> list[tuple[list[int], Any]]:
        """One batched generate call: a reflection for each failed episode; returns (prompt ids, completion)."""
        a = self.args
        chats = [
            build_reflection_messages(
                ep,
                memory=None if a.no_memory else memory,
                form=a.reflection_form,
                system_prompt=self.template.system_prompt,
                success_threshold=a.success_threshold,
            )
            for ep in episodes
        ]
        prompts = [encode_chat(self.tokenizer, chat, a.max_prompt_tokens) for chat in chats]
        suppress = self.exclude_ids if (a.restrict_reflection_vocab and self.exclude_ids) else None
        outs = self.generator.generate(
            prompts,
            max_new_tokens=a.reflection_max_new_tokens,
            temperature=a.temperature if a.reflection_temperature is None else a.reflection_temperature,
            top_p=a.top_p,
            suppress_token_ids=suppress,
            seed=seed,
        )
        return list(zip(prompts, outs))

    def experience(self, tasks: list[EpisodeSpec], *, seed: int) -> Experience:
        """Steps 1-2 of ERL: first attempts, reflections on the failures, second attempts, memory update."""
        a = self.args
        first = self.play(tasks, group_size=a.group_size, seed=seed)
        failed = [e for e, ep in enumerate(first.episodes) if not is_success(ep, a.success_threshold)]
        memory_in = self.memory
        reflections: dict[int, str | None] = {}
        rows: dict[int, tuple[list[int], list[int]]] = {}
        raw: dict[int, str] = {}
        if failed and a.no_reflection:
            for e in failed:
                reflections[e] = raw_attempt_context(first.episodes[e], success_threshold=a.success_threshold)
        elif failed and a.reflector == "oracle":
            for e in failed:
                reply = oracle_reflection_reply(
                    first.episodes[e], a.reflection_form
                )  # rulebook: ERL adds the base prompt
                reflections[e] = parse_reflection(reply, a.reflection_form)
                raw[e] = reply
        elif failed:
            for e, (prompt, comp) in zip(
                failed, self.reflect([first.episodes[e] for e in failed], memory_in, seed + 1)
            ):
                reflections[e] = parse_reflection(comp.text, a.reflection_form)
                rows[e] = (prompt, list(comp.ids))
                raw[e] = comp.text
        second = None
        memory_out, updates = memory_in, 0
        if failed:
            specs = [tasks[e // a.group_size] for e in failed]
            contexts = [reflections[e] for e in failed]
            second = self.play(
                specs,
                group_size=1,
                seed=seed + 2,
                build_kwargs=lambda inp, i: self.second_attempt_kwargs(contexts[i]),
            )
            for i, e in enumerate(failed):
                # memory = the last reflection that led to a successful second attempt
                if is_success(second.episodes[i], a.success_threshold) and not (a.no_memory or a.no_reflection):
                    if reflections[e]:
                        memory_out, updates = reflections[e], updates + 1
        self.memory = memory_out
        self._log(first, failed, reflections, raw, second, memory_in)
        return Experience(first, failed, reflections, rows, raw, second, memory_in, memory_out, updates)

    def _log(self, first, failed, reflections, raw, second, memory_in) -> None:
        a = self.args
        index = {e: i for i, e in enumerate(failed)}
        last_update = None
        if second is not None:
            for i, e in enumerate(failed):
                if is_success(second.episodes[i], a.success_threshold) and reflections[e]:
                    last_update = e
        for e, ep in enumerate(first.episodes):
            entry: dict[str, Any] = {"attempt": 1, "failed": e in index}
            if e in index:
                ep2 = second.episodes[index[e]]
                entry.update(
                    reflection_record(
                        reflection=reflections[e],
                        raw=raw.get(e, ""),
                        form="raw_attempt" if a.no_reflection else a.reflection_form,
                        memory=None if a.no_memory else memory_in,
                        first_return=ep.total_return,
                        second_return=ep2.total_return,
                        second_success=is_success(ep2, a.success_threshold),
                        memory_updated=(e == last_update) and not (a.no_memory or a.no_reflection),
                    )
                )
                entry["feedback"] = episode_feedback(ep, a.success_threshold)
            self.log.record(ep, entry)
        if second is not None:
            for i, e in enumerate(failed):
                self.log.record(
                    second.episodes[i],
                    {"attempt": 2, "first_episode": e, "reflection": reflections[e], "group": e // a.group_size},
                )
        self.log.flush()

    # -- training rows -------------------------------------------------------------------------------------
    def erl_batch(self, exp: Experience) -> tuple[TurnBatch | None, dict[str, float]]:
        """Rows of all four parts with their advantages (GRPO within each task group) and loss weights."""
        a = self.args
        G = a.group_size
        prompts: list[list[int]] = []
        responses: list[list[int]] = []
        meta: list[dict[str, Any]] = []
        adv: list[float] = []
        rl_w: list[float] = []
        distill_w: list[float] = []

        def shaped_returns(rb: RolloutBatch) -> tuple[list[float], list[float]]:
            rewards = turn_rewards(
                rb.turns, a.env_id, invalid_penalty=a.invalid_penalty, reward=a.reward, success_reward=a.success_reward
            )
            rets = [0.0] * len(rb.episodes)
            for t, r in zip(rb.turns, rewards):
                rets[t.episode] += r
            return rewards, rets

        def add_turns(rb, rewards, ep_adv, part, group_of, weight, rebuild=False, keep=None):
            if weight == 0.0 and not rebuild:
                return  # a part switched off adds no rows (they would only dilute the mean of the others)
            for t, r in zip(rb.turns, rewards):
                if keep is not None and not keep[t.episode]:
                    continue
                prompt = t.prompt_ids
                if rebuild:  # the original prompt x, without the reflection (consolidation)
                    _, prompt, _ = fit_prompt(
                        self.template, self.tokenizer, t.inp, a.history_length, a.max_prompt_tokens, {}
                    )
                prompts.append(prompt)
                responses.append(t.response_ids)
                meta.append(turn_meta(t, r, part=part, group=group_of(t.episode)))
                adv.append(0.0 if rebuild else ep_adv[t.episode])
                rl_w.append(0.0 if rebuild else weight)
                distill_w.append(float(keep[t.episode]) if rebuild else 0.0)

        first_rewards, first_rets = shaped_returns(exp.first)
        first_adv = grouped_advantages(
            first_rets, [e // G for e in range(len(first_rets))], norm_by_std=a.norm_adv_by_std
        )
        add_turns(exp.first, first_rewards, first_adv, "first", lambda e: e // G, float(a.train_first_attempt))
        stats = {"erl/first_return": float(np.mean(first_rets)) if first_rets else 0.0}
        if exp.second is not None:
            second_rewards, second_rets = shaped_returns(exp.second)
            groups = [e // G for e in exp.failed]
            second_adv = grouped_advantages(second_rets, groups, norm_by_std=a.norm_adv_by_std)
            add_turns(
                exp.second, second_rewards, second_adv, "second", lambda i: groups[i], float(a.train_second_attempt)
            )
            if exp.reflection_rows and a.train_reflection:
                refl_idx = [i for i, e in enumerate(exp.failed) if e in exp.reflection_rows]
                refl_adv = grouped_advantages(
                    [second_rets[i] for i in refl_idx], [groups[i] for i in refl_idx], norm_by_std=a.norm_adv_by_std
                )
                for i, r_adv in zip(refl_idx, refl_adv):
                    e = exp.failed[i]
                    p, r = exp.reflection_rows[e]
                    prompts.append(p)
                    responses.append(r)
                    meta.append(
                        {
                            "part": "reflection",
                            "group": groups[i],
                            "episode": e,
                            "t": 0,
                            "reward": second_rets[i],
                            "valid": True,
                            "done": True,
                        }
                    )
                    adv.append(r_adv)
                    rl_w.append(float(a.train_reflection))
                    distill_w.append(0.0)
            if not a.no_consolidation:
                keep = [consolidation_weight(ep.total_return, a.consolidation_weight) for ep in exp.second.episodes]
                add_turns(
                    exp.second,
                    second_rewards,
                    second_adv,
                    "consolidation",
                    lambda i: groups[i],
                    0.0,
                    rebuild=True,
                    keep=keep,
                )
            stats["erl/second_return"] = float(np.mean(second_rets))
        for part in PARTS:
            stats[f"erl/rows_{part}"] = float(sum(1 for m in meta if m["part"] == part))
        if not prompts:
            return None, stats  # every part switched off or empty this iteration: nothing to train on
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        batch = build_batch(prompts, responses, pad_id=int(pad), meta=meta)
        batch["advantages"] = broadcast_turn_values(adv, batch["completion_mask"])  # (B, T)
        batch["rl_weight"] = torch.tensor(rl_w, dtype=torch.float32)  # (B,)
        batch["distill_weight"] = torch.tensor(distill_w, dtype=torch.float32)  # (B,)
        return batch, stats

    # -- the Trainer hooks ERL changes ---------------------------------------------------------------------
    def collect(self, tasks: list[EpisodeSpec], *, seed: int) -> Experience:
        return self.experience(tasks, seed=seed)

    def training_batch(self, collected: Experience) -> tuple[TurnBatch | None, dict[str, float]]:
        return self.erl_batch(collected)  # advantages included (GRPO within each part's groups)

    def iteration_metrics(self, collected: Experience, batch: TurnBatch | None, elapsed: float) -> dict[str, float]:
        exp, a = collected, self.args
        G = a.group_size
        gen_s = exp.first.stats.get("generation_s", 0.0) + (
            exp.second.stats.get("generation_s", 0.0) if exp.second else 0.0
        )
        n_second = len(exp.second.episodes) if exp.second is not None else 0
        local = {
            "success": exp.first.episode_success(),
            "returns": [ep.total_return for ep in exp.first.episodes],
            "second": [is_success(ep, a.success_threshold) for ep in exp.second.episodes] if exp.second else [],
            # first-attempt success of the task each second attempt re-plays (the other G - 1 first attempts of
            # its group): the paired comparison of the paper's core effect (second attempts beat first attempts)
            "first_same": [
                other_attempts_success([is_success(ep, a.success_threshold) for ep in exp.first.episodes], e, G)
                for e in exp.failed
            ]
            if exp.second and G > 1
            else [],
            "invalid": [not (t.format_valid and t.is_action_valid) for t in exp.first.turns],
            "resp": [len(t.response_ids) for t in exp.first.turns],
            "episodes": [len(exp.first.episodes) + n_second],
            "updates": [exp.memory_updates],
            # reflector replies that closed their <reflection>/<prompt> block (parse_reflection also keeps
            # untagged text, so this is the stricter "followed the reflection format" rate)
            "tagged": [reflection_tagged(text, a.reflection_form) for text in exp.reflection_raw.values()],
        }
        parts = all_gather_objects(local, self.dist)
        cat = {k: [x for p in parts for x in p[k]] for k in local}
        self.total_episodes += int(sum(cat["episodes"]))

        def mean(xs):
            return float(np.mean(xs)) if xs else 0.0

        metrics = {
            # the deployment metric: first attempts, no reflection in context
            "charts/episodic_return": mean(cat["returns"]),
            "charts/success_rate": mean(cat["success"]),
            "charts/SPS": (len(batch) if batch is not None else 0) / max(elapsed, 1e-9),
            "charts/env_episodes": float(self.total_episodes),
            "rollout/invalid_action_rate": mean(cat["invalid"]),
            "rollout/response_length": mean(cat["resp"]),
            "erl/num_reflections": float(len(cat["second"])),
            "erl/memory_updates": float(sum(cat["updates"])),
            "erl/has_memory": float(self.memory is not None),
            "time/generation_s": float(gen_s),
        }  # validation (end_iteration) = first attempts, no reflection: what deployment sees
        if cat["second"]:  # an iteration without a failed first attempt has no rate to give (not a rate of 0)
            metrics["erl/second_success_rate"] = mean(cat["second"])
            metrics["erl/first_success_same_tasks"] = mean(cat["first_same"])
            metrics["erl/second_minus_first_same_tasks"] = mean(cat["second"]) - mean(cat["first_same"])
        if cat["tagged"]:
            metrics["erl/reflection_tagged_rate"] = mean(cat["tagged"])
        return metrics

    def fit(self, advantage_fn=None, loss_fn=None) -> dict[str, float]:
        return super().fit(advantage_fn, loss_fn or erl_loss)  # advantage_fn None: erl_batch sets them


def train(args: Args) -> dict[str, float]:
    """Train with ERL; returns the last iteration's metrics."""
    return ErlTrainer(args).fit()


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
