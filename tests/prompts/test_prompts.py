"""Prompt templates: the answer parser and the shape of each env family's prompt."""

from __future__ import annotations

import pytest

from agentgym.agents.base import AgentInput
from agentgym.prompts import get_template, parse_action
from agentgym.prompts.grid import FrozenLakeTemplate, SokobanErlTemplate, SokobanTemplate
from agentgym.prompts.hotpotqa import HotpotQATemplate
from agentgym.prompts.verl_agent import ALFWorldTemplate, GenericTemplate, WebShopTemplate


# -- parsing ---------------------------------------------------------------------------------------
def test_parse_valid_answer():
    p = parse_action("<think>go to the fridge first</think><action>go to fridge 1</action>", require_think=True)
    assert p.valid and p.action == "go to fridge 1" and p.reason is None
    assert p.think == "go to the fridge first"


def test_parse_missing_action_tags_is_invalid():
    p = parse_action("<think>hmm</think> go to fridge 1")
    assert not p.valid and p.action == "" and "action" in p.reason


def test_parse_unclosed_action_is_invalid():
    p = parse_action("<think>x</think><action>go to fri")
    assert not p.valid and p.action == ""


def test_parse_several_actions_takes_the_last():
    p = parse_action("<action>up</action> no wait <action>left</action>\n<action>  down </action>")
    assert p.valid and p.action == "down"


def test_parse_multiline_and_case_insensitive_tags():
    p = parse_action("<THINK>a\nb</THINK><Action>\nsearch[red shirt]\n</Action>")
    assert p.valid and p.action == "search[red shirt]"


def test_parse_unicode_action():
    p = parse_action("<think>café</think><action>click[Crème brûlée — 12 oz ☕]</action>")
    assert p.valid and p.action == "click[Crème brûlée — 12 oz ☕]"


def test_parse_empty_action_is_invalid():
    assert not parse_action("<action>   </action>").valid


def test_parse_require_think():
    assert parse_action("<action>look</action>").valid
    p = parse_action("<action>look</action>", require_think=True)
    assert not p.valid and "think" in p.reason and p.action == "look"


def test_parse_rejects_cjk_like_verl_agent():
    p = parse_action("<think>我应该去冰箱</think><action>go to fridge 1</action>", reject_cjk=True)
    assert not p.valid and p.action == "go to fridge 1"
    assert parse_action("<think>我</think><action>look</action>").valid  # only when asked


def test_template_parse_uses_its_rules():
    alf = get_template("agentgym/ALFWorld-v0")
    assert not alf.parse("<action>look</action>").valid  # verl-agent requires <think>
    assert alf.parse("<think>t</think><action>look</action>").valid
    assert get_template("agentgym/Sokoban-v0").parse("<action>Up</action>").valid


# -- template lookup -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env_id, cls",
    [
        ("agentgym/ALFWorld-v0", ALFWorldTemplate),
        ("agentgym/WebShop-v0", WebShopTemplate),
        ("agentgym/Sokoban-v0", SokobanTemplate),
        ("agentgym/Sokoban8x8B2-v0", SokobanTemplate),
        ("agentgym/FrozenLakeNotSlippery-v0", FrozenLakeTemplate),
        ("agentgym/HotpotQA-v0", HotpotQATemplate),
        ("agentgym/EchoBandit-v0", GenericTemplate),
    ],
)
def test_get_template_per_family(env_id, cls):
    t = get_template(env_id)
    assert type(t) is cls
    assert t.version and t.source and t.id == f"{t.name}@{t.version}"


def test_get_template_style_and_unknown_style():
    assert type(get_template("agentgym/Sokoban-v0", "erl")) is SokobanErlTemplate
    with pytest.raises(ValueError, match="ragen"):
        get_template("agentgym/Sokoban-v0", "nope")


# -- prompt contents -------------------------------------------------------------------------------
def _alf_input(turns: int) -> AgentInput:
    history = [(f"obs {i}", f"act {i}") for i in range(1, turns + 1)]
    return AgentInput(
        env_id="agentgym/ALFWorld-v0",
        observation="You arrive at countertop 1. On the countertop 1, you see a mug 1.",
        info={"admissible_actions": ["take mug 1 from countertop 1", "look", "help"]},
        first_observation="-= Welcome to TextWorld, ALFRED! =-\n\nYour task is to: put a clean mug in coffeemachine.",
        history=history,
    )


