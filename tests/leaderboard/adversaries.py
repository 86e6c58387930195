"""Agents for the rerun tests (tests only): an oracle that plans with the public seed, and broken agents.

``OracleBySeed`` is the adversary of issue 23: it reads the reset seed from the task id the turn loop
hands an in-process agent, searches a private copy of the env seeded with it for a lucky action sequence,
and plays that sequence, so on the public suite it "solves" slippery FrozenLake far above the optimal
expert. Without the seed (inside the rerun's agent process) it can only guess.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.records import AgentAction, AgentInput

_SEED = re.compile(r"seed(\d+)")


class OracleBySeed:
    name = "oracle-by-seed"

    def __init__(self, tries: int = 400) -> None:
        self.tries = tries
        self.rng = np.random.default_rng(0)
        self.plans: dict[str, list[str]] = {}
        self._envs: dict[str, Any] = {}

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

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            leak = x.task_id or str(x.info.get("task_id") or "")
            m = _SEED.search(leak)
            if m:
                plan = self.plans.get(leak)
                if plan is None:
                    plan = self.plans[leak] = self._plan(x.env_id, int(m.group(1)))
                if x.turn < len(plan):
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
