"""Run an agent on a list of episodes, batched across live envs, with logging and resume.

This is the evaluation loop behind ``agentgym eval``: it keeps ``batch_size`` envs live, asks the agent
for all their actions in one batched ``act`` call per turn, writes each finished episode to a JSONL log
and, on restart, skips the episodes the log already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym.agents.base import agent_config
from agentgym.episodes import Episode, EpisodeBuilder, JsonlWriter, iter_episodes, summarize, to_jsonable
from agentgym.records import AgentInput, EpisodeSpec, episode_key, seed_specs  # noqa: F401  (EpisodeSpec, seed_specs: public API here too)


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
    finished: dict[str, Episode] = {}
    privileged = bool(getattr(agent, "privileged", False))

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(specs), initial=len(specs) - len(todo), desc=f"{name} on {env_id}", unit="ep")

    n_envs = max(1, min(batch_size, len(todo))) if todo else 0
    pool: Any = None
    if n_envs:
        if make_env is not None:
            if env_backend != "inprocess":
                raise ValueError(
                    "make_env works with env_backend='inprocess' only (a factory cannot be sent to workers)"
                )
            pool = _FactoryEnvs(make_env, n_envs)
        else:
            pool = EnvPool(env_id, n_envs, env_kwargs=env_kwargs, backend=env_backend, num_workers=num_workers)
    slots: list[dict[str, Any] | None] = [None] * n_envs
    queue = list(todo)
    try:

        def start(free: list[int]) -> None:
            """Reset the free slots with the next queued specs (one batched reset)."""
            take = [(i, queue.pop(0)) for i in free if queue]
            for i in free[len(take) :]:
                slots[i] = None
            if not take:
                return
            resets = pool.reset([i for i, _ in take], [(sp.seed, sp.options) for _, sp in take])
            for (i, spec), (obs, info) in zip(take, resets):
                builder = EpisodeBuilder(all_hooks)
                builder.start(
                    env_id=env_id,
                    seed=spec.seed,
                    observation=obs,
                    info=info,
                    options=spec.options,
                    env_kwargs=env_kwargs,
                    agent=name,
                    agent_config=cfg,
                )
                slots[i] = {"spec": spec, "builder": builder, "obs": obs, "info": info, "first": obs, "history": []}

        start(list(range(n_envs)))
        while any(s is not None for s in slots):
            live = [i for i, s in enumerate(slots) if s is not None]
            experts = pool.expert_actions(live) if privileged else [None] * len(live)
            inputs = []
            for i, expert in zip(live, experts):
                s = slots[i]
                task_id = s["info"].get("task_id")
                inputs.append(
                    AgentInput(
                        env_id=env_id,
                        observation=s["obs"],
                        info=s["info"],
                        first_observation=s["first"],
                        history=list(s["history"]),
                        task_id=None if task_id is None else str(task_id),
                        expert_action=expert,
                    )
                )
            actions = agent.act(inputs)
            if len(actions) != len(inputs):
                raise RuntimeError(f"agent {name} returned {len(actions)} actions for {len(inputs)} inputs")
            results = pool.step(live, [a.action for a in actions])
            free = []
            for i, act, (obs, reward, terminated, truncated, info) in zip(live, actions, results):
                s = slots[i]
                episode = s["builder"].episode
                extras = dict(act.extras)
                if not act.format_valid:
                    extras.setdefault("format_valid", False)
                s["builder"].add_step(
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
                s["history"].append((s["obs"], act.action))
                s["obs"], s["info"] = obs, info
                if terminated or truncated:
                    finished[s["spec"].key()] = episode
                    end = getattr(agent, "on_episode_end", None)
                    if callable(end):
                        end(episode)
                    if bar is not None:
                        bar.update(1)
                    free.append(i)
            if free:
                start(free)
    finally:
        if pool is not None:
            pool.close()
        if writer is not None:
            writer.close()
        if bar is not None:
            bar.close()
    ordered = [done.get(s.key()) or finished[s.key()] for s in specs if s.key() in done or s.key() in finished]
    return EvalResult(episodes=ordered, resumed=len(specs) - len(todo))


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
