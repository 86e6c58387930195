"""agentgym envs in SkyRL-gym (skyrl-gym 0.4): a ``BaseTextEnv`` per registered id, via ``skyrl_gym.register``.

SkyRL's generator makes an env per trajectory with ``skyrl_gym.make(id, env_config=..., extras=row)``, calls
``init(prompt)`` and then ``step(llm_output)`` until ``done``. :class:`SkyRLEnv` resets ``gym.make(env_id)``
with the row's ``extras["seed"]`` and ``extras["options"]`` (so the data set chooses the tasks), appends the
first observation to the prompt, and plays the model's action: the text inside its last
``<action>...</action>`` tags, or the whole output without tags (the env judges it; malformed actions are the
env's invalid actions). Rewards, ``done`` (terminated or truncated) and ``info`` (as ``metadata``) are the env's.

    import agentgym.integrations.skyrl  # registers the ids
    import skyrl_gym
    env = skyrl_gym.make("agentgym/Sokoban-v0", extras={"seed": 3})
    chat, meta = env.init([{"role": "user", "content": "Solve this Sokoban level."}])
"""

from __future__ import annotations

import json
import re
from typing import Any

import gymnasium as gym

import agentgym  # noqa: F401  (registers the gymnasium ids)

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise gym.error.DependencyNotInstalled('SkyRL-gym is not installed; run `pip install "agentgym[skyrl]"`') from exc

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)


def parse_action(output: str) -> str:
    """The action in a model's output: the last ``<action>...</action>`` body, else the stripped output."""
    found = _ACTION.findall(output)
    return found[-1].strip() if found else output.strip()


class SkyRLEnv(BaseTextEnv):
    """A registered agentgym env as a SkyRL-gym ``BaseTextEnv``.

    Args:
        gym_id: the ``agentgym/*`` id to make.
        env_config: SkyRL's per-env config; its ``make_kwargs`` (if any) go to ``gym.make``.
        extras: the data set row's extras: ``seed`` (int) and ``options`` (dict or JSON text) pick the task.
    """

    def __init__(self, gym_id: str, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        make_kwargs = dict((env_config or {}).get("make_kwargs", {}) or {})
        self.env = gym.make(gym_id, **make_kwargs)
        self.max_turns = self.env.spec.max_episode_steps or 1
        self.seed = extras.get("seed")
        options = extras.get("options")
        self.options = json.loads(options) if isinstance(options, str) and options else options or None
        self.total_reward = 0.0

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        obs, info = self.env.reset(seed=None if self.seed is None else int(self.seed), options=self.options)
        self.turns, self.total_reward = 0, 0.0
        chat = [dict(m) for m in prompt]
        if chat and chat[-1].get("role") == "user":
            chat[-1]["content"] = chat[-1]["content"] + "\n\n" + obs
        else:
            chat.append({"role": "user", "content": obs})
        return chat, {"task_id": info.get("task_id")}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        played = parse_action(action)
        obs, reward, terminated, truncated, info = self.env.step(played)
        self.total_reward += float(reward)
        done = bool(terminated or truncated)
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": obs}],
            reward=float(reward),
            done=done,
            metadata=dict(info),
            postprocessed_action=played,
        )

    def get_metrics(self) -> dict[str, Any]:
        return {"return": self.total_reward, "turns": self.turns}

    def close(self) -> None:
        self.env.close()


def register_all() -> list[str]:
    """Register every ``agentgym/*`` gymnasium id with SkyRL-gym under the same id (idempotent); returns the ids."""
    ids = sorted(i for i in gym.registry if i.startswith("agentgym/"))
    for env_id in ids:
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=SkyRLEnv, kwargs={"gym_id": env_id})
    return ids


register_all()
