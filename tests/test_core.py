"""The TextEnv base class and the small helpers of agentgym.core."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium import spaces

import agentgym
from agentgym.core import (
    CHARSET,
    MAX_ACTION_LENGTH,
    MAX_TEXT_LENGTH,
    TextEnv,
    action_length_error,
    env_version,
    normalize_action,
    text_space,
)
from agentgym.envs.frozen_lake import SYMBOLS as FROZEN_LAKE_SYMBOLS
from agentgym.envs.sokoban.env import SYMBOL_SETS


class Counter(TextEnv):
    """Counts steps; invalid on anything but 'tick'."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = 0
        self._last_observation = "0"
        return "0", self.make_info(task_id="count")

    def step(self, action):
        ok = normalize_action(action) == "tick"
        self.n += ok
        self._last_observation = str(self.n)
        info = self.make_info(task_id="count", success=self.n >= 2, is_action_valid=ok, invalid_reason="say tick")
        return self._last_observation, float(ok), self.n >= 2, False, info


def test_make_info_has_the_required_keys():
    env = Counter()
    info = env.make_info(task_id="t", extra_key=3)
    assert info == {"is_action_valid": True, "success": False, "task_id": "t", "extra_key": 3}
    bad = env.make_info(task_id="t", is_action_valid=False)
    assert bad["invalid_reason"] == "invalid action"  # a reason is always present when invalid
    assert "invalid_reason" not in env.make_info(task_id="t", invalid_reason="ignored when valid")


def test_spaces_render_and_expert_default():
    env = Counter(render_mode="ansi")
    assert isinstance(env.observation_space, spaces.Text) and env.observation_space.max_length == MAX_TEXT_LENGTH
    env.reset(seed=0)
    env.step("tick")
    assert env.render() == "1"
    assert Counter().render() is None
    with pytest.raises(NotImplementedError, match="no expert"):
        env.expert_action()
    with pytest.raises(ValueError, match="render_mode"):
        Counter(render_mode="human")


def test_a_minimal_text_env_passes_check_env():
    from gymnasium.utils.env_checker import check_env

    check_env(Counter(), skip_render_check=True)


def test_charset_covers_every_symbol_the_grid_envs_print():
    symbols = set("".join(FROZEN_LAKE_SYMBOLS.values()))
    for table in SYMBOL_SETS.values():
        symbols |= set("".join(table.values()))
    assert symbols <= CHARSET and "\n" in CHARSET
    assert text_space().contains("#_O√X\nPS")


def test_env_version():
    assert env_version("agentgym/Sokoban-v0") == 0
    assert env_version("agentgym/Sokoban8x8B2-v12") == 12
    for bad in ["agentgym/Sokoban", "agentgym/Sokoban-vX", "x-v"]:
        with pytest.raises(ValueError, match="-vN"):
            env_version(bad)


def test_normalize_action():
    assert normalize_action(None) == ""
    assert normalize_action(b"up\xff") == "up\ufffd"
    assert normalize_action(3) == "3"
    assert normalize_action("left") == "left"


def test_importing_agentgym_registers_envs_lazily():
    assert agentgym.TextEnv is TextEnv
    spec = gym.spec("agentgym/Sokoban-v0")
    assert isinstance(spec.entry_point, str)  # a string: importing agentgym imports no env module
    assert gym.make("agentgym:agentgym/Sokoban-v0").spec.id == "agentgym/Sokoban-v0"


def test_action_length_limit_is_the_action_space_bound():
    """Actions up to MAX_ACTION_LENGTH characters are parsed; one more is invalid with a reason saying so."""
    assert TextEnv().action_space.max_length == MAX_ACTION_LENGTH == 65_536
    assert action_length_error("x" * MAX_ACTION_LENGTH) is None
    reason = action_length_error("x" * (MAX_ACTION_LENGTH + 1))
    assert reason is not None and "too long" in reason and "65,537" in reason and "65,536" in reason
