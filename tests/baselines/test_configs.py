"""Every config (its ``base:`` files resolved) parses into its baseline's Args, table rows with the shared protocol
values; each table setting is pinned to its cited value and source; docs/results/protocol.md's protocol table is
current."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from agentgym.rl.config import config_chain, load_config_file, make_args, parse_args

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "baselines" / "configs"
TABLE = sorted(CONFIGS.glob("*.yaml"))
SMALL = sorted((CONFIGS / "small").glob("*.yaml"))
BASES = sorted((CONFIGS / "base").glob("*.yaml"))
#: Every runnable config (base files are only inherited).
RUNNABLE = sorted(p for p in CONFIGS.rglob("*.yaml") if p.parent.name != "base")


def _protocol_table():
    spec = importlib.util.spec_from_file_location("protocol_table", ROOT / "tools" / "protocol_table.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module while the file runs
    spec.loader.exec_module(mod)
    return mod


PT = _protocol_table()
#: Every table-row config of every folder (the SAPO/GiGPO table, ERL, SEED): each line carries ``# kind: source``.
ALL_TABLE = [p for _, paths in PT.table_configs() for p in paths]
SEED_TABLE = sorted(p for p in ALL_TABLE if p.parent.name == "seed")


def _sources(path: Path) -> dict:
    return {s.key: s for s in PT.read_settings(path)}


def _module(path: Path):
    algo = path.stem.split("_")[0]
    return importlib.import_module(f"baselines.{algo}")


def folder_configs(folder: str, *, table_only: bool = False) -> list[Path]:
    """The configs in ``baselines/configs/FOLDER``; ``table_only``: without the tiny test configs."""
    paths = sorted((CONFIGS / folder).glob("*.yaml"))
    return [p for p in paths if not (table_only and ("tiny" in p.name or "echo" in p.name))]


def config_args(path: Path):
    """A config file's resolved Args, through the baseline its name starts with (``grpo_*``: GRPO's)."""
    from agentgym.rl.config import load_config_file, make_args

    return make_args(_module(path).Args, load_config_file(path))


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_config_parses_through_its_baselines_command_line(path):
    """What ``python baselines/<method>.py --config FILE`` does before training: the resolved file as the tyro
    defaults of the method's Args (an unknown key, a wrong type or a broken base fails here)."""
    module = _module(path)
    args = parse_args(module.Args, ["--config", str(path)])
    assert args == make_args(module.Args, load_config_file(path))


def test_every_base_file_is_inherited_and_a_table_row_shows_it_on_help(capsys):
    used = {p.resolve() for row in RUNNABLE for p, _ in config_chain(row)[:-1]}
    assert {p.resolve() for p in BASES} <= used, "a base file no config inherits"
    row = CONFIGS / "grpo_alfworld_qwen2.5-1.5b.yaml"
    assert "learning_rate" not in row.read_text()  # inherited from its protocol's base file
    with pytest.raises(SystemExit) as done:
        parse_args(_module(row).Args, ["--config", str(row), "--help"])
    assert done.value.code == 0
    assert "1e-06" in capsys.readouterr().out  # the base's lr is the default --help shows


def test_there_is_one_config_per_table_cell():
    names = {p.stem for p in TABLE}
    for method in ("ppo", "grpo", "rloo", "gigpo_std", "gigpo_nostd", "sapo"):
        for env in ("alfworld", "webshop"):
            for model in ("qwen2.5-1.5b", "qwen2.5-7b"):
                assert f"{method}_{env}_{model}" in names


@pytest.mark.parametrize("path", TABLE, ids=lambda p: p.stem)
def test_table_configs_follow_the_shared_protocol(path):
    cfg = load_config_file(path)
    args = make_args(_module(path).Args, cfg)
    assert args.learning_rate == 1e-6 and args.beta == 0.01 and args.entropy_coef == 0.001
    assert args.epsilon_low == args.epsilon_high == 0.2 and args.invalid_penalty == 0.1
    assert args.total_iterations == 150 and args.val_tasks == 128 and args.val_temperature == 0.4
    assert args.history_length == 2 and args.max_new_tokens == 512
    assert args.max_turns == (50 if "alfworld" in path.stem else 15)
    assert args.max_prompt_tokens == (2048 if "alfworld" in path.stem else 4096)
    assert args.num_tasks * args.group_size == 128
    assert args.model == ("Qwen/Qwen2.5-1.5B-Instruct" if "1.5b" in path.stem else "Qwen/Qwen2.5-7B-Instruct")
    if path.stem.startswith("gigpo"):
        assert args.gamma == 0.95 and args.step_advantage_w == 1.0
        assert args.mode == ("mean_std_norm" if "_std_" in path.stem else "mean_norm")
    if path.stem.startswith("ppo"):
        assert args.critic_learning_rate == 1e-5 and args.group_size == 1
    if path.stem.startswith(("sapo", "ppo")):
        assert args.group_size == 1
    else:
        assert (args.num_tasks, args.group_size) == (16, 8)
    assert any("REPORTED.md" in s.source for s in PT.read_settings(path))  # values cite the paper's protocol


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_small_configs_load(path):
    args = make_args(_module(path).Args, load_config_file(path))
    assert args.model == ("smollm2" if "smollm2" in path.stem else "tiny")
    assert args.env_id == "agentgym/EchoBandit-v0"


