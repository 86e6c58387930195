"""Speed of the grid envs (not run by default).

Run: ``python -m pytest tests/benchmarks/test_bench_envs.py --benchmark-only -m ""``.
The pathological-action benchmarks run on every registered id (data-backed ones skip without their data).
Targets on a 2-core CPU: a step <= 20 us with its text observation (through ``gym.make``'s wrappers);
a 6x6 one-box level <= 1 ms median (gym-sokoban 0.0.6 takes 1.5-3 ms). Gymnasium's own FrozenLake-v1
step runs in the same session for comparison.
"""

from __future__ import annotations

import itertools
import time

import gymnasium as gym
import numpy as np
import pytest

import agentgym  # noqa: F401
from agentgym.core import MAX_ACTION_LENGTH
from agentgym.envs.frozen_lake import FrozenLakeEnv
from agentgym.envs.sokoban.env import SokobanEnv
from agentgym.envs.sokoban.generator import generate_level
from agentgym.envs.sokoban.solver import solve
from tests.envs.test_envs import ENV_IDS, make, pathological_actions, reset

pytestmark = pytest.mark.benchmark

# A level where left/right walks back and forth forever (no push), so every timed step is a real move.
OPEN_LEVEL = "######\n#____#\n#_P__#\n#_X__#\n#_O__#\n######"


def _stepper(env: gym.Env, actions: list[str]):
    cycle = itertools.cycle(actions)

    def step():
        return env.step(next(cycle))

    return step


@pytest.mark.parametrize("wrapped", [True, False], ids=["gym.make", "raw"])
def test_bench_sokoban_step(benchmark, wrapped):
    env = gym.make("agentgym/Sokoban-v0", max_episode_steps=10**9) if wrapped else SokobanEnv()
    env.reset(options={"level": OPEN_LEVEL})
    obs = benchmark(_stepper(env, ["left", "right"]))[0]
    assert obs.count("P") == 1


def test_bench_sokoban_step_wall_bump(benchmark):
    env = gym.make("agentgym/Sokoban-v0", max_episode_steps=10**9)
    env.reset(options={"level": OPEN_LEVEL})
    env.step("up")
    benchmark(_stepper(env, ["up"]))


def test_bench_sokoban_reset(benchmark):
    env = gym.make("agentgym/Sokoban-v0")
    seeds = itertools.count()
    benchmark(lambda: env.reset(seed=next(seeds)))


@pytest.mark.parametrize("dim,boxes", [((6, 6), 1), ((8, 8), 2)], ids=["6x6b1", "8x8b2"])
def test_bench_generate_level(benchmark, dim, boxes):
    rng = np.random.default_rng(0)
    level = benchmark(lambda: generate_level(rng, dim, boxes))
    assert level.optimal_length >= 1


def test_bench_solver_8x8_two_boxes(benchmark):
    rng = np.random.default_rng(1)
    levels = [generate_level(rng, (8, 8), 2) for _ in range(50)]
    hardest = max(levels, key=lambda lv: lv.optimal_length)
    plan = benchmark(lambda: solve(hardest.walls, hardest.width, hardest.targets, hardest.boxes, hardest.player))
    assert len(plan) == hardest.optimal_length


def test_bench_sokoban_expert_action(benchmark):
    env = SokobanEnv()
    env.reset(seed=0)

    def fresh_plan():
        env._plan_key = None  # force a BFS from the current state
        return env.expert_action()

    benchmark(fresh_plan)


@pytest.mark.parametrize("wrapped", [True, False], ids=["gym.make", "raw"])
def test_bench_frozen_lake_step(benchmark, wrapped):
    open_map = ["SFFF", "FFFF", "FFFF", "FFFG"]
    env = gym.make("agentgym/FrozenLakeNotSlippery-v0", max_episode_steps=10**9) if wrapped else FrozenLakeEnv()
    env.reset(seed=0, options={"map": open_map})
    benchmark(_stepper(env, ["right", "left"]))


def test_bench_frozen_lake_slippery_step(benchmark):
    # left/up keep the player near the start corner; the ice can still carry it to the goal now and then,
    # so a (rare) reset is part of the timed call
    env = gym.make("agentgym/FrozenLake-v0", max_episode_steps=10**9)
    options = {"map": ["SFFF", "FFFF", "FFFF", "FFFG"]}
    env.reset(seed=0, options=options)
    cycle = itertools.cycle(["left", "up"])

    def step():
        out = env.step(next(cycle))
        if out[2]:
            env.reset(options=options)
        return out

    benchmark(step)


def test_bench_frozen_lake_reset(benchmark):
    env = gym.make("agentgym/FrozenLake-v0")
    seeds = itertools.count()
    benchmark(lambda: env.reset(seed=next(seeds)))


def test_bench_gymnasium_frozen_lake_v1_step(benchmark):
    """Reference: gymnasium's FrozenLake-v1 (integer observations, no text) through gym.make."""
    env = gym.make("FrozenLake-v1", is_slippery=False, max_episode_steps=10**9)
    env.reset(seed=0)
    env.step(1)  # down from the start: a frozen tile on the default 4x4 map; left/right from there stays safe
    cycle = itertools.cycle([0, 0])  # left into the wall: stays put, never terminates

    benchmark(lambda: env.step(next(cycle)))


# -- pathological actions: every env's worst action under 50 ms ------------------------------------
@pytest.mark.parametrize("length", [MAX_ACTION_LENGTH, 100 * 1024], ids=["at-limit", "100KB"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_bench_worst_pathological_action(benchmark, env_id, length):
    """One step on the env's slowest pathological action (repeated ``[``, ``search[``, ``\\boxed{``, nesting, ...)
    of ``length`` characters: at the contract's limit the parser runs on it, at 100 KB it is rejected unread."""
    env = make(env_id)
    reset(env, seed=0)
    raw = env.unwrapped
    actions = pathological_actions(length)

    def cost(action: str) -> float:
        t = time.perf_counter()
        raw.step(action)
        return time.perf_counter() - t

    name = max(actions, key=lambda n: min(cost(actions[n]) for _ in range(3)))
    info = benchmark(lambda: raw.step(actions[name]))[4]
    benchmark.extra_info.update(action=name, length=length)
    assert info["is_action_valid"] is False
    assert benchmark.stats.stats.median < 0.05, f"{env_id}: {name} x {length} takes over 50 ms"
