"""The eval progress bar shows seconds per turn and an estimate of the time left, from the first turn on."""

from __future__ import annotations

from agentgym import evaluation


def test_the_estimate_uses_the_step_limit_until_an_episode_ends_then_its_length(monkeypatch):
    clock = iter([0.0, 10.0, 20.0, 30.0])
    monkeypatch.setattr(evaluation.time, "perf_counter", lambda: next(clock))
    pace = evaluation._Pace(episodes=2, turn_limit=50)
    # 10 s for the first turn; 2 episodes x 50 turns (the limit) - 1 played = 99 turns at 10 s each
    assert pace.turn(None) == "turns=1, 10.0 s/turn, ~16 min left"
    # an episode of 2 turns ends: 2 x 2 - 2 played = 2 turns left at 10 s
    assert pace.turn(2) == "turns=2, 10.0 s/turn, ~20 s left"
    assert pace.turn(None) == "turns=3, 10.0 s/turn, ~10 s left"


def test_no_limit_and_no_finished_episode_gives_no_estimate(monkeypatch):
    clock = iter([0.0, 4.0])
    monkeypatch.setattr(evaluation.time, "perf_counter", lambda: next(clock))
    assert evaluation._Pace(episodes=3, turn_limit=None).turn(None) == "turns=1, 4.0 s/turn"


def test_the_registered_step_limit_is_found():
    import agentgym  # noqa: F401  (registers the ids)

    assert evaluation._turn_limit("agentgym/Sokoban-v0") > 0
    assert evaluation._turn_limit("agentgym/NoSuchEnv-v0") is None
