"""Named eval protocols: fixed, versioned task lists that match what the envs accept."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.agents import ExpertAgent
from agentgym.evaluation import run_episodes
from agentgym.suites import SUITES, get_suite
from tests.conftest import require_data


def test_suite_sizes_and_option_names():
    assert len(get_suite("alfworld-eval")) == 274
    assert len(get_suite("alfworld-valid_unseen")) == 134
    assert len(get_suite("webshop-test")) == 500
    assert len(get_suite("sokoban")) == len(get_suite("frozenlake")) == len(get_suite("hotpotqa-dev")) == 100
    alf = get_suite("alfworld-eval")
    assert [t.spec.options["split"] for t in alf.tasks].count("valid_seen") == 140
    assert alf.tasks[140].spec.options == {"split": "valid_unseen", "index": 0}
    assert get_suite("webshop-test").tasks[499].spec.options == {"split": "test", "index": 499}
    assert get_suite("hotpotqa-dev").tasks[7].spec.options == {"index": 7}


def test_every_suite_has_unique_tasks_on_registered_envs():
    for suite in SUITES.values():
        keys = [t.key() for t in suite.tasks]
        assert len(set(keys)) == len(keys), suite.name
        for env_id in suite.env_ids:
            assert env_id in gym.registry, env_id
        assert suite.ref == f"{suite.name}@{suite.version}"


def test_seeded_suites_are_fixed_and_disjoint_from_small_training_seeds():
    seeds = [t.spec.seed for t in get_suite("sokoban").tasks]
    assert seeds == list(range(100_000, 100_100))
    assert [t.spec.seed for t in get_suite("frozenlake").tasks] == seeds


def test_get_suite_errors_are_actionable():
    with pytest.raises(KeyError, match="known suites: alfworld-eval"):
        get_suite("nope")
    with pytest.raises(KeyError, match="version 1"):
        get_suite("sokoban@7")
    assert get_suite("sokoban@1") is SUITES["sokoban"]


@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_procedural_suites_play_with_the_expert(name):
    suite = get_suite(name)
    result = run_episodes(suite.env_ids[0], ExpertAgent(), suite.specs(suite.env_ids[0])[:10])
    assert len(result.episodes) == 10 and all(e.done for e in result.episodes)
    assert len({e.task_id for e in result.episodes}) == 10  # distinct seeds give distinct levels


@pytest.mark.parametrize(
    ("name", "module", "family"),
    [
        ("alfworld-eval", "agentgym.envs.alfworld.env", "alfworld"),
        ("webshop-test", "agentgym.envs.webshop.env", "webshop"),
        ("hotpotqa-dev", "agentgym.envs.hotpotqa.env", "hotpotqa"),
        ("hotpotqa-erl", "agentgym.envs.hotpotqa.env", "hotpotqa"),
    ],
)
def test_data_backed_suites_reset_on_their_first_and_last_task(name, module, family):
    if importlib.util.find_spec(module.rpartition(".")[0]) is None:
        pytest.skip(f"{module} is not in this checkout yet")
    require_data(family)
    suite = get_suite(name)
    env = gym.make(suite.env_ids[0])
    try:
        for task in (suite.tasks[0], suite.tasks[-1]):
            obs, info = env.reset(seed=task.spec.seed, options=task.spec.options)
            assert isinstance(obs, str) and obs
    finally:
        env.close()
