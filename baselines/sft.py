"""SFT / behaviour cloning on episode logs: the stage before RL (AgentGym's BC, SEED's SFT, TRL's ``SFTTrainer``).

The data are our JSONL episode logs; by default the env expert's own trajectories (BFS solver, value
iteration, walkthroughs), played here with :class:`~agentgym.agents.ExpertAgent` into
``runs/<exp>/expert.jsonl`` (``agentgym data expert-trajectories`` writes the same file). Every step of
every kept episode becomes one training row, rendered exactly as an RL rollout renders it: the same
prompt template (``prompt_style``), history window (``history_length``) and prompt cap
(``max_prompt_tokens``) build the prompt from the logged observations and actions, so a model SFT'd here
sees at RL time the very prompts it was trained on. The target is the assistant turn the template asks
for, ``<think>…</think> <action>…</action>``: the logged model output when the log has one (filtered
behaviour cloning / rejection sampling of a model's own successes), else ``expert_think`` plus the
expert's action. The loss is the token-mean negative log-likelihood of the target tokens only (the
``completion_mask`` of :func:`agentgym.rl.batch.build_batch`; prompt tokens never train).

One iteration is one epoch over the rows, in shuffled mini-batches (``mini_batch_size``) through the
shared :meth:`Trainer.update` (gradient accumulation, clipping, AdamW). Validation (``val_every``)
plays ``val_tasks`` episodes with the model and logs success and invalid-action rates. At the end the
run folder holds the usual checkpoint (``--init-from runs/<exp>/`` starts an RL baseline from it), the
weights as a plain HF folder ``runs/<exp>/model`` (``agentgym eval --agent hf:runs/<exp>/model``),
``metrics.jsonl`` and ``learning_curve.png``.

Run: ``python baselines/sft.py --config baselines/configs/cpu/sft_smollm2_frozenlake.yaml``
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # `python baselines/sft.py`: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentgym.agent_io import AgentInput, seed_specs
from agentgym.episodes import Episode, read_episodes
from agentgym.rl.batch import TurnBatch, build_batch
from agentgym.rl.config import Args as BaseArgs
from agentgym.rl.config import parse_args
from agentgym.rl.logprobs import forward_completion
from agentgym.rl.losses import LossStats, sft_loss
from agentgym.rl.rollout import fit_prompt
from agentgym.rl.runinfo import RunInfo
from agentgym.rl.trainer import Trainer
from agentgym.rl.update import StepCheckpoints


@dataclass
class Args(BaseArgs):
    """SFT settings (the shared ones are in ``agentgym.rl.config.Args``; RL-only fields are unused)."""

    env_id: str = "agentgym/FrozenLakeNotSlippery-v0"
    """env whose episodes are trained on (and validated on)"""
    data: list[str] = field(default_factory=list)
    """episode logs (JSONL) to train on; empty: play ``expert_episodes`` expert episodes into the run folder"""
    expert_episodes: int = 64
    """expert episodes to play when ``data`` is empty"""
    expert_seed: int = 0
    """first reset seed of the expert episodes (the eval suites use 100000-100099: keep clear of them)"""
    successful_only: bool = True
    """train only on episodes that solved their task"""
    expert_think: str = "I take the move that brings me closest to solving the task."
    """the reasoning text of targets built from steps without a model output (scripted experts); grid boards
    fill ``{P}``/``{G}``/... (a symbol's row and column) and ``{to_G}`` (where G lies from P), see expert_rationale"""
    target_eos: bool = True
    """end every target with the tokenizer's EOS, so the model stops after its answer"""
    total_iterations: int = 3
    """epochs over the SFT rows"""
    learning_rate: float = 1e-4
    """AdamW learning rate"""
    mini_batch_size: int = 16
    """rows per optimizer step"""
    micro_batch_size: int = 8
    """rows per forward/backward"""
    beta: float = 0.0
    """unused by SFT (no reference model)"""
    entropy_coef: float = 0.0
    """unused by SFT"""
    save_every: int = 0
    """checkpoint every N epochs (0: only at the end)"""
    save_every_steps: int = 0
    """also checkpoint every N optimizer steps inside an epoch (0: never): ``--resume`` continues at that step with
    the weights an unstopped run has there (an epoch of the CPU lesson/reflection recipes takes ~45 min)"""
    export_model: bool = True
    """also write the final weights as a plain HF folder ``runs/<exp>/model``"""
    lesson_rows: int = 0
    """trajectory -> lesson rows (SEED's SFT stage: the analyser chat, the lesson JSON as target) added to the
    action rows; targets from the privileged grid analyser (``agentgym.agents.oracle``) on ``analysis_episodes``"""
    reflection_rows: int = 0
    """failed attempt -> reflection rows (ERL's reflector chat, the tagged reflection as target), same source"""
    analysis_episodes: int = 0
    """noisy-expert episodes the lesson/reflection rows are drawn from (reset seeds right after the expert
    episodes'); 0: four times the larger of ``lesson_rows`` and ``reflection_rows``"""
    perturb_prob: float = 0.3
    """probability of a random move at each step of those episodes (the expert's moves otherwise)"""
    context_rows: int = 0
    """expert action rows whose prompt carries the oracle reflection (ERL's second-attempt prompt) or lesson
    (SEED's teacher prompt) of a failed noisy attempt at the same task, alternately: the model learns to act on
    the text it will be given (the paper's ``sft_on_trajectories`` idea, action-under-lesson rows)"""
    context_episodes: list[str] = field(default_factory=list)
    """episode logs (JSONL, e.g. a model's own evaluation on training seeds) whose failed episodes are the context
    rows' first sources, before the noisy-expert ones: rows where that model's own moves went wrong"""
    context_plans: str = "expert"
    """what the context rows play: ``expert`` -- the env expert's episode, every step (its moves are the action rows'
    own, so the text is rarely needed to predict them); ``varied`` (non-slippery FrozenLake, Sokoban) -- a shortest path drawn
    at random through the failure's mistake, with the reflection's plan and the lesson's better move written for
    that path (``agentgym.agents.oracle.varied_critique``), and rows only where the text decides the move: the
    mistake's cell (both texts name its move) and, for reflections (whose plan names every cell's move), each cell
    with several shortest moves -- there the target is the text's, not the expert's"""
    lesson_off_cell_rows: int = 0
    """``context_plans: varied`` only: besides ``context_rows``, up to this many rows with a lesson in the prompt at
    the drawn plan's *other* cells, where the lesson does not apply and the target is the plan's move there. Without
    them every lesson row sits at the cell the lesson names, and a model may learn to play the lesson's move
    wherever it stands (the plan-reading recipe's lessons lowered held-out success, ``docs/results/cpu-table.md``)"""
    reflection_form: str = "in_context"
    """reflection form of the reflection rows (``in_context`` or ``rulebook``, as ERL's ``reflection_form``)"""
    val_analysis: int = 0
    """validation also asks the model for lessons and reflections on this many held-out noisy-expert episodes
    and logs their parse rates and agreement with the privileged analyser (``val/lesson_*``, ``val/reflection_*``)"""
    analysis_max_new_tokens: int = 192
    """length cap of those validation lessons and reflections"""


# -- data: episode logs -> (prompt ids, target ids) rows ----------------------------------------------------
def expert_trajectories(env_id: str, n: int, *, seed: int = 0, log: str | Path, env_kwargs=None) -> list[Episode]:
    """Play ``n`` episodes (seeds ``seed..seed+n-1``) with the env's expert into the JSONL ``log`` (resumable)."""
    from agentgym.agents import ExpertAgent
    from agentgym.evaluation import run_episodes

    return run_episodes(env_id, ExpertAgent(), seed_specs(n, seed=seed), env_kwargs=env_kwargs, log_path=log).episodes


def episode_inputs(ep: Episode) -> Iterator[tuple[AgentInput, int]]:
    """The :class:`AgentInput` of every step of a logged episode (what the agent saw), with the step index.

    Rebuilt as the rollout engine builds it: the observation and info the step acted on, the reset
    observation, and the (observation, action) pairs before it.
    """
    obs, info = ep.reset_observation, ep.reset_info
    history: list[tuple[str, str]] = []
    for t, step in enumerate(ep.steps):
        task_id = info.get("task_id")
        yield (
            AgentInput(
                env_id=ep.env_id,
                observation=obs,
                info=info,
                first_observation=ep.reset_observation,
                history=list(history),
                task_id=None if task_id is None else str(task_id),
            ),
            t,
        )
        history.append((obs, step.action))
        obs, info = step.observation, step.info


class _BoardFacts(dict):
    """``str.format_map`` fields of a grid board, from its first occurrence of each symbol (1-based):

    * ``{P}`` -> ``row 2 col 3``; ``{P|S}`` -> the first of P or S (Sokoban's player on a target is ``S``);
    * ``{A_to_B}`` -> where B lies from A (``up left``, ``down``, ``here``); ``{to_B}`` is ``{P_to_B}``;
    * ``{action}``; a symbol not on the board -> ``?``.
    """

    def __init__(self, observation: str, action: str):
        super().__init__(action=action)
        self.rows = [r for r in (observation or "").strip().splitlines()]

    def _find(self, syms: str) -> tuple[int, int] | None:
        for r, row in enumerate(self.rows):
            cols = [c for c in (row.find(s) for s in syms.split("|")) if c >= 0]
            if cols:
                return r, min(cols)
        return None

    def __missing__(self, key: str) -> str:
        if "to_" in key:
            src, _, dst = key.rpartition("to_")
            a, b = self._find(src.removesuffix("_") or "P"), self._find(dst)
            if a is None or b is None:
                return "?"
            (r0, c0), (r1, c1) = a, b
            words = (["up"] if r1 < r0 else ["down"] if r1 > r0 else []) + (
                ["left"] if c1 < c0 else ["right"] if c1 > c0 else []
            )
            return " ".join(words) or "here"
        pos = self._find(key) if all(len(s) == 1 for s in key.split("|")) else None
        return "?" if pos is None else f"row {pos[0] + 1} col {pos[1] + 1}"


def expert_rationale(think: str, observation: str, action: str) -> str:
    """``think`` with its board fields filled from the observation the expert acted on (see :class:`_BoardFacts`).

    ``"P at {P}, G at {G}: G is {to_G}."`` on ``__G_/_P__`` gives ``"P at row 2 col 2, G at row 1 col 3: G is up right."``:
    the expert's reasoning in words (where it stands, where the goal is), cloned with its move.
    """
    return think.format_map(_BoardFacts(observation, action)) if "{" in think else think


def step_target(ep: Episode, t: int, think: str, template=None) -> str | None:
    """The assistant text to train on for step ``t``; None when the step must not be cloned.

    A logged model output is used when it parsed (``extras["format_valid"]`` is not False); a step without
    output (a scripted expert) gets ``template.format_answer`` of the rationale (``think`` with its board
    fields filled, :func:`expert_rationale`) and the expert's action (``<think>…</think> <action>…</action>``
    without a template). Steps the env rejected are skipped.
    """
    step = ep.steps[t]
    if not step.info.get("is_action_valid", True) or not step.action:
        return None
    if step.output is not None:
        return step.output if step.extras.get("format_valid", True) else None
    obs = ep.reset_observation if t == 0 else ep.steps[t - 1].observation
    rationale = expert_rationale(think, obs, step.action)
    if template is None:
        return f"<think>{rationale}</think> <action>{step.action}</action>"
    return template.format_answer(rationale, step.action)


def sft_rows(
    episodes: list[Episode], template, tokenizer, args: Args
) -> tuple[list[list[int]], list[list[int]], dict[str, float]]:
    """Prompt and target token ids of every clonable step (see the module docstring), and counts."""
    prompts, targets = [], []
    kept = 0
    eos = getattr(tokenizer, "eos_token_id", None) if args.target_eos else None
    for ep in episodes:
        if ep.env_id != args.env_id:
            raise ValueError(f"an episode of {ep.env_id} in the SFT data of {args.env_id}: one env per run")
        if args.successful_only and not ep.success:
            continue
        kept += 1
        for inp, t in episode_inputs(ep):
            text = step_target(ep, t, args.expert_think, template)
            if text is None:
                continue
            _, ids, _ = fit_prompt(template, tokenizer, inp, args.history_length, args.max_prompt_tokens, {})
            prompts.append(ids)
            # the turn ends with EOS (ChatML's <|im_end|>): the model learns to stop after its answer, which
            # ends generation there instead of at max_new_tokens (templates without a stop string)
            target = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            if eos is not None and (not target or target[-1] != eos):
                target.append(int(eos))
            targets.append(target)
    stats = {"sft/episodes": float(len(episodes)), "sft/episodes_kept": float(kept), "sft/rows": float(len(prompts))}
    return prompts, targets, stats


# -- lesson and reflection rows (privileged targets) -----------------------------------------------------------
def noisy_expert_episodes(
    env_id: str, n: int, *, seed: int, noise: float, agent_seed: int, log: str | Path | None, env_kwargs=None
) -> list[Episode]:
    """Play ``n`` noisy-expert episodes (reset seeds ``seed..seed+n-1``) into ``log`` (resumable)."""
    from agentgym.agents import NoisyExpertAgent
    from agentgym.evaluation import run_episodes

    agent = NoisyExpertAgent(noise, seed=agent_seed)
    return run_episodes(env_id, agent, seed_specs(n, seed=seed), env_kwargs=env_kwargs, log_path=log).episodes


def held_out_analysis_episodes(
    env_id: str, n: int, *, noise: float, agent_seed: int, seed: int = 20_000_000, env_kwargs=None
) -> list[Episode]:
    """``n`` noisy-expert episodes on held-out seeds, failures and successes alternating (so reflections, which
    only failures get, are checked too): drawn from up to ``8 * n`` episodes."""
    eps = noisy_expert_episodes(
        env_id, 8 * n, seed=seed, noise=noise, agent_seed=agent_seed, log=None, env_kwargs=env_kwargs
    )
    return _interleave([e for e in eps if not e.success], [e for e in eps if e.success])[:n]


def _interleave(first: list[Episode], second: list[Episode]) -> list[Episode]:
    out = []
    for i in range(max(len(first), len(second))):
        out += [x[i] for x in (first, second) if i < len(x)]
    return out


def context_examples(
    failures: list[Episode], args: Args, system: str | None
) -> Iterator[tuple[str, AgentInput, dict[str, str], Episode, int]]:
    """The sources of the text-in-context rows, in row order: for each failed episode, the env expert's episode
    from the same reset (``context_plans: varied``: the drawn plan's episode) with that failure's text in every
    prompt -- a reflection (ERL's second attempt; failures 0, 2, ...: the in_context form's ``reflection`` or, for
    the rulebook form, the system prompt ERL builds) or a lesson's ``episode_skill`` (SEED's teacher; failures 1,
    3, ...). Yields ``(kind, input, template kwargs, played episode, step)``; the caller skips steps
    ``step_target`` rejects and stops at ``context_rows``. With ``lesson_off_cell_rows`` a lesson's other cells of
    the plan follow as kind ``lesson_off_cell`` (counted apart)."""
    if not args.context_rows or not failures:
        return
    import numpy as np

    from agentgym.agent_io import EpisodeSpec
    from agentgym.agents import ExpertAgent, ScriptedAgent
    from agentgym.agents.oracle import critique, oracle_lesson, oracle_reflection, varied_critique
    from agentgym.evaluation import run_episodes

    if args.context_plans not in ("expert", "varied"):
        raise ValueError(f"context_plans must be 'expert' or 'varied', got {args.context_plans!r}")
    varied = args.context_plans == "varied"
    if args.lesson_off_cell_rows and not varied:
        raise ValueError("lesson_off_cell_rows needs context_plans: varied (the plan whose other cells they sit at)")
    env_kwargs = args.env_kwargs or None
    specs = [EpisodeSpec(seed=ep.seed, options=ep.options) for ep in failures]
    experts = [] if varied else run_episodes(args.env_id, ExpertAgent(), specs, env_kwargs=env_kwargs).episodes
    rng = np.random.default_rng(args.seed)
    for i, (ep, spec) in enumerate(zip(failures, specs, strict=True)):
        crit = varied_critique(ep, rng) if varied else critique(ep)
        if varied:
            if not crit.plan_choices:
                continue  # no drawn plan through a mistake (slippery ice, a spent budget): nothing to read
            played = run_episodes(args.env_id, ScriptedAgent(crit.plan), [spec], env_kwargs=env_kwargs).episodes[0]
        else:
            played = experts[i]
        if i % 2 == 0 and args.reflection_form == "in_context":
            kind, context = "reflection", {"reflection": oracle_reflection(ep, args.reflection_form, crit=crit)}
        elif i % 2 == 0:  # as ErlTrainer.second_attempt_kwargs builds a rulebook's system prompt
            rules = oracle_reflection(ep, args.reflection_form, crit=crit)
            kind, context = "reflection", {"system": f"{rules}\n\n{system}" if system else rules}
        else:
            kind, context = "lesson", {"lesson": oracle_lesson(ep, crit)["episode_skill"]}
        for inp, t in episode_inputs(played):
            # varied: only the steps whose move the text decides -- the mistake's cell (the move both texts name)
            # and, for a reflection (whose plan names every cell's move), each cell with several shortest moves
            if varied and t != crit.mistake_step - 1 and (kind == "lesson" or crit.plan_choices[t] < 2):
                if kind == "lesson" and args.lesson_off_cell_rows:
                    yield "lesson_off_cell", inp, context, played, t  # the lesson is beside the point here
                continue
            yield kind, inp, context, played, t


def counted_context_examples(
    failures: list[Episode], args: Args, template, system: str | None
) -> Iterator[tuple[str, AgentInput, dict[str, str], Episode, int, str]]:
    """The rows :func:`context_examples` makes into SFT rows: steps ``step_target`` rejects skipped, at most
    ``context_rows`` counted rows and ``lesson_off_cell_rows`` off-cell lesson rows. Yields ``(kind, input, template
    kwargs, played episode, step, target text)``."""
    n_context = n_off = 0
    for kind, inp, context, played, t in context_examples(failures, args, system):
        if n_context >= args.context_rows:
            break
        if kind == "lesson_off_cell" and n_off >= args.lesson_off_cell_rows:
            continue
        text = step_target(played, t, args.expert_think, template)
        if text is None:
            continue
        if kind == "lesson_off_cell":
            n_off += 1
        else:
            n_context += 1
        yield kind, inp, context, played, t, text


def context_failures(args: Args, episodes: list[Episode]) -> list[Episode]:
    """The context rows' sources: the failures of ``args.context_episodes`` (on ``args.env_id``), then those of
    ``episodes`` (the noisy-expert analysis episodes)."""
    own: list[Episode] = []
    for path in args.context_episodes:
        if not Path(path).exists():
            raise FileNotFoundError(
                f"no episode log at {path} (context_episodes): write it with `agentgym eval ... --log {path}`"
            )
        own += [ep for ep in read_episodes(path) if ep.env_id == args.env_id]
    return [ep for ep in own + list(episodes) if not ep.success]


def analysis_rows(
    episodes: list[Episode], template, tokenizer, args: Args
) -> tuple[list[list[int]], list[list[int]], dict[str, float]]:
    """The lesson rows (failures and successes alternating) and reflection rows (failures), tokenised.

    The prompts are built by the very functions SEED's lesson writer and ERL's reflector use
    (``build_lesson_messages``, ``build_reflection_messages`` with the template's system prompt); half the
    reflection rows show another task's reflection as the memory, as ERL does once a reflection has worked.
    """
    from agentgym.agents.oracle import critique, oracle_lesson_reply, oracle_reflection, oracle_reflection_reply
    from agentgym.prompts.lesson import build_lesson_messages
    from agentgym.prompts.reflection import build_reflection_messages
    from agentgym.rl.hooks import encode_chat

    failures = [ep for ep in episodes if not ep.success]
    successes = [ep for ep in episodes if ep.success]
    eos = tokenizer.eos_token or "" if args.target_eos else ""
    prompts, targets = [], []

    def add(chat: list[dict[str, str]], reply: str) -> None:
        prompts.append(encode_chat(tokenizer, chat, args.max_prompt_tokens))
        targets.append(list(tokenizer(reply + eos, add_special_tokens=False)["input_ids"]))

    lesson_eps = _interleave(failures, successes)[: args.lesson_rows]
    for ep in lesson_eps:
        add(build_lesson_messages(ep), oracle_lesson_reply(ep))
    system = template.system_prompt
    refl_eps = failures[: args.reflection_rows]
    crits = [critique(ep) for ep in refl_eps]
    for i, (ep, c) in enumerate(zip(refl_eps, crits)):
        memory = oracle_reflection(refl_eps[i - 1], args.reflection_form, crit=crits[i - 1])
        memory = memory if i % 2 and len(refl_eps) > 1 else None
        chat = build_reflection_messages(ep, memory=memory, form=args.reflection_form, system_prompt=system)
        add(chat, oracle_reflection_reply(ep, args.reflection_form, crit=c))  # ERL appends the base prompt itself
    kinds = []
    for kind, inp, context, _, _, text in counted_context_examples(
        context_failures(args, episodes), args, template, system
    ):
        _, ids, _ = fit_prompt(template, tokenizer, inp, args.history_length, args.max_prompt_tokens, context)
        prompts.append(ids)
        targets.append(list(tokenizer(text + eos, add_special_tokens=False)["input_ids"]))
        kinds.append(kind)
    n_off = kinds.count("lesson_off_cell")
    n_context = len(kinds) - n_off
    stats = {
        "sft/analysis_episodes": float(len(episodes)),
        "sft/analysis_failures": float(len(failures)),
        "sft/lesson_rows": float(len(lesson_eps)),
        "sft/reflection_rows": float(len(refl_eps)),
        "sft/context_rows": float(n_context),
        "sft/lesson_off_cell_rows": float(n_off),
    }
    return prompts, targets, stats


@torch.no_grad()
def analysis_metrics(
    generator,
    tokenizer,
    episodes: list[Episode],
    *,
    system_prompt: str | None,
    form: str = "in_context",
    max_new_tokens: int = 192,
    max_prompt_tokens: int = 2048,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[str, float]:
    """The model's own lessons (all episodes) and reflections (failed ones), scored against the privileged analyser.

    ``lesson_parse_rate``: replies ``parse_lesson`` accepts; ``lesson_oracle_match``: parsed lessons whose
    ``episode_skill`` equals the oracle's (the same mistake, place and better move); ``lesson_unparsed_cut`` /
    ``lesson_unparsed_solved``: replies it refuses that ran into ``max_new_tokens`` / that are about a solved episode
    (each over all episodes: where the unparsed ones come from); ``reflection_tagged_rate``:
    replies with a closed reflection block (ERL's ``erl/reflection_tagged_rate``); ``reflection_plan_match``:
    reflections that hold the oracle's better move sentence and plan (slippery ice: the first move).
    """
    from agentgym.agents.oracle import critique, oracle_lesson, oracle_reflection
    from agentgym.prompts.lesson import LessonParseError, build_lesson_messages, parse_lesson
    from agentgym.prompts.reflection import build_reflection_messages, parse_reflection
    from agentgym.rl.hooks import encode_chat

    out: dict[str, float] = {}
    if not episodes:
        return out
    crits = [critique(ep) for ep in episodes]
    chats = [build_lesson_messages(ep) for ep in episodes]
    replies = generator.generate(
        [encode_chat(tokenizer, c, max_prompt_tokens) for c in chats],
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    parsed = match = cut = solved = 0
    for ep, c, r in zip(episodes, crits, replies):
        try:
            lesson = parse_lesson(r.text)
        except LessonParseError:
            cut += r.finish_reason == "length"
            solved += bool(ep.success)
            continue
        parsed += 1
        match += lesson.fields.get("episode_skill") == oracle_lesson(ep, c)["episode_skill"]
    out["lesson_parse_rate"] = parsed / len(episodes)
    out["lesson_oracle_match"] = match / len(episodes)
    out["lesson_unparsed_cut"] = cut / len(episodes)
    out["lesson_unparsed_solved"] = solved / len(episodes)
    failed = [(ep, c) for ep, c in zip(episodes, crits) if not ep.success]
    if failed:
        tag = "reflection" if form == "in_context" else "prompt"
        chats = [build_reflection_messages(ep, form=form, system_prompt=system_prompt) for ep, _ in failed]
        replies = generator.generate(
            [encode_chat(tokenizer, c, max_prompt_tokens) for c in chats],
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed + 1,
        )
        tagged = plan = 0
        for (ep, c), r in zip(failed, replies):
            start = r.text.find(f"<{tag}>")
            tagged += start >= 0 and r.text.find(f"</{tag}>", start) >= 0
            text = parse_reflection(r.text, form) or ""
            want = oracle_reflection(ep, form, crit=c)
            key = [s for s in want.split(". ") if s.startswith(("There, move", "Plan from", "Best first move"))]
            plan += bool(key) and all(k.rstrip(".") in text for k in key)
        out["reflection_tagged_rate"] = tagged / len(failed)
        out["reflection_plan_match"] = plan / len(failed)
        out["reflection_episodes"] = float(len(failed))
    out["lesson_episodes"] = float(len(episodes))
    return out


def load_data(trainer: Trainer, args: Args) -> list[Episode]:
    """The episodes named by ``args.data``, or freshly played expert episodes."""
    if args.data:
        episodes: list[Episode] = []
        for path in args.data:
            if not Path(path).exists():
                raise FileNotFoundError(
                    f"no episode log at {path}: write one with "
                    f"`agentgym data expert-trajectories {args.env_id} --episodes N --out {path}`"
                )
            episodes += read_episodes(path)
        return episodes
    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    log = trainer.run_dir / "expert.jsonl"
    return expert_trajectories(
        args.env_id, args.expert_episodes, seed=args.expert_seed, log=log, env_kwargs=args.env_kwargs or None
    )


# -- loss -----------------------------------------------------------------------------------------------
def nll_loss(trainer: Trainer, mb: TurnBatch, n_tokens: float, n_rows: float) -> tuple[torch.Tensor, LossStats]:
    """Token-mean NLL of the target tokens (:func:`agentgym.rl.losses.sft_loss`), the trainer's loss function.

    Log-probs at temperature 1 (the trainer's sampling temperature plays no part in a likelihood).
    """
    with trainer.autocast():
        out = forward_completion(
            trainer.model,
            mb["input_ids"],
            mb["attention_mask"],
            mb.completion_length,
            temperature=1.0,
            chunk_size=trainer.args.logprob_chunk_size,
        )
    return sft_loss(out["per_token_logps"], mb["completion_mask"], n_tokens)  # mask: 1 on target tokens only


@torch.no_grad()
def mean_nll(trainer: Trainer, batch: TurnBatch) -> float:
    """Token-mean NLL of ``batch``'s targets under the current model (no update)."""
    total = tokens = 0.0
    was_training = trainer.model.training
    trainer.model.eval()
    mbs = max(1, trainer.args.micro_batch_size)
    for s in range(0, len(batch), mbs):
        mb = batch.select(list(range(s, min(len(batch), s + mbs)))).to(trainer.device)
        n = float(mb["completion_mask"].sum())
        total += float(nll_loss(trainer, mb, max(n, 1.0), 0.0)[0]) * n
        tokens += n
    if was_training:
        trainer.model.train()
    return total / max(tokens, 1.0)


# -- validation -----------------------------------------------------------------------------------------
@torch.no_grad()
def validate(trainer: Trainer) -> dict[str, float]:
    """Play ``val_tasks`` fixed-seed episodes (``Trainer.validate``'s seeds) with the model: success and invalid rates."""
    from agentgym.agent_io import EpisodeSpec

    a = trainer.args
    tasks = [EpisodeSpec(seed=10_000_000 + i) for i in range(a.val_tasks)]
    rb = trainer.rollout(tasks, group_size=1, temperature=a.val_temperature, seed=a.seed + 7)
    out = {"val/success_rate": rb.success_rate(), "val/invalid_action_rate": rb.invalid_action_rate()}
    if a.val_analysis:
        if getattr(trainer, "val_analysis_episodes", None) is None:  # held-out seeds, far from training ones
            trainer.val_analysis_episodes = held_out_analysis_episodes(
                a.env_id, a.val_analysis, noise=a.perturb_prob, agent_seed=a.seed + 11, env_kwargs=a.env_kwargs or None
            )
        trainer.model.eval()
        with trainer.autocast():
            stats = analysis_metrics(
                trainer.generator,
                trainer.tokenizer,
                trainer.val_analysis_episodes,
                system_prompt=trainer.template.system_prompt,
                form=a.reflection_form,
                max_new_tokens=a.analysis_max_new_tokens,
                max_prompt_tokens=a.max_prompt_tokens,
                seed=a.seed + 13,
            )
        trainer.model.train()
        out.update({f"val/{k}": v for k, v in stats.items()})
    return out


def plot_sft_curve(history: list[dict[str, float]], path: Path, *, title: str) -> Path | None:
    """PNG of the SFT loss per epoch and, when validated, the validation success and invalid rates."""
    rows = [r for r in history if "losses/sft_loss" in r]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].plot([r["iteration"] for r in rows], [r["losses/sft_loss"] for r in rows], "o-")
    axes[0].set_ylabel("SFT loss (token-mean NLL)")
    val = [r for r in history if "val/success_rate" in r]
    if val:
        it = [r["iteration"] for r in val]
        axes[1].plot(it, [r["val/success_rate"] for r in val], "o-", label="success")
        axes[1].plot(it, [r["val/invalid_action_rate"] for r in val], "s--", label="invalid actions")
        axes[1].legend()
    axes[1].set_ylabel("validation rate")
    axes[1].set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# -- the loop -------------------------------------------------------------------------------------------
def _taught(cfg: dict) -> bool:
    """The recipe has rows from the privileged analyser (lessons, reflections, text in context)."""
    return any(cfg.get(k) for k in ("lesson_rows", "reflection_rows", "context_rows"))


def _provenance(args: Args) -> dict[str, int]:
    """For the run's ``versions.json``: which version of the privileged text its rows are in (``oracle_text_of``)."""
    if not _taught(vars(args)):
        return {}
    from agentgym.agents.oracle import TEXT_VERSIONS, text_kind

    return {"oracle_text": TEXT_VERSIONS[text_kind(args.env_id)]}


def oracle_text_of(run_dir: str | Path) -> int | None:
    """The version of the privileged analyser's text (``agentgym.agents.oracle.TEXT_VERSIONS``) an SFT run folder's
    rows were written in; None for an action-only recipe. Runs from before the field: version 1."""
    from agentgym.rl.config import load_config_file

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists() or not _taught(load_config_file(run_dir / "config.yaml")):
        return None
    info = run_dir / "versions.json"
    return int(json.loads(info.read_text()).get("oracle_text", 1)) if info.exists() else 1


def _step_checkpoints(trainer: Trainer, args: Args, t0: float) -> StepCheckpoints:
    """The checkpoints inside this epoch (``save_every_steps``), resuming the one a killed run left."""
    done = trainer.partial or {}

    def save(step: int, tally: dict) -> None:
        elapsed = time.perf_counter() - t0 + done.get("elapsed_s", 0.0)
        trainer.save(partial={"step": step, "tally": tally, "elapsed_s": elapsed})

    return StepCheckpoints(args.save_every_steps, save, done.get("step", 0), done.get("tally", {}))


def train(args: Args) -> dict[str, float]:
    """Fine-tune on the episode logs; returns the last epoch's metrics."""
    trainer = Trainer(args, algo="sft")
    here = torch.get_num_threads()
    if trainer.resumed_threads not in (None, here) and str(trainer.device) == "cpu":
        raise SystemExit(
            f"{trainer.run_dir} was checkpointed on {trainer.resumed_threads} CPU threads and this process has {here}: "
            "resumed on another count the SFT goes on with other weights than an uninterrupted run's (a comparison "
            f"that checks its start's SHA-256 would refuse it at the end). Resume with "
            f"OMP_NUM_THREADS={trainer.resumed_threads}"
        )
    episodes = load_data(trainer, args)
    prompts, targets, data_stats = sft_rows(episodes, trainer.template, trainer.tokenizer, args)
    if args.lesson_rows or args.reflection_rows or args.context_rows:
        trainer.run_dir.mkdir(parents=True, exist_ok=True)
        n = args.analysis_episodes or 4 * max(args.lesson_rows, args.reflection_rows, args.context_rows)
        noisy = noisy_expert_episodes(
            args.env_id,
            n,
            seed=args.expert_seed + args.expert_episodes,
            noise=args.perturb_prob,
            agent_seed=args.seed,
            log=trainer.run_dir / "analysis.jsonl",
            env_kwargs=args.env_kwargs or None,
        )
        p, t, extra = analysis_rows(noisy, trainer.template, trainer.tokenizer, args)
        prompts, targets = prompts + p, targets + t
        data_stats.update(extra)
        data_stats["sft/action_rows"], data_stats["sft/rows"] = data_stats["sft/rows"], float(len(prompts))
    if not prompts:
        raise ValueError(
            f"no SFT rows in {len(episodes)} episode(s) of {args.env_id}: "
            + ("none solved its task (pass --no-successful-only to clone them anyway)" if args.successful_only else "")
        )
    pad = trainer.tokenizer.pad_token_id
    batch = build_batch(prompts, targets, pad_id=int(pad if pad is not None else trainer.tokenizer.eos_token_id))
    data_stats["sft/target_tokens"] = float(batch["completion_mask"].sum())
    last: dict[str, float] = {}
    done_here = 0
    # config.yaml, versions.json and train.log as in an RL run folder; one line per epoch on the console too
    info = RunInfo(
        trainer.run_dir, args, device=str(trainer.device), console=True, unit="epoch", provenance=_provenance(args)
    )
    if trainer.iteration == 0 and trainer.partial is None and args.val_every:
        trainer.logger.log(0, validate(trainer))  # the starting model, for the curve
    try:  # the log handlers come off also when an epoch raises (a kill leaves no process to clean)
        while trainer.iteration < args.total_iterations:
            it = trainer.iteration
            t0 = time.perf_counter()
            stats = trainer.update(batch, nll_loss, iteration=it, steps=_step_checkpoints(trainer, args, t0))
            elapsed = time.perf_counter() - t0 + (trainer.partial or {}).get("elapsed_s", 0.0)
            trainer.partial = None
            metrics = {
                **data_stats,
                **stats,
                "charts/SPS": len(batch) / max(elapsed, 1e-9),
                "perf/train_tokens": float(batch["attention_mask"].sum()),
                "time/update_s": elapsed,
                "time/iteration_s": elapsed,
            }
            if args.val_every and (it + 1) % args.val_every == 0:
                metrics.update(validate(trainer))
            trainer.iteration = it + 1
            trainer.logger.log(trainer.iteration, metrics)
            last = metrics
            done_here += 1
            info.iteration(trainer.iteration, args.total_iterations, metrics)
            if trainer.end_of_iteration(done_here):
                break
    finally:
        info.close()
    if trainer.iteration >= args.total_iterations:
        if args.export_model:
            trainer.export_model()
        if args.plot:
            plot_sft_curve(trainer.logger.history, trainer.run_dir / "learning_curve.png", title=f"sft {args.env_id}")
    trainer.logger.close()
    if trainer._pool is not None:
        trainer._pool.close()
    return last


def main(argv: list[str] | None = None) -> dict[str, float]:
    return train(parse_args(Args, argv))


if __name__ == "__main__":
    main()
