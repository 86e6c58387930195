"""agentgym: train and compare LLM agents on multi-turn text tasks.

Importing the package registers every environment with Gymnasium::

    import gymnasium as gym
    import agentgym  # noqa: F401

    env = gym.make("agentgym/Sokoban-v0")
"""

from __future__ import annotations

from agentgym import envs as _envs  # noqa: F401  (registers the env ids)
from agentgym.core import TextEnv
from agentgym.version import __version__

__all__ = ["TextEnv", "__version__"]
