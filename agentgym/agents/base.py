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

from agentgym.records import AgentAction, AgentInput


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
