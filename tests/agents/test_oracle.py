"""The privileged grid analyser: the mistake it names, the better move, and the lesson/reflection text formats."""

from __future__ import annotations

import json

import pytest

from agentgym.agent_io import EpisodeSpec, seed_specs
from agentgym.agents import ExpertAgent, NoisyExpertAgent, RandomAgent, ScriptedAgent
from agentgym.agents.oracle import (
    OracleAnalyser,
    UnsupportedEnv,
    critique,
    oracle_lesson,
    oracle_lesson_reply,
    oracle_reflection,
    oracle_reflection_reply,
    varied_critique,
)
from agentgym.episodes import Episode
from agentgym.evaluation import run_episodes
from agentgym.prompts.lesson import parse_lesson
from agentgym.prompts.reflection import parse_reflection
from agentgym.rl.hooks import LessonWriter

GRID_ENVS = ["agentgym/FrozenLakeNotSlippery-v0", "agentgym/FrozenLake-v0", "agentgym/Sokoban-v0"]


def play(env_id, agent, spec: EpisodeSpec) -> Episode:
    return run_episodes(env_id, agent, [spec]).episodes[0]


# a 4x4 lake: S at row 1 col 1, the hole right of it, the goal below-right
LAKE = ["SHFF", "FFFF", "FHFF", "FFFG"]


def test_stepping_into_a_hole_is_named_with_place_and_better_move():
    ep = play(
        "agentgym/FrozenLakeNotSlippery-v0",
        ScriptedAgent(["down", "right", "down"]),
        EpisodeSpec(seed=0, options={"map": LAKE}),
    )
    assert not ep.success and len(ep.steps) == 3  # down, right, then down into the hole at row 3 col 2
    c = critique(ep)
    assert (c.mistake_step, c.kind, c.where) == (3, "hole", "row 2 col 2")
    assert c.better == "right" and len(c.plan) == 6
    lesson = oracle_lesson(ep, c)
    assert "'down' stepped onto a hole" in lesson["episode_summary"] and "'right'" in lesson["episode_summary"]
    assert lesson["episode_skill"].endswith("From row 2 col 2 here, move right.")
    refl = parse_reflection(oracle_reflection_reply(ep))
    assert "There, move right instead." in refl
    # the plan as where-to-do-what: P's cell before each of the solver's six moves
    assert "Plan from the start: at row 1 col 1 go down, at row 2 col 1 go " in refl
    assert refl.count(" go ") == 6 and "at row 4 col 3 go right." in refl


def test_a_wasted_move_on_a_successful_episode_is_a_detour_not_a_failure():
    moves = ["up", "down", "right", "right", "down", "down", "right"]
    ep = play("agentgym/FrozenLakeNotSlippery-v0", ScriptedAgent(moves), EpisodeSpec(seed=0, options={"map": LAKE}))
    assert ep.success
    c = critique(ep)
    assert (c.mistake_step, c.kind) == (1, "edge")
    lesson = oracle_lesson(ep, c)
    assert lesson["episode_summary"].startswith("Reached the goal (G) in 7 moves")
    assert "shortest plan" in lesson["episode_skill"]


def test_sokoban_push_against_the_wall_is_stuck_and_the_solver_move_is_better():
    # the target is bottom left; pushing the box right puts it against the right wall, from where it can never
    # be pushed left again
    level = "#####\n#___#\n#PX_#\n#O__#\n#####"
    ep = play(
        "agentgym/Sokoban-v0", ScriptedAgent(["right", "up", "up"]), EpisodeSpec(seed=0, options={"level": level})
    )
    c = critique(ep)
    assert not ep.success and (c.mistake_step, c.kind) == (1, "stuck") and "row 3 col 4" in c.mistake
    assert c.better == c.plan[0] and c.plan_cells[0] == "row 3 col 2" and len(c.plan_cells) == len(c.plan)
    wall = play("agentgym/Sokoban-v0", ScriptedAgent(["left", "down"]), EpisodeSpec(seed=0, options={"level": level}))
    assert (critique(wall).mistake_step, critique(wall).kind) == (1, "wall")


