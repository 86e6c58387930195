"""The agent protocol: batched ``act`` over per-episode contexts.

An agent sees, for each live episode, an :class:`AgentInput` (the env id, the task's first observation,
the (observation, action) history, the current observation and info) and answers with an
:class:`AgentAction`: the action string sent to the env plus, for LLM agents, the raw model output
and token counts that the episode log keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agentgym.agent_io import AgentAction, AgentInput


@runtime_checkable
class Agent(Protocol):
    """Anything with a ``name`` and a batched ``act`` is an agent.

    Optional members: ``privileged`` (bool, asks the runner for the env's expert action),
    ``config()`` (settings stored in logs), ``reset(seed)`` (start of an eval run),
    ``on_episode_end(episode)`` (e.g. Reflexion writes its reflection there).
    """

    name: str

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]: ...


def agent_config(agent: Any) -> dict[str, Any]:
    fn = getattr(agent, "config", None)
    return dict(fn()) if callable(fn) else {}


class RandomAgent:
    """Picks uniformly among ``info["admissible_actions"]`` (or the env's listed action words).

    Args:
        seed: seed of the agent's own generator (independent of env seeds).
    """

    name = "random"

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(self.seed if seed is None else seed)

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            choices = x.info.get("admissible_actions") or x.info.get("action_words") or []
            action = str(choices[int(self.rng.integers(len(choices)))]) if choices else "look"
            out.append(AgentAction(action=action))
        return out


class ExpertAgent:
    """Plays the env's own expert (``env.unwrapped.expert_action()``): solver plans, walkthroughs, gold answers."""

    name = "expert"
    privileged = True

    def config(self) -> dict[str, Any]:
        return {}

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            if x.expert_action is None:
                raise RuntimeError(f"{x.env_id} gave no expert action; ExpertAgent needs an env with expert_action()")
            out.append(AgentAction(action=x.expert_action))
        return out


class ScriptedAgent:
    """Plays a fixed list of moves, one per turn (turn ``t`` plays ``moves[t]``); past the list it repeats the last.

    For one episode at a time: a plan written elsewhere (a solver's, a privileged analyser's) played in the env
    so that its steps are logged like any agent's.
    """

    name = "scripted"

    def __init__(self, moves: Sequence[str]) -> None:
        if not moves:
            raise ValueError("ScriptedAgent needs at least one move")
        self.moves = [str(m) for m in moves]

    def config(self) -> dict[str, Any]:
        return {"moves": list(self.moves)}

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        return [AgentAction(action=self.moves[min(x.turn, len(self.moves) - 1)]) for x in inputs]


class NoisyExpertAgent:
    """The env's expert with a random admissible move instead, with probability ``noise`` (privileged).

    Its episodes hold the expert's good moves *and* mistakes: the trajectories on which a privileged analyser
    (``agentgym.agents.oracle``) writes lessons and reflections for SFT targets.

    Args:
        noise: probability of a uniformly random admissible action at each step.
        seed: seed of the agent's own generator.
    """

    privileged = True

    def __init__(self, noise: float = 0.3, seed: int | None = 0) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise}")
        self.noise = float(noise)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.name = f"noisy-expert-{noise:g}"

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(self.seed if seed is None else seed)

    def config(self) -> dict[str, Any]:
        return {"noise": self.noise, "seed": self.seed}

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            choices = x.info.get("admissible_actions") or []
            if choices and self.rng.random() < self.noise:
                out.append(AgentAction(action=str(choices[int(self.rng.integers(len(choices)))])))
            elif x.expert_action is not None:
                out.append(AgentAction(action=x.expert_action))
            else:
                raise RuntimeError(f"{x.env_id} gave no expert action; NoisyExpertAgent needs expert_action()")
        return out
