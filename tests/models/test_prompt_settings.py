"""A trained model folder knows its prompt: SFT writes agentgym_prompt.json, `agentgym eval --agent hf:<folder>` uses it."""

from __future__ import annotations

import json

import pytest

from agentgym.cli import main as cli_main
from agentgym.episodes import read_episodes
from agentgym.models.prompt_settings import PROMPT_FILE, agent_defaults, read_prompt_settings
from baselines import sft

ENV = "agentgym/FrozenLakeNotSlippery-v0"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny model SFT'd with a non-default prompt: ERL cells template, no history, 16-token answers."""
    tmp = tmp_path_factory.mktemp("prompted")
    args = sft.Args(
        model="tiny",
        env_id=ENV,
        output_dir=str(tmp),
        exp_name="sft_cells",
        expert_episodes=4,
        total_iterations=1,
        prompt_style="erl-cells",
        history_length=0,
        max_new_tokens=16,
        progress=False,
        plot=False,
    )
    sft.train(args)
    return args.run_dir / "model"


def test_sft_records_the_prompt_settings_beside_the_weights(model_folder):
    saved = read_prompt_settings(model_folder)
    assert saved["env_id"] == ENV
    assert saved["style"] == "erl-cells" and saved["template"] == "frozenlake-erl-cells@1"
    assert saved["history_length"] == 0 and saved["max_new_tokens"] == 16
    assert saved["answer_format"] == "<reason>...</reason>\n```ACTION```"
    assert saved["trained_by"] == "sft"


def _eval(folder, log, *flags, capsys):
    rc = cli_main(
        ["eval", "--env", ENV, "--agent", f"hf:{folder}", "--episodes", "1", "--log", str(log), "--quiet", *flags]
    )
    assert rc == 0
    return read_episodes(log)[0].agent_config, capsys.readouterr().err


def test_eval_without_flags_prompts_as_training_did_and_says_so(model_folder, tmp_path, capsys):
    config, err = _eval(model_folder, tmp_path / "plain.jsonl", capsys=capsys)
    assert config["template_style"] == "erl-cells"
    assert config["history_length"] == 0 and config["max_new_tokens"] == 16
    notes = [line for line in err.splitlines() if PROMPT_FILE in line]
    assert len(notes) == 1 and "style erl-cells, history_length 0, max_new_tokens 16" in notes[0]


def test_flags_override_the_recorded_settings(model_folder, tmp_path, capsys):
    config, err = _eval(
        model_folder, tmp_path / "flags.jsonl", "--history-length", "1", "--style", "erl", capsys=capsys
    )
    assert config["template_style"] == "erl" and config["history_length"] == 1
    assert config["max_new_tokens"] == 16  # not given: still the recorded one
    assert "(max_new_tokens 16;" in err


def test_a_folder_without_the_file_changes_nothing(tmp_path):
    assert agent_defaults(tmp_path, {}) == ({}, None)
    (tmp_path / PROMPT_FILE).write_text(json.dumps(["not", "an", "object"]))
    with pytest.raises(ValueError, match="JSON object"):
        read_prompt_settings(tmp_path)