def test_sokoban_lesson_on_a_solved_episode_counts_the_moves_without_listing_them():
    # a detour (up, then back down) before the push left: solved in 3 moves, the solver's plan takes 1
    level = "#####\n#___#\n#OXP#\n#___#\n#####"
    ep = play(
        "agentgym/Sokoban-v0",
        ScriptedAgent(["up", "down", "left"]),
        EpisodeSpec(seed=0, options={"level": level}),
    )
    assert ep.success
    lesson = oracle_lesson(ep)
    # the played moves are not copied (SmolLM2 looped on them), the plan in the skill is the solver's
    assert lesson["episode_summary"].startswith(
        "Reached every box on a target in 3 moves; the shortest solution takes 1."
    )
    assert "up, down" not in lesson["episode_summary"] and "'up'" in lesson["episode_summary"]
    assert lesson["episode_skill"].endswith("Here the shortest plan was left.")


@pytest.mark.parametrize("env_id", ["agentgym/FrozenLakeNotSlippery-v0", "agentgym/Sokoban-v0"])
def test_expert_episodes_have_no_mistake_and_the_plan_is_what_the_expert_played(env_id):
    for ep in run_episodes(env_id, ExpertAgent(), seed_specs(6, seed=11)).episodes:
        c = critique(ep)
        assert ep.success and c.mistake_step is None and c.plan == c.actions


@pytest.mark.parametrize("env_id", GRID_ENVS)
def test_oracle_lessons_and_reflections_always_parse_and_are_deterministic(env_id):
    eps = run_episodes(env_id, RandomAgent(seed=3), seed_specs(12, seed=40)).episodes
    for ep in eps:
        reply = oracle_lesson_reply(ep)
        lesson = parse_lesson(reply)
        assert lesson.lesson == json.loads(reply)["episode_skill"]
        assert reply == oracle_lesson_reply(Episode.from_dict(json.loads(json.dumps(ep.to_dict()))))
        if not ep.success:
            assert parse_reflection(oracle_reflection_reply(ep)) == oracle_reflection(ep)
            rule = oracle_reflection(ep, "rulebook", system_prompt="RULES")
            assert parse_reflection(oracle_reflection_reply(ep, "rulebook", system_prompt="RULES"), "rulebook") == rule
            assert rule.startswith("RULES\n\n")


def test_slippery_lake_rates_moves_by_their_chance_of_reaching_the_goal():
    eps = run_episodes("agentgym/FrozenLake-v0", RandomAgent(seed=0), seed_specs(20, seed=0)).episodes
    kinds = {critique(ep).kind for ep in eps}
    assert "risky" in kinds and kinds <= {"risky", "slip", "budget", "invalid", ""}
    risky = next(critique(ep) for ep in eps if critique(ep).kind == "risky")
    assert "probability" in risky.mistake and len(risky.plan) == 1  # slippery: the best first move only


def test_lesson_writer_with_the_oracle_parses_every_lesson(tmp_path):
    eps = run_episodes("agentgym/Sokoban-v0", RandomAgent(seed=1), seed_specs(8, seed=0)).episodes
    writer = LessonWriter(OracleAnalyser(), max_retries=0)
    for ep in eps:
        writer.on_episode_end(ep)
    writer.flush()
    m = writer.metrics()
    assert m["seed/lesson_parse_rate"] == 1.0 and m["seed/lesson_rate"] == 1.0
    assert all(ep.extras["lesson"] == oracle_lesson(ep)["episode_skill"] for ep in eps)


def test_other_envs_are_refused():
    ep = run_episodes("agentgym/EchoBandit-v0", RandomAgent(seed=0), seed_specs(1)).episodes[0]
    with pytest.raises(UnsupportedEnv, match="FrozenLake and Sokoban"):
        critique(ep)


def test_noisy_expert_is_the_expert_at_zero_noise_and_makes_mistakes_otherwise():
    env = "agentgym/FrozenLakeNotSlippery-v0"
    clean = run_episodes(env, NoisyExpertAgent(0.0, seed=1), seed_specs(8, seed=5)).episodes
    expert = run_episodes(env, ExpertAgent(), seed_specs(8, seed=5)).episodes
    assert [[s.action for s in e.steps] for e in clean] == [[s.action for s in e.steps] for e in expert]
    noisy = run_episodes(env, NoisyExpertAgent(0.5, seed=1), seed_specs(40, seed=5)).episodes
    assert 0 < sum(e.success for e in noisy) < 40
    with pytest.raises(ValueError, match="noise"):
        NoisyExpertAgent(1.5)