def test_verl_agent_prompt_structure():
    msgs = get_template("agentgym/ALFWorld-v0").build(_alf_input(3), history_length=2)
    assert [m["role"] for m in msgs] == ["user"]
    text = msgs[0]["content"]
    assert "Your task is to: put a clean mug in coffeemachine." in text
    assert "already taken 3 step(s)" in text and "most recent 2 observations" in text
    assert "[Observation 2: 'obs 2', Action 2: 'act 2']" in text and "Observation 3: 'obs 3'" in text
    assert "obs 1" not in text  # only the last K pairs
    assert "step 4" in text and "countertop 1" in text
    assert "'take mug 1 from countertop 1', 'look'" in text and "'help'" not in text  # verl-agent drops help
    assert "<think> </think>" in text and "<action> </action>" in text


def test_verl_agent_first_turn_has_no_history_lines():
    text = get_template("agentgym/ALFWorld-v0").build(_alf_input(0))[0]["content"]
    assert "Prior to this step" not in text and "Your current observation is:" in text


def test_lesson_goes_right_after_task_and_reflection_before_current_turn():
    t = get_template("agentgym/ALFWorld-v0")
    text = t.build(_alf_input(2), lesson="Clean it at the sinkbasin first.", reflection="I never took the mug.")[0][
        "content"
    ]
    task_at = text.index("Your task is to:")
    lesson_at = text.index(t.lesson_heading)
    refl_at = text.index("I never took the mug.")
    assert task_at < lesson_at < text.index("Clean it at the sinkbasin first.") < text.index("Prior to this step")
    assert refl_at < text.index("You are now at step")


def test_system_override_adds_system_message():
    msgs = get_template("agentgym/ALFWorld-v0").build(_alf_input(1), system="RULEBOOK: always look first.")
    assert msgs[0] == {"role": "system", "content": "RULEBOOK: always look first."}
    sok = get_template("agentgym/Sokoban-v0")
    inp = AgentInput(env_id="agentgym/Sokoban-v0", observation="#####\n#P_O#\n#####", info={})
    assert sok.build(inp)[0]["role"] == "system"  # RAGEN's game-player system line
    assert sok.build(inp, system="custom")[0]["content"] == "custom"


def test_ragen_and_erl_grid_prompts():
    inp = AgentInput(
        env_id="agentgym/Sokoban-v0",
        observation="######\n#P X O#\n######",
        info={},
        history=[("grid a", "Left"), ("grid b", "Up"), ("grid c", "Right")],
    )
    ragen = get_template("agentgym/Sokoban-v0").build(inp, history_length=2)[-1]["content"]
    assert "push" in ragen and "√ box on target" in ragen
    assert "Turn 4:" in ragen and "Turn 3:" in ragen and "grid a" not in ragen
    assert "7 actions left" in ragen
    erl = get_template("agentgym/Sokoban-v0", "erl").build(inp)[-1]["content"]
    assert "push" not in erl and "√" not in erl and "######" in erl  # ERL gives no rules or legend


def test_erl_cells_draws_one_cell_per_word_and_answers_like_erl():
    inp = AgentInput(
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        observation="__OO\n_P__\n_OO_\n__G_",
        info={},
        history=[("P_OO\n____\n_OO_\n__G_", "down")],
    )
    erl, cells = (get_template(inp.env_id, s) for s in ("erl", "erl-cells"))
    text = cells.build(inp, history_length=1)[-1]["content"]
    board = text.split("Current board:\n")[1].split("\nAvailable moves")[0]
    assert board.split("\n") == ["row 1: _ _ O O", "row 2: _ P _ _", "row 3: _ O O _", "row 4: _ _ G _"]
    assert "row 1: P _ O O\nrow 2: _ _ _ _" in text and "move: down" in text  # the history's boards too
    assert "_P__" not in text and "_P__" in erl.build(inp)[-1]["content"]
    assert (cells.name, erl.name) == ("frozenlake-erl-cells", "frozenlake-erl")  # recorded in every log
    answer = cells.format_answer("P at row 2 col 2.", "down")
    assert cells.parse(answer).action == erl.parse(answer).action == "down"


def test_history_length_minus_one_shows_everything():
    text = get_template("agentgym/ALFWorld-v0").build(_alf_input(5), history_length=-1)[0]["content"]
    assert all(f"obs {i}" in text for i in range(1, 6))


def test_react_hotpotqa_prompt():
    inp = AgentInput(
        env_id="agentgym/HotpotQA-v0",
        observation="Arthur's Magazine (1844-1846) was an American literary periodical.",
        info={"question": "Which magazine was started first, Arthur's Magazine or First for Women?"},
        first_observation="Question: ...",
        history=[("Question: ...", "search[Arthur's Magazine]")],
    )
    text = get_template("agentgym/HotpotQA-v0").build(inp, history_length=-1)[-1]["content"]
    assert "search[entity]" in text and "lookup[keyword]" in text and "finish[answer]" in text
    assert "Question: Which magazine was started first" in text
    assert "Action 1: search[Arthur's Magazine]\nObservation 1: Arthur's Magazine (1844-1846)" in text
