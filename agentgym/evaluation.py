"""Run an agent on a list of episodes, batched across live envs, with logging and resume.

This is what ``agentgym eval`` runs: :func:`agentgym.loop.run_loop` (the one turn loop) keeps ``batch_size``
envs live and asks the agent for all their actions in one batched ``act`` call per turn; this module adds the
JSONL log of finished episodes, resume (skip the episodes the log already holds) and the progress bar.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym.agent_io import EpisodeSpec, episode_key, seed_specs  # noqa: F401  (EpisodeSpec, seed_specs: public API here too)
from agentgym.agents.base import agent_config
from agentgym.episodes import Episode, JsonlWriter, iter_episodes, summarize, to_jsonable
from agentgym.loop import TurnResult, run_loop


@dataclass
class EvalResult:
    episodes: list[Episode] = field(default_factory=list)
    resumed: int = 0

    def summary(self) -> dict[str, float]:
        return summarize(self.episodes)


class _FactoryEnvs:
    """Envs built by a caller's factory, in this process, with :class:`~agentgym.envpool.EnvPool`'s API."""

    def __init__(self, factory: Callable[[], gym.Env], n: int) -> None:
        self.envs = [factory() for _ in range(n)]

    def reset(self, slots, specs):
        return [self.envs[s].reset(seed=seed, options=opt) for s, (seed, opt) in zip(slots, specs)]

    def step(self, slots, actions):
        return [self.envs[s].step(a) for s, a in zip(slots, actions)]

    def expert_actions(self, slots):
        return [self.envs[s].unwrapped.expert_action() for s in slots]

    def close(self) -> None:
        for env in self.envs:
            env.close()


def run_episodes(
    env_id: str,
    agent: Any,
    specs: Sequence[EpisodeSpec],
    *,
    env_kwargs: dict[str, Any] | None = None,
    make_env: Callable[[], gym.Env] | None = None,
    batch_size: int = 8,
    log_path: str | Path | None = None,
    resume: bool = True,
    hooks: Sequence[Any] = (),
    progress: bool = False,
    env_backend: str = "inprocess",
    num_workers: int = 1,
    on_turn: Callable[[TurnResult], None] | None = None,
) -> EvalResult:
    """Play ``specs`` with ``agent`` and return every episode (resumed ones included, in spec order).

    Args:
        env_id: registered id (``agentgym/Sokoban-v0``).
        agent: an :class:`~agentgym.agents.base.Agent`.
        specs: the episodes to play (seed + options each).
        env_kwargs: kwargs for ``gym.make``.
        make_env: alternative env factory (must return an env whose ``spec.id`` is ``env_id``); in-process only.
        batch_size: envs kept live at once; the agent gets one batched ``act`` call per turn.
        log_path: JSONL log to append to (and to resume from).
        resume: skip specs whose (seed, options) the log already holds for this env id, env kwargs, agent
            name and agent config.
        hooks: extra episode hooks (``on_reset``/``on_step``/``on_episode_end``).
        progress: show a tqdm progress bar.
        env_backend: where the envs run: ``"inprocess"``, ``"async"`` (``num_workers`` processes) or
            ``"ray"`` (actors); see :mod:`agentgym.envpool`. Results do not depend on it.
        num_workers: env processes/actors for ``async``/``ray``.
        on_turn: called after every played turn with its :class:`~agentgym.loop.TurnResult` (progress
            displays: a slow model shows turns before any episode ends).

    The turns are played by :func:`agentgym.loop.run_loop` (the loop RL rollouts use too): the agent gets
    agent-facing info only (no task id, no seed); the log keeps them.
    """
    import agentgym  # noqa: F401
    from agentgym.envpool import EnvPool

    env_kwargs = dict(env_kwargs or {})
    name = getattr(agent, "name", type(agent).__name__)
    cfg = agent_config(agent)
    done: dict[str, Episode] = {}
    if log_path is not None and resume and Path(log_path).exists():
        # Only episodes of this very run count as done: a log shared by several agents or env settings
        # must not make one agent skip the episodes another one played.
        same = (to_jsonable(env_kwargs), name, to_jsonable(cfg))
        for ep in iter_episodes(log_path):
            if ep.env_id == env_id and (ep.env_kwargs, ep.agent, ep.agent_config) == same:
                done[episode_key(ep)] = ep
    todo = [s for s in specs if s.key() not in done]
    writer = JsonlWriter(log_path) if log_path is not None else None
    all_hooks = list(hooks) + ([writer] if writer else [])

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=f"{name} on {env_id}", unit="ep")
    turns = 0
    pace = _Pace(len(todo), _turn_limit(env_id))

    def turn_done(result: TurnResult) -> None:
        nonlocal turns
        turns += 1
        if bar is not None:  # a slow model visibly works: the turn count moves before any episode ends
            if result.done:
                bar.update(1)
            bar.set_postfix_str(pace.turn(result.t + 1 if result.done else None), refresh=True)
        if on_turn is not None:
            on_turn(result)

    n_envs = max(1, min(batch_size, len(todo))) if todo else 0
    pool: Any = None
    finished: dict[int, Episode] = {}
    try:
        if n_envs:
            if make_env is not None:
                if env_backend != "inprocess":
                    raise ValueError(
                        "make_env works with env_backend='inprocess' only (a factory cannot be sent to workers)"
                    )
                pool = _FactoryEnvs(make_env, n_envs)
            else:
                pool = EnvPool(env_id, n_envs, env_kwargs=env_kwargs, backend=env_backend, num_workers=num_workers)
            finished, _ = run_loop(
                env_id,
                agent,
                todo,
                pool,
                num_slots=n_envs,
                hooks=all_hooks,
                agent_name=name,
                agent_config=cfg,
                env_kwargs=env_kwargs,
                on_turn=turn_done,
            )
    finally:
        if pool is not None:
            pool.close()
        if writer is not None:
            writer.close()
        if bar is not None:
            bar.close()
    played = {todo[i].key(): ep for i, ep in finished.items()}
    ordered = [done.get(s.key()) or played[s.key()] for s in specs if s.key() in done or s.key() in played]
    return EvalResult(episodes=ordered, resumed=len(specs) - len(todo))


def _turn_limit(env_id: str) -> int | None:
    """The registered step limit of ``env_id`` (None when it has none or is not registered)."""
    try:
        return gym.spec(env_id).max_episode_steps
    except gym.error.Error:
        return None


class _Pace:
    """The progress bar's postfix: turns played, seconds per turn, and an estimate of the time left.

    The estimate counts the turns still to play as (episodes left x turns per finished episode, or the env's
    step limit before any finished) at the pace measured so far; a slow model shows it from its first turn.
    """

    def __init__(self, episodes: int, turn_limit: int | None) -> None:
        self.episodes = episodes
        self.turn_limit = turn_limit
        self.turns = 0
        self.finished = 0
        self.finished_turns = 0
        self.t0 = time.perf_counter()

    def turn(self, episode_length: int | None) -> str:
        """Count one turn (``episode_length``: the episode's length when this turn ended it); the postfix."""
        self.turns += 1
        if episode_length is not None:
            self.finished += 1
            self.finished_turns += episode_length
        elapsed = time.perf_counter() - self.t0
        per_turn = elapsed / self.turns
        per_episode = self.finished_turns / self.finished if self.finished else self.turn_limit
        text = f"turns={self.turns}, {per_turn:.1f} s/turn"
        if per_episode:
            left = max(0.0, self.episodes * per_episode - self.turns)
            text += f", ~{_duration(left * per_turn)} left"
        return text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def run_reflexion(
    env_id: str,
    agent: Any,
    specs: Sequence[EpisodeSpec],
    *,
    trials: int = 3,
    reflect_after_last: bool = True,
    **run_kwargs: Any,
):
    """Reflexion's protocol: up to ``trials`` trials per task, replaying only the still-unsolved tasks.

    Args:
        env_id: env id; agent: a :class:`~agentgym.agents.reflexion.ReflexionAgent`; specs: the tasks (:class:`EpisodeSpec`).
        trials: number of trials (the paper: up to 10 on ALFWorld, 3 here by default).
        reflect_after_last: also reflect on the last trial's failures (into the agent's memory and
            ``Episode.extras``, for a later call); False skips that generation when nothing reads it (the
            episode logs are already written by then).
        **run_kwargs: passed to :func:`run_episodes` (``log_path`` gets a
            ``.trialK`` suffix per trial).

    Returns:
        ``(per_trial, solved)``: the :class:`EvalResult` of each trial, and for each spec the 1-based
        trial that solved it (None when none did).
    """
    solved: dict[str, int | None] = {s.key(): None for s in specs}
    per_trial = []
    log_path = run_kwargs.pop("log_path", None)
    for k in range(1, trials + 1):
        todo = [s for s in specs if solved[s.key()] is None]
        if not todo:
            break
        log = None if log_path is None else Path(f"{log_path}.trial{k}")
        result = run_episodes(env_id, agent, todo, log_path=log, **run_kwargs)
        for spec, ep in zip(todo, result.episodes):
            if ep.success:
                solved[spec.key()] = k
        per_trial.append(result)
    if reflect_after_last:
        agent.reflect()  # the last trial's failures get their reflections too (memory, Episode.extras)
    else:
        agent.pending.clear()
    return per_trial, [solved[s.key()] for s in specs]


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain-text table (Markdown pipe syntax) of ``rows`` restricted to ``columns``."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[j]) for row in cells]) for j, c in enumerate(columns)]
    line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(list(columns)), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)