@pytest.mark.parametrize("env_id", ["agentgym/FrozenLakeLetters-v0", "agentgym/SokobanLetters-v0"])
def test_the_text_names_cells_in_the_envs_own_letters(env_id):
    eps = run_episodes(env_id, RandomAgent(seed=2), seed_specs(6, seed=3)).episodes
    texts = " ".join(oracle_reflection(ep) for ep in eps if not ep.success)
    assert "(A at row" in texts and "(O)" not in texts and "(P at" not in texts


def test_scripted_agent_plays_its_moves_then_repeats_the_last():
    ep = play(
        "agentgym/FrozenLakeNotSlippery-v0", ScriptedAgent(["down", "up"]), EpisodeSpec(seed=0, options={"map": LAKE})
    )
    assert [s.action for s in ep.steps][:3] == ["down", "up", "up"]
    with pytest.raises(ValueError, match="at least one move"):
        ScriptedAgent([])


def test_varied_plan_keeps_the_attempts_good_prefix_and_draws_among_the_shortest_paths():
    import numpy as np

    # an open 4x4 lake: from row 1 col 1 every right/down order is a shortest path to the goal
    lake = ["SFFF", "FFFF", "FFFF", "FFFG"]
    env = "agentgym/FrozenLakeNotSlippery-v0"
    ep = play(env, ScriptedAgent(["right", "up", "up"]), EpisodeSpec(seed=0, options={"map": lake}))
    c0 = critique(ep)
    assert not ep.success and (c0.mistake_step, c0.kind) == (2, "edge")
    plans = set()
    for seed in range(12):
        c = varied_critique(ep, np.random.default_rng(seed))
        assert c.plan[0] == "right" and len(c.plan) == len(c0.plan) == 6  # the good prefix, then a shortest path
        assert c.better == c.plan[1] and c.mistake == c0.mistake
        assert c.plan_choices[:2] == [2, 2] and c.plan_choices[-1] == 1  # on the last row/column one way remains
        won = play(env, ScriptedAgent(c.plan), EpisodeSpec(seed=0, options={"map": lake}))
        assert won.success and len(won.steps) == 6
        assert f"There, move {c.better} instead." in oracle_reflection(ep, crit=c)
        assert oracle_lesson(ep, c)["episode_skill"].endswith(f"From row 1 col 2 here, move {c.better}.")
        plans.add(tuple(c.plan))
    assert len(plans) > 3  # drawn, not the expert's one path
    assert varied_critique(ep, np.random.default_rng(0)).plan == varied_critique(ep, np.random.default_rng(0)).plan
    won = play(env, ExpertAgent(), EpisodeSpec(seed=0, options={"map": lake}))
    assert varied_critique(won, np.random.default_rng(0)).plan == critique(won).plan  # successes: unchanged


def test_varied_sokoban_plan_is_a_shortest_solution_through_the_mistake_drawn_among_several():
    import numpy as np

    env = "agentgym/Sokoban-v0"
    eps = run_episodes(env, RandomAgent(seed=1), seed_specs(40, seed=5)).episodes
    drawn = 0
    for ep in eps:
        c0 = critique(ep)
        if ep.success or c0.kind in ("budget", ""):
            continue
        plans = set()
        for seed in range(6):
            c = varied_critique(ep, np.random.default_rng(seed))
            k = c0.mistake_step
            assert c.plan[: k - 1] == c0.actions[: k - 1] and len(c.plan) == len(c0.plan)  # shortest, through it
            assert c.better == c.plan[k - 1] and c.mistake == c0.mistake and len(c.plan_choices) == len(c.plan)
            assert c.plan[k - 1] != c0.actions[k - 1] or c0.kind == "invalid"  # the mistake is not a shortest move
            won = play(env, ScriptedAgent(c.plan), EpisodeSpec(seed=ep.seed, options=ep.options))
            assert won.success and len(won.steps) == len(c.plan)
            plans.add(tuple(c.plan))
        drawn += len(plans) > 1
    assert drawn > 0  # levels with several shortest solutions: the plan is drawn, not the solver's one
