"""EchoBandit (the LLM stack's test env): the plain and the hidden-answer variants."""

from __future__ import annotations

import gymnasium as gym

import agentgym  # noqa: F401
from agentgym.envs.echo import WORDS


def test_plain_variant_names_the_word():
    env = gym.make("agentgym/EchoBandit-v0")
    obs, info = env.reset(seed=3)
    target = info["task_id"]
    assert obs == f"Say the word: {target}." and target in info["admissible_actions"]
    obs, r, term, _, _ = env.step(target.upper() + " ")
    assert (r, term, obs) == (1.0, True, "Correct.")


def test_hidden_variant_shows_a_cue_and_the_feedback_gives_the_answer():
    env = gym.make("agentgym/EchoBanditHidden-v0")
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        target = info["task_id"]
        cue = WORDS[(WORDS.index(target) - 1) % len(WORDS)]
        assert obs == f"Say the word after: {cue}." and target not in obs
        wrong = next(w for w in info["admissible_actions"] if w != target)
        obs, r, term, trunc, info = env.step(wrong)
        assert (r, term, obs) == (0.0, False, f"Wrong. The word after {cue} is {target}.")
        obs, r, term, _, info = env.step(target)
        assert (r, term, info["success"]) == (1.0, True, True)
    # same seed, same task in both variants: only the observation differs
    _, a = gym.make("agentgym/EchoBandit-v0").reset(seed=5)
    _, b = env.reset(seed=5)
    assert a["task_id"] == b["task_id"] and a["admissible_actions"] == b["admissible_actions"]
