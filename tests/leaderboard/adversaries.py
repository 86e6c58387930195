"""Agents for the rerun tests (tests only): an oracle that plans with the public seed, and broken agents.

``OracleBySeed`` is the seed-memorising adversary: it knows the public suite's seeds (they are in
``agentgym.suites``), and it reads the reset seed from the task id when the turn loop still hands one to an
in-process agent. For each episode it searches a private copy of the env seeded with that seed for a lucky
action sequence and plays it, so on the public suite it "solves" slippery FrozenLake far above the optimal
expert. Without the leak it recognises the public episode by its first observation (the lowest unused
public seed whose reset gives it). On fresh seeds (the rerun) neither works, and it can only guess.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.agent_io import AgentAction, AgentInput

_SEED = re.compile(r"seed(\d+)")


class OracleBySeed:
    name = "oracle-by-seed"

    def __init__(self, tries: int = 400) -> None:
        self.tries = tries
        self.rng = np.random.default_rng(0)
        self.live: list[tuple[str, list[str]]] = []  # (first observation, plan) of the episodes it planned
        self._envs: dict[str, Any] = {}
        self._resets: dict[str, list[tuple[int, str]]] = {}
        self._used: set[tuple[str, int]] = set()

    def config(self) -> dict[str, Any]:
        return {"tries": self.tries}

    def _plan(self, env_id: str, seed: int) -> list[str]:
        import gymnasium as gym

        import agentgym  # noqa: F401

        env = self._envs.get(env_id) or self._envs.setdefault(env_id, gym.make(env_id))
        rng = np.random.default_rng(seed)
        best: list[str] = []
        for _ in range(self.tries):
            _, info = env.reset(seed=seed)
            actions: list[str] = []
            done = False
            while not done:
                choices = info.get("admissible_actions") or ["left"]
                a = str(choices[int(rng.integers(len(choices)))])
                actions.append(a)
                _, _, term, trunc, info = env.step(a)
                done = term or trunc
            if info.get("success"):
                return actions
            best = best or actions
        return best

    def _public_seed(self, env_id: str, first_observation: str) -> int | None:
        """The lowest public suite seed not yet assigned whose reset observation is ``first_observation``."""
        import gymnasium as gym

        import agentgym  # noqa: F401
        from agentgym.suites import SUITES

        if env_id not in self._resets:
            env = self._envs.get(env_id) or self._envs.setdefault(env_id, gym.make(env_id))
            seeds = sorted({t.spec.seed for s in SUITES.values() for t in s.tasks if t.env_id == env_id})
            self._resets[env_id] = [(seed, env.reset(seed=seed)[0]) for seed in seeds if seed is not None]
        for seed, obs in self._resets[env_id]:
            if obs == first_observation and (env_id, seed) not in self._used:
                self._used.add((env_id, seed))
                return seed
        return None

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            first = x.first_observation or x.observation
            done = [a for _, a in x.history]
            plan = None
            if x.turn == 0:
                m = _SEED.search(x.task_id or str(x.info.get("task_id") or ""))
                seed = int(m.group(1)) if m else self._public_seed(x.env_id, first)
                if seed is not None:
                    plan = self._plan(x.env_id, seed)
                    self.live.append((first, plan))
            else:
                plan = next((p for f, p in self.live if f == first and p[: len(done)] == done), None)
            if plan is not None and x.turn < len(plan):
                out.append(AgentAction(action=plan[x.turn]))
                continue
            choices = x.info.get("admissible_actions") or ["left"]
            out.append(AgentAction(action=str(choices[int(self.rng.integers(len(choices)))])))
        return out


class CrashingAgent:
    """Raises on its second turn of every episode."""

    name = "crashing"

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        if any(x.turn >= 1 for x in inputs):
            raise RuntimeError("boom")
        return [AgentAction(action="left") for _ in inputs]


class HangingAgent:
    """Never answers on the first turn of an odd episode; plays 'left' otherwise."""

    name = "hanging"

    def __init__(self) -> None:
        self.episodes = 0

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        for x in inputs:
            if x.turn == 0:
                self.episodes += 1
                if self.episodes % 2 == 1:
                    time.sleep(3600)
        return [AgentAction(action="left") for _ in inputs]


class ExitingAgent:
    """Kills its own process on the first turn."""

    name = "exiting"

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        import os

        print("about to exit")  # goes to stderr, not into the protocol
        os._exit(3)
