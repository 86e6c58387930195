"""The batched multi-turn rollout engine: B tasks x G samples, one generate call per turn.

``collect_rollouts`` plays ``len(tasks) * group_size`` episodes at once. Episode ``e`` belongs to group
``e // group_size`` and resets with ``tasks[group]`` (same seed and options), so the G episodes of a
group share their start state (GRPO/GiGPO groups). The turns are played by :func:`agentgym.loop.run_loop`,
the loop evaluation uses, with the policy as an :class:`~agentgym.agents.llm.LLMAgent` (:class:`PolicyAgent`
over an :class:`~agentgym.agents.llm.HFChat` that wraps the trainer's generator and records tokens and
log-probs): each turn the prompts of all live episodes are built with a
:class:`~agentgym.prompts.PromptTemplate` (verl-agent's step-wise form: task + last K turns, not the whole
concatenated chat), generated in **one** batched call, parsed, and sent to the envs; episodes that end
drop out and the rest go on. The result holds one :class:`Turn` per (episode, step) -- prompt
ids, response ids, old logprobs, reward, flags -- ready for a trainer, plus the
:class:`~agentgym.episodes.Episode` records (raw output, parsed action, token counts) that the eval logs
use, fired through ``hooks`` as they happen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.agent_io import AgentInput, EpisodeSpec
from agentgym.agents.llm import HFChat, LLMAgent, fit_messages
from agentgym.envpool import EnvPool
from agentgym.episodes import Episode
from agentgym.loop import TurnResult, run_loop
from agentgym.prompts import PromptTemplate, get_template


@dataclass
class Turn:
    """One step of one episode, as a trainer needs it.

    Attributes:
        group: task index (episodes of a group share their start state).
        episode: episode index in the batch (``group * group_size + k``).
        t: step index within the episode (0-based).
        prompt_ids: chat-templated prompt tokens.
        response_ids: sampled tokens (EOS included when the model stopped by itself).
        old_logprobs: per-token logprobs of ``response_ids`` at sampling time (None unless asked).
        reward: the raw env reward of this step.
        done: the episode ended at this step (terminated or truncated).
        terminated, truncated: the env's flags (``truncated`` also when ``max_turns`` cut the episode).
        is_action_valid: the env accepted the action (``info["is_action_valid"]``).
        format_valid: the output followed the answer format (``<action>`` tags, ...).
        observation: the observation the prompt was built for (GiGPO's anchor state).
        action: the parsed action sent to the env.
        info: the env's info after the step.
        inp: the agent input the prompt was built from (rebuild the prompt, e.g. with a SEED lesson).
        messages: the chat messages of the prompt.
        response_text: the decoded response.
        finish_reason: ``"stop"`` or ``"length"``.
    """

    group: int
    episode: int
    t: int
    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float] | None
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    is_action_valid: bool
    format_valid: bool
    observation: str
    action: str
    info: dict[str, Any]
    inp: AgentInput
    messages: list[dict[str, str]]
    response_text: str = ""
    finish_reason: str = "stop"


@dataclass
class RolloutBatch:
    """Turns and episodes of one ``collect_rollouts`` call.

    Attributes:
        turns: every turn, in the order they were played (turn t of all live episodes, then t+1).
        episodes: one :class:`Episode` per episode index (``episodes[e]``).
        stats: counts and timings (see :func:`collect_rollouts`).
        group_size: G.
    """

    turns: list[Turn]
    episodes: list[Episode]
    stats: dict[str, float] = field(default_factory=dict)
    group_size: int = 1

    def episode_turns(self, episode: int) -> list[Turn]:
        """The turns of one episode, in step order."""
        return sorted((t for t in self.turns if t.episode == episode), key=lambda t: t.t)

    def episode_returns(self) -> list[float]:
        """Sum of raw env rewards per episode (index = episode)."""
        out = [0.0] * len(self.episodes)
        for t in self.turns:
            out[t.episode] += t.reward
        return out

    def episode_success(self) -> list[bool]:
        """Whether each episode solved its task (``info["success"]`` at its last step)."""
        return [bool(ep.success) for ep in self.episodes]

    def success_rate(self) -> float:
        """Fraction of episodes that solved their task."""
        s = self.episode_success()
        return sum(s) / len(s) if s else 0.0

    def group_of(self, episode: int) -> int:
        return episode // self.group_size

    def groups(self) -> list[list[int]]:
        """Episode indices of each group."""
        n = len(self.episodes) // max(self.group_size, 1)
        return [list(range(g * self.group_size, (g + 1) * self.group_size)) for g in range(n)]

    def invalid_action_rate(self) -> float:
        """Fraction of turns whose action the env rejected or whose format was wrong."""
        if not self.turns:
            return 0.0
        return sum(1 for t in self.turns if not (t.is_action_valid and t.format_valid)) / len(self.turns)


def fit_prompt(
    template: PromptTemplate,
    tokenizer: Any,
    inp: AgentInput,
    history_length: int,
    max_prompt_tokens: int,
    kwargs: dict[str, Any],
) -> tuple[list[dict[str, str]], list[int], bool]:
    """The prompt a rollout turn of ``inp`` gets (``LLMAgent``'s fitting, then ``HFChat``'s left cut).

    ERL and SEED rebuild turns' prompts with it (without the reflection, with the lesson); returns
    ``(messages, prompt_ids, cut_on_the_left)``.
    """
    chat = HFChat.from_generator(None, tokenizer, max_prompt_tokens=max_prompt_tokens)
    messages = fit_messages(template, inp, history_length=history_length, fits=chat.fits, kwargs=kwargs)
    ids = chat.encode(messages)
    return messages, ids, chat.truncated_prompts > 0


class PolicyAgent(LLMAgent):
    """The policy as an agent: :class:`LLMAgent` over the trainer's generator, with per-episode prompt kwargs.

    ``build_kwargs(inp, episode)`` (ERL's reflection, SEED's lesson, a test's tag) is called with the
    episode's index in the rollout.
    """

    def __init__(self, backend: HFChat, *, episode_kwargs: Callable[[AgentInput, int], dict[str, Any]] | None, **kw):
        super().__init__(backend, **kw)
        self.episode_kwargs = episode_kwargs

    def build_kwargs(self, inp: AgentInput) -> dict[str, Any]:
        return self.episode_kwargs(inp, inp.episode_index) if self.episode_kwargs is not None else {}


def collect_rollouts(
    generator: Any,
    tokenizer: Any,
    env_id: str,
    tasks: Sequence[EpisodeSpec],
    *,
    group_size: int = 1,
    template: PromptTemplate | None = None,
    max_turns: int | None = None,
    history_length: int = 2,
    max_prompt_tokens: int = 2048,
    max_new_tokens: int = 512,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    return_logprobs: bool = True,
    suppress_token_ids: list[int] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env_backend: str = "inprocess",
    num_workers: int = 1,
    hooks: Sequence[Any] = (),
    build_kwargs: Callable[[AgentInput, int], dict[str, Any]] | None = None,
    seed: int | None = None,
    pool: EnvPool | None = None,
    agent_name: str = "policy",
) -> RolloutBatch:
    """Play ``len(tasks) * group_size`` episodes with one batched generation per turn.

    Args:
        generator: an :class:`~agentgym.models.generation.HFGenerator` (or anything with its ``generate``).
        tokenizer: the policy's tokenizer (chat template).
        env_id: registered env id.
        tasks: one :class:`EpisodeSpec` per group.
        group_size: G episodes per task, all reset with the task's seed/options.
        template: prompt template; default ``get_template(env_id)``.
        max_turns: cut episodes after this many steps (marked truncated); None: the env's own limit.
        history_length: past turns shown in each prompt.
        max_prompt_tokens: longer prompts show fewer past turns, then are cut on the left.
        max_new_tokens, temperature, top_p: sampling settings (temperature 0: greedy).
        top_k: sample among the k most likely tokens (0: no cut; passed to the generator only when set).
        return_logprobs: fill ``Turn.old_logprobs``.
        suppress_token_ids: ids never sampled (SAPO's special tokens).
        env_kwargs: kwargs for ``gym.make``.
        env_backend: ``"inprocess"``, ``"async"`` (worker processes) or ``"ray"`` (actors).
        num_workers: processes/actors for the async/ray back-ends.
        hooks: episode hooks (``on_reset``/``on_step``/``on_episode_end``), e.g. a ``JsonlWriter``.
        build_kwargs: ``f(inp, episode) -> dict`` of extra ``template.build`` kwargs
            (``lesson``/``reflection``/``system``) per episode and turn.
        seed: base seed of sampling (turn t uses ``seed + t``); None leaves torch's RNG as it is.
        pool: an open :class:`EnvPool` with at least B*G slots to reuse across calls (not closed here).
        agent_name: name stored in the episode records.

    Returns:
        A :class:`RolloutBatch`. ``stats`` has ``num_episodes``, ``num_turns``, ``generation_s``,
        ``env_s``, ``generated_tokens``, ``gen_tokens_per_s``, ``mean_response_length``,
        ``invalid_action_rate``, ``format_error_rate``, ``success_rate``, ``mean_return``,
        ``truncated_prompts``.
    """
    if group_size < 1:
        raise ValueError("group_size must be >= 1")
    if not tasks:
        return RolloutBatch([], [], {"num_episodes": 0, "num_turns": 0}, group_size)
    template = template or get_template(env_id)
    n = len(tasks) * group_size
    specs = [tasks[e // group_size] for e in range(n)]
    own_pool = pool is None
    if pool is None:
        pool = EnvPool(env_id, n, env_kwargs=env_kwargs, backend=env_backend, num_workers=num_workers)
    elif pool.num_envs < n:
        raise ValueError(f"pool has {pool.num_envs} slots, the batch needs {n}")
    chat = HFChat.from_generator(
        generator,
        tokenizer,
        max_prompt_tokens=max_prompt_tokens,
        return_logprobs=return_logprobs,
        suppress_token_ids=suppress_token_ids,
    )
    # turn t of the rollout is the agent's call t (every live episode acts in each call): sampling seed + t
    agent = PolicyAgent(
        chat,
        episode_kwargs=build_kwargs,
        template=template,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
        history_length=history_length,
        seed=seed,
        name=agent_name,
    )
    record = _TurnRecorder(group_size, keep_logprobs=return_logprobs)
    try:
        finished, loop_stats = run_loop(
            env_id,
            agent,
            specs,
            pool,
            num_slots=n,
            hooks=hooks,
            agent_name=agent_name,
            agent_config=agent.config(),
            env_kwargs=env_kwargs,
            episode_extras=lambda e: {"group": e // group_size, "episode_index": e},
            max_turns=max_turns,
            on_turn=record,
        )
    finally:
        if own_pool:
            pool.close()
    eps = [finished[e] for e in range(n) if e in finished]
    batch = RolloutBatch(turns=record.turns, episodes=eps, group_size=group_size)
    batch.stats = _rollout_stats(batch, n, chat, env_s=loop_stats.env_s)
    return batch


class _TurnRecorder:
    """The loop's ``on_turn`` callback of :func:`collect_rollouts`: one :class:`Turn` per played turn."""

    def __init__(self, group_size: int, *, keep_logprobs: bool) -> None:
        self.group_size = group_size
        self.keep_logprobs = keep_logprobs
        self.turns: list[Turn] = []
        self.started: set[int] = set()

    def __call__(self, r: TurnResult) -> None:
        gen = r.action.generation
        if gen is None:
            raise RuntimeError("collect_rollouts needs a token-level back-end (the agent returned no tokens)")
        e = r.state.index
        if (
            r.t == 0 and e in self.started
        ):  # played again after an env worker loss aborted it: keep the new attempt only
            self.turns[:] = [t for t in self.turns if t.episode != e]
        self.started.add(e)
        self.turns.append(
            Turn(
                group=e // self.group_size,
                episode=e,
                t=r.t,
                prompt_ids=gen.prompt_ids,
                response_ids=list(gen.response_ids),
                old_logprobs=gen.logprobs if self.keep_logprobs else None,
                reward=r.reward,
                done=r.done,
                terminated=r.terminated,
                truncated=r.truncated,
                is_action_valid=bool(r.info.get("is_action_valid", True)),
                format_valid=r.action.format_valid,
                observation=r.inp.observation,
                action=r.action.action,
                info=r.info,
                inp=r.inp,
                messages=gen.messages,
                response_text=r.action.output or "",
                finish_reason=str(r.action.extras.get("finish_reason", "stop")),
            )
        )


def _rollout_stats(batch: RolloutBatch, n: int, chat: HFChat, *, env_s: float) -> dict[str, float]:
    """The summary ``stats`` of a rollout of ``n`` episodes played through ``chat`` (see :func:`collect_rollouts`)."""
    generation_s = chat.generation_s
    turns = batch.turns
    n_turns = len(turns)
    gen_tokens = sum(len(t.response_ids) for t in turns)
    return {
        "num_episodes": float(n),
        "num_turns": float(n_turns),
        "generation_s": generation_s,
        "env_s": env_s,
        "generated_tokens": float(gen_tokens),
        "gen_tokens_per_s": gen_tokens / generation_s if generation_s > 0 else 0.0,
        "mean_response_length": gen_tokens / n_turns if n_turns else 0.0,
        "invalid_action_rate": batch.invalid_action_rate(),
        "format_error_rate": sum(1 for x in turns if not x.format_valid) / n_turns if n_turns else 0.0,
        "success_rate": batch.success_rate(),
        "mean_return": sum(batch.episode_returns()) / n if n else 0.0,
        "truncated_prompts": float(chat.truncated_prompts),
    }
