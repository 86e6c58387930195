"""Reward shaping primitives: verl-agent's row scores and each turn's penalty."""

from __future__ import annotations

import pytest

from agentgym.rl.rewards import step_row_scores, turn_penalties

# Episode 0: valid, invalid, success -> shaped rewards 0, -0.1, 10. Episode 1: one invalid turn -> -0.1.
META = [
    {"episode": 0, "t": 0, "reward": 0.0, "valid": True},
    {"episode": 0, "t": 1, "reward": -0.1, "valid": False},
    {"episode": 0, "t": 2, "reward": 10.0, "valid": True},
    {"episode": 1, "t": 0, "reward": -0.1, "valid": False},
]


def test_step_row_scores_are_episode_reward_minus_own_penalty():
    # verl-agent: every row carries its episode's unpenalised reward (10 / 0) minus its own turn's penalty
    assert step_row_scores(META, 0.1) == pytest.approx([10.0, 9.9, 10.0, -0.1])


def test_turn_penalties_read_the_penalty_else_validity():
    assert turn_penalties(META, 0.1) == [0.0, 0.1, 0.0, 0.1]
    # an explicit penalty wins (``invalid_penalty_on="format"``: a rejected but well-formed action pays none)
    assert turn_penalties([{"valid": False, "penalty": 0.0}], 0.1) == [0.0]
