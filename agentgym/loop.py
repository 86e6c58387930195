"""THE turn loop: episodes driven through the agent protocol, batched across live envs.

Evaluation (:func:`agentgym.evaluation.run_episodes`) and RL rollouts (:func:`agentgym.rl.rollout.collect_rollouts`)
both call :func:`run_loop`, so what an agent sees, how a step is recorded and when an episode ends cannot
drift apart between the two (rLLM#331 is that bug in a peer). Each turn the loop builds one
:class:`~agentgym.agent_io.AgentInput` per live episode from its :class:`EpisodeState`, asks the agent for all
actions in one batched ``act`` call, steps the envs in one batched call and records the step.

What an agent receives is agent-facing only (DESIGN.md section 2.5): the observation, the history and the
env's info without the keys that reveal the reset seed (:data:`HIDDEN_INFO_KEYS`: the task id names the seed
of procedural envs); ``AgentInput.task_id`` is None. Episode logs keep the task id for maintainers and
verifiers; ``agent.on_episode_end`` gets a view of the episode with the seed and task id removed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.agent_io import AgentAction, AgentInput, EpisodeSpec
from agentgym.episodes import Episode, EpisodeBuilder

log = logging.getLogger(__name__)

#: Info keys the loop never passes to an agent (they reveal the reset seed; logs keep them).
HIDDEN_INFO_KEYS: frozenset[str] = frozenset({"task_id", "seed"})


def agent_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """The agent-facing part of an env's ``info`` (everything but :data:`HIDDEN_INFO_KEYS`)."""
    return {k: v for k, v in info.items() if k not in HIDDEN_INFO_KEYS}


def agent_view(episode: Episode) -> Episode:
    """The episode as an agent may see it after it ended: no seed, no task id, agent-facing infos.

    ``extras`` is the same dict as the episode's, so an agent's notes (Reflexion's reflection) land in the record.
    """
    return dataclasses.replace(
        episode,
        seed=None,
        task_id=None,
        options=None,
        reset_info=agent_info(episode.reset_info),
        steps=[dataclasses.replace(s, info=agent_info(s.info)) for s in episode.steps],
    )


@dataclass
class EpisodeState:
    """One live episode: what the loop knows about it between turns.

    Attributes:
        index: the episode's position in the run (``specs[index]``; a rollout's episode index).
        slot: the env slot that plays it.
        spec: seed and options it was reset with.
        builder: the episode record under construction (fires the hooks).
        observation, info: the env's latest output (``info`` in full; agents get :func:`agent_info` of it).
        first_observation: the reset observation (the task).
        history: ``(observation, action)`` of the turns played so far.
    """

    index: int
    slot: int
    spec: EpisodeSpec
    builder: EpisodeBuilder
    observation: str
    info: dict[str, Any]
    first_observation: str
    history: list[tuple[str, str]] = field(default_factory=list)

    @property
    def t(self) -> int:
        """The turn about to be played (0-based)."""
        return len(self.history)

    def agent_input(self, env_id: str, expert_action: str | None = None) -> AgentInput:
        """What the agent gets for this turn (agent-facing info only; no task id)."""
        return AgentInput(
            env_id=env_id,
            observation=self.observation,
            info=agent_info(self.info),
            first_observation=self.first_observation,
            history=list(self.history),
            task_id=None,
            episode_index=self.index,
            expert_action=expert_action,
        )


@dataclass
class TurnResult:
    """One played turn of one episode, as the ``on_turn`` callback receives it.

    ``truncated`` includes a cut by ``max_turns``; ``info`` is the env's full info after the step.
    """

    state: EpisodeState
    t: int
    inp: AgentInput
    action: AgentAction
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class LoopStats:
    """Counts and timings of one :func:`run_loop` call."""

    turns: int = 0
    act_calls: int = 0
    act_s: float = 0.0
    env_s: float = 0.0
    aborted: int = 0
    """episodes ended by a lost env worker they could not be restored to, and played again from the start"""


