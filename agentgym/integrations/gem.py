"""agentgym envs in GEM (gem-llm 0.1): every ``agentgym/*`` id registered with ``gem.register``.

GEM's contract is Gymnasium's for text: ``reset(seed) -> (obs, info)`` and ``step(action: str)`` returning the
5-tuple; ROLL and GEM's own trainers consume it directly. :class:`GemEnv` forwards both to ``gym.make(env_id)``
unchanged, so observations, rewards and ``info`` are the env's. ``gem.make_vec`` passes each copy a ``seed``
keyword (``seed + index``): it seeds that copy's first reset, and later resets continue the env's own RNG, as
``gym.make`` play does.

    import agentgym.integrations.gem  # registers the ids
    import gem
    env = gem.make("agentgym/Sokoban-v0")
    obs, info = env.reset(seed=3)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import agentgym  # noqa: F401  (registers the gymnasium ids)

try:
    import gem
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise gym.error.DependencyNotInstalled('GEM is not installed; run `pip install "agentgym[gem]"`') from exc


class GemEnv(gem.Env):
    """A registered agentgym env as a ``gem.Env`` (observations and actions are the env's text).

    Args:
        gym_id: the ``agentgym/*`` id to make.
        seed: the seed of the first reset when ``reset`` is called without one (``gem.make_vec`` sets it).
        **make_kwargs: passed to ``gym.make``.
    """

    def __init__(self, gym_id: str, seed: int | None = None, **make_kwargs: Any) -> None:
        super().__init__()
        self.gym_id = gym_id
        self.env = gym.make(gym_id, **make_kwargs)
        self._first_seed = seed

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        # gem.Env.reset seeds Python's and numpy's global RNGs; our envs draw only from their own, so it is not called
        if seed is None:
            seed, self._first_seed = self._first_seed, None
        else:
            self._first_seed = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        self.env.close()


def register_all() -> list[str]:
    """Register every ``agentgym/*`` gymnasium id with GEM under the same id (idempotent); returns the ids."""
    from gem.envs.registration import ENV_REGISTRY

    ids = sorted(i for i in gym.registry if i.startswith("agentgym/"))
    for env_id in ids:
        if env_id not in ENV_REGISTRY:
            gem.register(env_id, entry_point=GemEnv, gym_id=env_id)
    return ids


register_all()