def test_protocol_page_table_is_generated_from_the_configs():
    text = (ROOT / "docs" / "results" / "protocol.md").read_text()
    assert PT.readme_with_table(text, PT.render()) == text, "run `python tools/protocol_table.py --write`"


@pytest.mark.parametrize("path", ALL_TABLE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_table_setting_names_its_source_kind(path):
    settings = PT.read_settings(path)
    keys = {s.key for s in settings}
    assert keys == set(load_config_file(path)) - {"exp_name"}  # every setting read, none dropped
    for s in settings:
        assert s.kind in PT.KINDS and s.source, f"{path.name}: {s.key} has no `# kind: source` comment"


def test_no_cell_of_the_protocol_table_is_unsourced():
    assert PT.unsourced() == []
    assert "**unsourced**" not in PT.render()
    # the generator refuses to write or check a table with an unsourced cell
    assert PT.main(["--check"]) == 0


def test_an_uncommented_setting_is_unsourced(tmp_path):
    cfg = tmp_path / "ppo_alfworld_x.yaml"
    cfg.write_text('model: "m"  # paper: the row\ntop_p: 1.0\ngamma: 1.0  # a guess without a kind\n')
    got = {s.key: s.kind for s in PT.read_settings(cfg)}
    assert got == {"model": "paper", "top_p": None, "gamma": None}


def test_a_setting_takes_its_source_from_the_file_that_sets_it_last(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "p.yaml").write_text("beta: 0.01  # paper: KL 0.01\ngamma: 1.0  # script: default\n")
    row = tmp_path / "ppo_alfworld_x.yaml"
    row.write_text("base: base/p.yaml  # the protocol\nmodel: m  # paper: the row\ngamma: 0.9  # ours: a guess\n")
    got = {s.key: (s.value, s.kind, s.source) for s in PT.read_settings(row)}
    assert got == {
        "beta": (0.01, "paper", "KL 0.01"),
        "gamma": (0.9, "ours", "a guess"),
        "model": ("m", "paper", "the row"),
    }


@pytest.mark.parametrize("path", TABLE, ids=lambda p: p.stem)
def test_table_settings_are_pinned_to_their_cited_values(path):
    """Issue 16: each setting that used to differ from verl-agent, with the source its config cites."""
    args = make_args(_module(path).Args, load_config_file(path))
    src = _sources(path)
    if "alfworld" in path.stem:  # verl-agent validates in distribution; the unseen split is our second column
        assert args.val_split == "valid_seen" and "eval_in_distribution" in src["val_split"].source
        assert args.val_extra_splits == ["valid_unseen"] and src["val_extra_splits"].kind == "ours"
    else:
        assert args.val_split == "test" and args.val_extra_splits == []
    # each row follows the verl-agent commit it names: the paper-era code has no dual clip, d0b9724 has verl's
    era = args.reference.split()[-1]
    assert era in ("f974dc5", "d0b9724") and src["reference"].kind in ("script", "ours")
    assert args.clip_ratio_c == (3.0 if era == "d0b9724" else None) and src["clip_ratio_c"].kind == "script"
    assert args.invalid_penalty_on == "format" and "projection.py" in src["invalid_penalty_on"].source
    assert args.loss_norm == "micro-batch" and "gradient_accumulation" in src["loss_norm"].source
    assert args.loss_agg_mode == "token-mean"
    assert args.mini_batch_scope == "global" and "fsdp_workers.py" in src["mini_batch_scope"].source
    if path.stem.startswith(("gigpo", "grpo", "rloo")):
        assert args.micro_batch_size == (32 if "alfworld" in path.stem else 8)
        assert "ppo_micro_batch_size_per_gpu" in src["micro_batch_size"].source
    if path.stem.startswith("gigpo"):
        assert args.step_return == "verl-agent" and "compute_step_discounted_returns" in src["step_return"].source
    if path.stem.startswith(("grpo", "rloo", "gigpo")):  # verl-agent per-row scores and statistics
        assert (
            args.episode_advantage == "rows" and "compute_mean_std_cross_all_data" in src["episode_advantage"].source
        )
    if path.stem.startswith("grpo"):
        assert args.norm_adv_by_std is True
    if (
        path.stem.startswith(("ppo", "gigpo", "grpo", "rloo")) and "webshop" in path.stem
    ):  # verl-agent's WebShop scripts
        assert args.mini_batch_size == 64 and "run_webshop.sh" in src["mini_batch_size"].source
    else:
        assert args.mini_batch_size == 256
    assert args.weight_decay == 0.01 and args.max_grad_norm == 1.0 and args.update_epochs == 1


@pytest.mark.parametrize("path", [p for p in TABLE if p.stem.startswith("ppo")], ids=lambda p: p.stem)
def test_ppo_settings_cite_verl_agent(path):
    """The formerly unsourced PPO cells, pinned to verl-agent's PPO scripts / ppo_trainer.yaml defaults."""
    args = make_args(_module(path).Args, load_config_file(path))
    src = _sources(path)
    env = "alfworld" if "alfworld" in path.stem else "webshop"
    assert (args.num_tasks, args.group_size) == (128, 1) and "train_data_size=128" in src["num_tasks"].source
    assert args.temperature == 1.0 and "rollout.temperature default 1.0" in src["temperature"].source
    assert args.top_p == 1.0 and "rollout.top_p default 1" in src["top_p"].source
    assert args.max_grad_norm == 1.0 and "actor.grad_clip default 1.0" in src["max_grad_norm"].source
    assert args.update_epochs == 1 and "actor.ppo_epochs default 1" in src["update_epochs"].source
    assert args.weight_decay == 0.01 and "weight_decay default 0.01" in src["weight_decay"].source
    assert (args.reward, args.success_reward) == ("paper", 10.0) and "10.0 * won" in src["success_reward"].source
    assert args.gradient_checkpointing and f"run_{env}.sh" in src["gradient_checkpointing"].source
    assert (args.gamma, args.lam, args.value_clip) == (1.0, 1.0, 0.5)
    assert "algorithm.gamma default 1.0" in src["gamma"].source and "cliprange_value" in src["value_clip"].source
    assert args.critic_learning_rate == 1e-5 and "critic.optim.lr=1e-5" in src["critic_learning_rate"].source
    assert args.whiten_advantages and "masked_whiten" in src["whiten_advantages"].source
    assert args.vf_coef == 1.0 and src["vf_coef"].kind == "script"
    assert args.value_loss_factor == 0.5 and "compute_value_loss" in src["value_loss_factor"].source
    for key in ("save_every", "distributed"):
        assert src[key].kind == "run", key
    # under verl-agent's per-micro-batch loss mean the micro-batch size sets each token's weight
    assert args.micro_batch_size == (16 if env == "alfworld" else 8) and src["micro_batch_size"].kind == "script"


@pytest.mark.parametrize("path", [p for p in TABLE if p.stem.startswith("sapo")], ids=lambda p: p.stem)
def test_sapo_guesses_are_marked_ours_with_a_reason(path):
    args = make_args(_module(path).Args, load_config_file(path))
    src = _sources(path)
    assert (args.tau_v, args.gamma, args.lam, args.value_coef, args.q_coef, args.value_clip) == (
        5.0,
        0.99,
        0.95,
        0.5,
        0.5,
        0.2,
    )
    for key in ("tau_v", "gamma", "lam", "value_coef", "q_coef", "value_clip", "r_max", "adv_eps", "num_tasks"):
        assert src[key].kind == "ours" and len(src[key].source) > 20, key
    assert args.invalid_coef == 0.0 and src["invalid_coef"].kind == "ours"  # one invalid penalty: the reward's
    assert args.train_raw_readout and src["train_raw_readout"].kind == "ours"
    assert args.group_size == 1 and "Single-Rollout" in src["group_size"].source


@pytest.mark.parametrize("path", TABLE + SEED_TABLE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bf16_compute_over_fp32_master_weights_as_verl(path):
    """verl's FSDP actor keeps fp32 weights and computes in bf16: the table configs do the same."""
    src = _sources(path)
    cfg = load_config_file(path)
    assert cfg["dtype"] == "bfloat16" and cfg.get("master_weights", "float32") == "float32"
    assert "fp32 master weights" in src["dtype"].source


@pytest.mark.parametrize("path", SEED_TABLE, ids=lambda p: p.stem)
def test_seed_turns_and_history_follow_the_authors_scripts(path):
    """SEED's launchers (examples/seed_trainer/_common/alfworld.sh, the GRPO control run_alfworld.sh): 30 turns,
    history 5, not the verl-agent table's 50 and 2."""
    import baselines.grpo
    import baselines.seed

    module = baselines.grpo if path.name.startswith("grpo_") else baselines.seed
    args = make_args(module.Args, load_config_file(path))
    src = _sources(path)
    script = "examples/grpo_trainer/run_alfworld.sh" if module is baselines.grpo else "_common/alfworld.sh"
    assert args.max_turns == 30 and src["max_turns"].kind == "script" and script in src["max_turns"].source
    assert (
        args.history_length == 5 and src["history_length"].kind == "script" and script in src["history_length"].source
    )
    assert (args.num_tasks, args.group_size, args.max_prompt_tokens, args.max_new_tokens) == (16, 8, 2048, 512)
    assert (args.val_every, args.val_tasks, args.val_temperature) == (5, 128, 0.4)
    assert args.total_iterations == 150 and "global_step_150" in src["total_iterations"].source
    if module is baselines.seed:
        assert args.sft_learning_rate == 5e-6 and "train_sft.sh" in src["sft_learning_rate"].source
        assert args.sft_epochs == 3 and src["sft_epochs"].kind == "script"
