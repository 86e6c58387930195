"""GEM and SkyRL-gym play our envs through their own ``make``: same observations and rewards as ``gym.make``."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401


def _expert_text_play(env_id: str, seed: int) -> tuple[list[str], list[float], list[str]]:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    observations, rewards, actions, done = [obs], [], [], False
    while not done:
        action = env.unwrapped.expert_action()
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        rewards.append(float(reward))
        actions.append(action)
        done = terminated or truncated
    return observations, rewards, actions


@pytest.mark.parametrize("env_id", ["agentgym/Sokoban-v0", "agentgym/FrozenLake-v0"])
def test_gem_make_plays_the_env(env_id):
    gem = pytest.importorskip("gem", reason="the gem extra is not installed (pip install 'agentgym[gem]')")
    import agentgym.integrations.gem  # noqa: F401

    observations, rewards, actions = _expert_text_play(env_id, seed=4)
    env = gem.make(env_id)
    assert isinstance(env, gem.Env)
    obs, _ = env.reset(seed=4)
    got_obs, got_rewards = [obs], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        got_obs.append(obs)
        got_rewards.append(reward)
    assert got_obs == observations and got_rewards == rewards
    assert terminated or truncated


def test_gem_vector_env_seeds_each_copy_and_steps_them_like_gym_make():
    gem = pytest.importorskip("gem", reason="the gem extra is not installed (pip install 'agentgym[gem]')")
    import agentgym.integrations.gem  # noqa: F401

    env_id = "agentgym/Sokoban-v0"
    vec = gem.make_vec([env_id] * 3, seed=10)
    obs, _ = vec.reset()
    refs = [gym.make(env_id) for _ in range(3)]
    assert obs == [r.reset(seed=10 + i)[0] for i, r in enumerate(refs)]
    for _ in range(6):  # past the end of the short levels
        actions = [r.unwrapped.expert_action() for r in refs]
        obs, rewards, terminated, truncated, _ = vec.step(actions)
        expected = [r.step(a)[:4] for r, a in zip(refs, actions)]
        assert list(rewards) == pytest.approx([e[1] for e in expected])
        assert list(terminated) == [e[2] for e in expected]
        for i, (r, e) in enumerate(zip(refs, expected)):
            # GEM's default autoreset (same step): a finished copy returns the first observation of its next
            # episode, reset without a seed, i.e. continuing its own RNG as gym.make's reset() does
            assert obs[i] == (r.reset()[0] if e[2] or e[3] else e[0])


@pytest.mark.parametrize("env_id", ["agentgym/Sokoban-v0", "agentgym/FrozenLake-v0", "agentgym/HotpotQA-v0"])
def test_skyrl_make_init_step_loop_plays_the_env(env_id):
    skyrl_gym = pytest.importorskip(
        "skyrl_gym", reason="the skyrl extra is not installed (pip install 'agentgym[skyrl]')"
    )
    import agentgym.integrations.skyrl  # noqa: F401
    from agentgym.data import DataNotFoundError

    try:
        observations, rewards, actions = _expert_text_play(env_id, seed=6)
    except DataNotFoundError as exc:
        pytest.skip(str(exc))
    env = skyrl_gym.make(env_id, env_config={}, extras={"seed": 6})
    chat, meta = env.init([{"role": "user", "content": "Play."}])
    assert chat[-1]["content"] == "Play.\n\n" + observations[0]
    got_rewards, done, turns = [], False, 0
    for i, action in enumerate(actions):
        out = env.step(f"<think>the expert says so</think><action>{action}</action>")
        got_rewards.append(out["reward"])
        done = out["done"]
        assert out["postprocessed_action"] == action
        if not done:
            assert out["observations"] == [{"role": "user", "content": observations[i + 1]}]
        turns += 1
    assert done and got_rewards == rewards
    assert env.get_metrics() == {"return": pytest.approx(sum(rewards)), "turns": turns}
