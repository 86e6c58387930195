"""Play an env through its tools (the table of :mod:`agentgym.prompts.tools`), one ``env.step`` per call.

>>> from agentgym.integrations.tools import ToolEnv, openai_tools
>>> env = ToolEnv("agentgym/Sokoban-v0")
>>> text = env.reset(seed=0)
>>> text = env.call("move", {"direction": "up"})
>>> env.total_reward, env.done  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import agentgym  # noqa: F401  (registers the ids)
from agentgym.prompts.tools import (
    FAMILIES,
    Family,
    Tool,
    ToolCallError,
    family,
    openai_tools,
    to_action,
    to_tool_call,
)

__all__ = [
    "FAMILIES",
    "Family",
    "Tool",
    "ToolCallError",
    "ToolEnv",
    "family",
    "openai_tools",
    "to_action",
    "to_tool_call",
]


class ToolEnv:
    """One env played through its tools: ``reset`` then ``call(name, arguments)`` until ``done``.

    Each call is one ``env.step`` of the env's text action; rewards add up in ``total_reward`` exactly as the
    env gives them. A call after the episode ended, or a call that is no tool of the env, does not step the
    env: it returns a message saying so (a model's mistake must not crash a trainer's rollout).

    Args:
        env_id: a registered ``agentgym/*`` id with a tool form.
        **make_kwargs: passed to ``gym.make``.
    """

    def __init__(self, env_id: str, **make_kwargs: Any) -> None:
        self.env_id = env_id
        self.family = family(env_id)
        self.env = gym.make(env_id, **make_kwargs)
        self.total_reward = 0.0
        self.done = False
        self.info: dict[str, Any] = {}
        self.actions: list[str] = []
        self.seed: int | None = None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        """Start an episode (seed/options as the env's ``reset``); returns the first observation text."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.total_reward, self.done, self.info, self.actions, self.seed = 0.0, False, info, [], seed
        return self._text(obs, info)

    def call(self, name: str, arguments: dict[str, Any] | str) -> str:
        """Play one tool call; returns the observation text (or why nothing was played)."""
        if self.done:
            return "The episode is over; no more actions are played."
        try:
            action = to_action(self.family, name, arguments)
        except ToolCallError as exc:
            return f"Invalid tool call: {exc}"
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(action)
        self.total_reward += float(reward)
        self.done = bool(terminated or truncated)
        self.info = info
        return self._text(obs, info)

    @property
    def success(self) -> bool:
        return bool(self.info.get("success", False))

    def _text(self, obs: str, info: dict[str, Any]) -> str:
        if self.family.show_admissible and info.get("admissible_actions") and not self.done:
            return f"{obs}\nAdmissible commands: {', '.join(info['admissible_actions'])}"
        return obs

    def close(self) -> None:
        self.env.close()
