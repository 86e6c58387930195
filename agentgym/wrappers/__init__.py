"""Gymnasium wrappers that put the LLM answer format around any agentgym env.

* :class:`ParseAction` -- the agent sends raw model text; the wrapper parses ``<action>…</action>`` with a
  prompt template and steps the env with the parsed action (``info["format_valid"]``/``["format_reason"]``).
* :class:`ChatHistory` -- keeps the episode context and puts the next prompt, as chat messages built by a
  :class:`~agentgym.prompts.PromptTemplate`, in ``info["messages"]`` after every reset and step.
* :class:`InvalidActionPenalty` -- subtracts a penalty when the env rejected the action or the answer broke
  the format (verl-agent's invalid-action penalty, 0.1 by default).

Stacking order for a raw-text loop: ``InvalidActionPenalty(ParseAction(ChatHistory(env)))`` -- ChatHistory
sits next to the env so it records the parsed action, and the penalty sees ParseAction's format flag.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentgym.agent_io import AgentInput
from agentgym.prompts import PromptTemplate, get_template


def _env_id(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env.unwrapped).__name__


class ParseAction(gym.Wrapper):
    """Accept raw model output as the action; step the env with the parsed ``<action>`` text.

    An output without a parsable action still steps the env (with ``""``, which the env answers as an
    invalid action), so step limits and episode logs stay as they are; ``info["format_valid"]`` is False
    and ``info["format_reason"]`` says why. ``info["raw_output"]`` keeps the text.

    Args:
        env: an agentgym env.
        template: parser to use; default ``get_template(env.spec.id)``.
    """

    def __init__(self, env: gym.Env, template: PromptTemplate | None = None) -> None:
        super().__init__(env)
        self.template = template or get_template(_env_id(env))

    def step(self, action: str):
        parsed = self.template.parse(action if isinstance(action, str) else str(action))
        obs, reward, terminated, truncated, info = self.env.step(parsed.action)
        info = dict(info)
        info["format_valid"] = parsed.valid
        info["raw_output"] = action
        if not parsed.valid:
            info["format_reason"] = parsed.reason
        return obs, reward, terminated, truncated, info


class ChatHistory(gym.Wrapper):
    """Track (observation, action) history and expose the next prompt as ``info["messages"]``.

    Args:
        env: an agentgym env.
        template: prompt template; default ``get_template(env.spec.id)``.
        history_length: past turns in each prompt (verl-agent: 2; -1: all).
        build_kwargs: extra ``template.build`` kwargs (``lesson``, ``reflection``, ``system``).
    """

    def __init__(
        self,
        env: gym.Env,
        template: PromptTemplate | None = None,
        *,
        history_length: int = 2,
        build_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(env)
        self.template = template or get_template(_env_id(env))
        self.history_length = history_length
        self.build_kwargs = dict(build_kwargs or {})
        self.inp: AgentInput | None = None

    def _messages(self) -> list[dict[str, str]]:
        assert self.inp is not None
        return self.template.build(self.inp, history_length=self.history_length, **self.build_kwargs)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        task_id = info.get("task_id")
        self.inp = AgentInput(
            env_id=_env_id(self.env),
            observation=obs,
            info=info,
            first_observation=obs,
            task_id=None if task_id is None else str(task_id),
        )
        info = dict(info)
        info["messages"] = self._messages()
        return obs, info

    def step(self, action: str):
        if self.inp is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.inp.history.append((self.inp.observation, action))
        self.inp.observation, self.inp.info = obs, info
        info = dict(info)
        info["messages"] = self._messages()
        return obs, reward, terminated, truncated, info


class InvalidActionPenalty(gym.Wrapper):
    """Subtract ``penalty`` from the reward of steps with an invalid action or a broken answer format.

    verl-agent (GiGPO/SAPO protocol) penalises invalid actions by 0.1. ``info["invalid_penalty"]`` holds
    the amount subtracted on that step.

    Args:
        env: the env (put it outside :class:`ParseAction` to also penalise format errors).
        penalty: amount subtracted (>= 0).
    """

    def __init__(self, env: gym.Env, penalty: float = 0.1) -> None:
        if penalty < 0:
            raise ValueError(f"penalty must be >= 0, got {penalty}")
        super().__init__(env)
        self.penalty = float(penalty)

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.env.step(action)
        bad = not info.get("is_action_valid", True) or info.get("format_valid") is False
        info = dict(info)
        info["invalid_penalty"] = self.penalty if bad else 0.0
        return obs, float(reward) - info["invalid_penalty"], terminated, truncated, info


__all__ = ["ChatHistory", "InvalidActionPenalty", "ParseAction"]