def run_loop(
    env_id: str,
    agent: Any,
    specs: Sequence[EpisodeSpec],
    pool: Any,
    *,
    num_slots: int,
    hooks: Sequence[Any] = (),
    agent_name: str = "",
    agent_config: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    episode_extras: Callable[[int], dict[str, Any]] | None = None,
    max_turns: int | None = None,
    on_turn: Callable[[TurnResult], None] | None = None,
    on_episode_end: Callable[[int, Episode], None] | None = None,
) -> tuple[dict[int, Episode], LoopStats]:
    """Play every spec with ``agent``, ``num_slots`` episodes live at a time, one batched ``act`` per turn.

    Args:
        env_id: the env id recorded in the episodes.
        agent: an :class:`~agentgym.agents.base.Agent` (``privileged`` agents get the env's expert action;
            ``on_episode_end(episode)`` gets :func:`agent_view` of each finished episode).
        specs: the episodes to play; episode ``i`` is reset with ``specs[i]``.
        pool: envs with :class:`~agentgym.envpool.EnvPool`'s ``reset``/``step``/``expert_actions`` over slots.
        num_slots: how many of the pool's slots to use; a freed slot takes the next queued spec.
        hooks: episode hooks (``on_reset``/``on_step``/``on_episode_end``), e.g. a ``JsonlWriter``.
        agent_name, agent_config, env_kwargs: stored in the episode records.
        episode_extras: ``f(i) -> dict`` stored in episode ``i``'s ``extras`` (a rollout's group).
        max_turns: cut episodes after this many steps (their last step is marked truncated).
        on_turn: called for every played turn (eval's progress bar; the rollout's training rows).
        on_episode_end: called with ``(i, episode)`` when episode ``i`` ends, after the hooks.

    Returns:
        ``({i: episode}, stats)`` for every spec played.
    """
    finished: dict[int, Episode] = {}
    stats = LoopStats()
    privileged = bool(getattr(agent, "privileged", False))
    agent_end = getattr(agent, "on_episode_end", None)
    queue = list(range(len(specs)))
    slots: list[EpisodeState | None] = [None] * num_slots

    def start(free: list[int]) -> None:
        """Reset the free slots with the next queued specs (one batched reset)."""
        take = [(slot, queue.pop(0)) for slot in free if queue]
        for slot in free[len(take) :]:
            slots[slot] = None
        if not take:
            return
        t0 = time.perf_counter()
        resets = pool.reset([slot for slot, _ in take], [(specs[i].seed, specs[i].options) for _, i in take])
        stats.env_s += time.perf_counter() - t0
        for (slot, i), (obs, info) in zip(take, resets):
            builder = EpisodeBuilder(hooks)
            builder.start(
                env_id=env_id,
                seed=specs[i].seed,
                observation=obs,
                info=info,
                options=specs[i].options,
                env_kwargs=env_kwargs,
                agent=agent_name,
                agent_config=agent_config,
                extras=episode_extras(i) if episode_extras is not None else None,
            )
            slots[slot] = EpisodeState(i, slot, specs[i], builder, obs, info, obs)

    start(list(range(num_slots)))
    while any(s is not None for s in slots):
        live = [s for s in slots if s is not None]
        experts = pool.expert_actions([s.slot for s in live]) if privileged else [None] * len(live)
        inputs = [s.agent_input(env_id, expert) for s, expert in zip(live, experts)]
        t0 = time.perf_counter()
        actions = agent.act(inputs)
        stats.act_s += time.perf_counter() - t0
        stats.act_calls += 1
        if len(actions) != len(inputs):
            raise RuntimeError(f"agent {agent_name} returned {len(actions)} actions for {len(inputs)} inputs")
        t0 = time.perf_counter()
        results = pool.step([s.slot for s in live], [a.action for a in actions])
        stats.env_s += time.perf_counter() - t0
        free = []
        for s, inp, act, (obs, reward, terminated, truncated, info) in zip(live, inputs, actions, results):
            if info.get("aborted"):  # its env worker died and replay could not restore it: play the task again
                log.warning(
                    "episode %d (seed %s) aborted: %s; playing it again", s.index, s.spec.seed, info["aborted"]
                )
                stats.aborted += 1
                queue.insert(0, s.index)
                free.append(s.slot)
                continue
            t = s.t
            truncated = bool(truncated) or (max_turns is not None and t + 1 >= max_turns and not terminated)
            extras = dict(act.extras)
            if not act.format_valid:
                extras.setdefault("format_valid", False)
            episode = s.builder.episode
            s.builder.add_step(
                action=act.action,
                observation=obs,
                reward=float(reward),
                terminated=terminated,
                truncated=truncated,
                info=info,
                output=act.output,
                prompt_tokens=act.prompt_tokens,
                completion_tokens=act.completion_tokens,
                extras=extras,
            )
            stats.turns += 1
            s.history.append((s.observation, act.action))
            s.observation, s.info = obs, info
            if on_turn is not None:
                on_turn(TurnResult(s, t, inp, act, obs, float(reward), bool(terminated), truncated, info))
            if terminated or truncated:
                finished[s.index] = episode
                if callable(agent_end):
                    agent_end(agent_view(episode))
                if on_episode_end is not None:
                    on_episode_end(s.index, episode)
                free.append(s.slot)
        if free:
            start(free)
    return finished, stats
