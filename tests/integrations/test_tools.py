"""The tool form of every env family: the expert scores exactly the same through tool calls as through text."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.data import DataNotFoundError
from agentgym.integrations.tools import FAMILIES, ToolCallError, ToolEnv, family, openai_tools, to_action, to_tool_call

#: (env id, make kwargs, reset kwargs): one per family, plus the ERL HotpotQA variant (answers in \boxed{}).
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("agentgym/Sokoban-v0", {}, {"seed": 3}),
    ("agentgym/Sokoban-v0", {}, {"seed": 11}),
    ("agentgym/FrozenLake-v0", {}, {"seed": 5}),
    ("agentgym/FrozenLakeNotSlippery-v0", {}, {"seed": 5}),
    ("agentgym/WebShop-v0", {}, {"seed": 0, "options": {"split": "test", "index": 2}}),
    ("agentgym/HotpotQA-v0", {}, {"seed": 3}),
    ("agentgym/HotpotQAERL-v0", {}, {"seed": 4}),
    ("agentgym/ALFWorld-v0", {"split": "valid_seen"}, {"seed": 0, "options": {"split": "valid_seen", "index": 1}}),
]


def _make(env_id: str, **kwargs: Any) -> Any:
    try:
        env = gym.make(env_id, **kwargs)
        env.reset(seed=0, options={"split": "valid_seen", "index": 0} if "ALFWorld" in env_id else None)
        return env
    except (ImportError, DataNotFoundError, gym.error.DependencyNotInstalled) as exc:
        pytest.skip(f"{env_id} unavailable here ({type(exc).__name__}: {exc})")


def _play_text(env_id: str, make_kwargs: dict, reset_kwargs: dict) -> tuple[list[str], list[float], bool]:
    env = _make(env_id, **make_kwargs)
    obs, info = env.reset(**reset_kwargs)
    observations, rewards, done = [obs], [], False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        observations.append(obs)
        rewards.append(float(reward))
        done = terminated or truncated
    return observations, rewards, bool(info["success"])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id,make_kwargs,reset_kwargs", CASES)
def test_expert_scores_the_same_through_tools(env_id, make_kwargs, reset_kwargs):
    text_obs, text_rewards, text_success = _play_text(env_id, make_kwargs, reset_kwargs)
    tool_env = ToolEnv(env_id, **make_kwargs)
    tool_obs = [tool_env.reset(**reset_kwargs)]
    rewards = []
    while not tool_env.done:
        name, args = to_tool_call(tool_env.family, tool_env.env.unwrapped.expert_action())
        assert name in tool_env.family.names
        before = tool_env.total_reward
        tool_obs.append(tool_env.call(name, args))
        rewards.append(tool_env.total_reward - before)
    assert rewards == pytest.approx(text_rewards, abs=1e-12)
    assert tool_env.total_reward == pytest.approx(sum(text_rewards))
    assert tool_env.success == text_success
    assert text_success or "FrozenLake-v0" in env_id  # the expert solves all but the slippery lake's bad luck
    if tool_env.family.show_admissible:
        # the observation is the env's, followed by the commands the game accepts now
        assert all(t.startswith(o) for t, o in zip(tool_obs, text_obs))
        assert "Admissible commands: " in tool_obs[0]
    else:
        assert tool_obs == text_obs


def test_every_registered_family_has_a_tool_form():
    ids = [i for i in gym.registry if i.startswith("agentgym/") and "Echo" not in i]
    assert {family(i).name for i in ids} == set(FAMILIES)
    with pytest.raises(ToolCallError, match="no tool form"):
        family("agentgym/EchoBandit-v0")
    with pytest.raises(ToolCallError, match="not a registered env id"):
        family("agentgym/Nope-v0")


def test_openai_schemas_name_each_tool_and_its_argument():
    schemas = {s["function"]["name"]: s["function"] for s in openai_tools("agentgym/HotpotQA-v0")}
    assert set(schemas) == {"search", "lookup", "finish"}
    assert schemas["finish"]["parameters"] == {
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "the answer"}},
        "required": ["answer"],
    }
    (move,) = openai_tools("agentgym/Sokoban-v0")
    assert move["type"] == "function"
    assert move["function"]["parameters"]["properties"]["direction"]["enum"] == ["up", "down", "left", "right"]


def test_tool_calls_map_one_to_one_onto_text_actions():
    assert to_action("agentgym/WebShop-v0", "search", '{"query": "red shirt"}') == "search[red shirt]"
    assert to_action("agentgym/WebShop-v0", "click", {"button": "buy now"}) == "click[buy now]"
    assert to_action("agentgym/ALFWorld-v0", "act", {"command": "go to desk 1"}) == "go to desk 1"
    assert to_tool_call("agentgym/HotpotQA-v0", "lookup[born]") == ("lookup", {"keyword": "born"})
    assert to_tool_call("agentgym/HotpotQAERL-v0", "so \\boxed{Paris}") == ("finish", {"answer": "Paris"})
    with pytest.raises(ToolCallError, match="unknown tool 'buy'"):
        to_action("agentgym/WebShop-v0", "buy", {})
    with pytest.raises(ToolCallError, match="not valid JSON"):
        to_action("agentgym/Sokoban-v0", "move", "{direction: up")
    with pytest.raises(ToolCallError, match="needs a string argument 'direction'"):
        to_action("agentgym/Sokoban-v0", "move", {"dir": "up"})


def test_bad_calls_and_calls_after_the_end_do_not_step_the_env():
    env = ToolEnv("agentgym/FrozenLakeNotSlippery-v0")
    env.reset(seed=1)
    assert env.call("jump", {}).startswith("Invalid tool call: unknown tool 'jump'")
    assert env.actions == []
    # an argument outside the enum is still played: the env itself judges it (invalid, state unchanged)
    env.call("move", {"direction": "sideways"})
    assert env.actions == ["sideways"] and env.info["is_action_valid"] is False
    while not env.done:
        env.call("move", {"direction": env.env.unwrapped.expert_action()})
    n = len(env.actions)
    assert env.call("move", {"direction": "up"}) == "The episode is over; no more actions are played."
    assert len(env.actions) == n
