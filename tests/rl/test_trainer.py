"""Training core: turn batches, rewards, config files, atomic checkpoints, metrics/curve, gradient accumulation."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from agentgym.rl.batch import broadcast_turn_values, build_batch, episode_groups
from agentgym.rl.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from agentgym.rl.config import Args, load_config_file, parse_args
from agentgym.rl.metrics import SHARED_KEYS, MetricsLogger, plot_learning_curve
from agentgym.rl.rewards import shaped_reward, success_scale_for


def test_build_batch_layout_left_pads_prompts_and_masks_only_responses():
    b = build_batch([[1, 2, 3], [4]], [[5], [6, 7]], pad_id=0, meta=[{"episode": 0, "t": 0}, {"episode": 0, "t": 1}])
    assert b["input_ids"].tolist() == [[1, 2, 3, 5, 0], [0, 0, 4, 6, 7]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert b["completion_mask"].tolist() == [[1, 0], [1, 1]]
    sub = b.select([1])  # trims the all-pad prompt columns of the sub-batch
    assert sub["input_ids"].tolist() == [[4, 6, 7]]
    assert sub.meta == [{"episode": 0, "t": 1}]
    sub0 = b.select([0])  # and the all-pad response columns
    assert sub0["input_ids"].tolist() == [[1, 2, 3, 5]] and sub0["completion_mask"].tolist() == [[1]]
    assert broadcast_turn_values([2.0, -1.0], b["completion_mask"]).tolist() == [[2.0, 0.0], [-1.0, -1.0]]
    assert episode_groups(b.meta) == {0: [0, 1]}


def test_build_batch_errors_are_actionable():
    with pytest.raises(ValueError, match="empty batch"):
        build_batch([], [], pad_id=0)
    with pytest.raises(ValueError, match="empty prompt"):
        build_batch([[]], [[1]], pad_id=0)
    b = build_batch([[1]], [[]], pad_id=0)  # an empty response is one masked pad token
    assert b["completion_mask"].tolist() == [[0.0]]


def test_rewards_follow_the_papers():
    assert success_scale_for("agentgym/ALFWorld-v0") == 10.0
    assert success_scale_for("agentgym/WebShop-v0") == 10.0
    assert success_scale_for("agentgym/Sokoban-v0") is None
    assert shaped_reward(0.3, {"success": True}, valid=True, success_scale=10.0) == 10.0
    assert shaped_reward(0.3, {"success": False}, valid=False, success_scale=10.0) == pytest.approx(-0.1)
    assert shaped_reward(-0.1, {}, valid=False) == pytest.approx(-0.2)


def test_config_file_gives_defaults_and_flags_override(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("num_tasks: 16\ngroup_size: 8\nlearning_rate: 1.0e-6\n_source: ignored\n")
    args = parse_args(Args, ["--config", str(cfg), "--group-size", "4"])
    assert (args.num_tasks, args.group_size, args.learning_rate) == (16, 4, 1e-6)
    (tmp_path / "c.json").write_text(json.dumps({"seed": 3}))
    assert parse_args(Args, [f"--config={tmp_path / 'c.json'}"]).seed == 3
    (tmp_path / "bad.yaml").write_text("num_taks: 3\n")
    with pytest.raises(ValueError, match="num_taks"):
        parse_args(Args, ["--config", str(tmp_path / "bad.yaml")])
    with pytest.raises(FileNotFoundError, match="baselines/configs"):
        load_config_file(tmp_path / "missing.yaml")


def test_checkpoints_are_atomic_and_pruned(tmp_path):
    for it in (1, 2, 3):
        save_checkpoint(tmp_path, it, {"w": torch.full((2,), float(it))}, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_000002", "ckpt_000003"]
    (tmp_path / ".tmp_ckpt_000004_1").mkdir()  # a write killed half-way is never picked up
    (tmp_path / "ckpt_000009").mkdir()  # nor a folder without its state file
    last = latest_checkpoint(tmp_path)
    assert last.name == "ckpt_000003"
    torch.manual_seed(0)
    save_checkpoint(tmp_path, 4, {})
    a = torch.rand(3)
    load_checkpoint(latest_checkpoint(tmp_path))  # restores the RNG state saved with it
    assert torch.equal(torch.rand(3), a)
    with pytest.raises(FileNotFoundError, match="ckpt_"):
        load_checkpoint(tmp_path / "nope")


def test_metrics_logger_writes_tensorboard_jsonl_and_curve(tmp_path):
    log = MetricsLogger(tmp_path)
    for it in range(1, 4):
        log.log(it, {k: 0.1 * it for k in SHARED_KEYS} | {"val/success_rate": 0.5})
    log.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3] and all(set(SHARED_KEYS) <= set(r) for r in rows)
    assert any((tmp_path / "tb").iterdir())
    png = plot_learning_curve(log.history, tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_learning_curve([], tmp_path / "none.png") is None


def test_gradient_accumulation_equals_one_big_batch(tmp_path):
    """Micro-batches with token-count normalisation give the same update as one forward over the mini-batch."""
    from agentgym.rl.testing import param_vector, tiny_echo_args
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    def one_update(micro):
        args = tiny_echo_args(grpo.Args, tmp_path / f"m{micro}", micro_batch_size=micro, beta=0.01)
        tr = Trainer(args, algo="grpo")
        b = build_batch([[5, 6, 7], [8, 9], [10, 11, 12, 13]], [[20, 21], [22], [23, 24, 25]], pad_id=0)
        b.meta = [{"episode": i, "t": 0, "group": 0, "reward": r} for i, r in enumerate([1.0, 0.0, 0.5])]
        tr.score(b)
        b["advantages"] = broadcast_turn_values([1.0, -1.0, 0.5], b["completion_mask"])
        tr.update(b, grpo.policy_loss, iteration=0)
        return param_vector(tr.model)

    torch.testing.assert_close(one_update(1), one_update(8), atol=1e-6, rtol=1e-5)


@dataclass
class _A(Args):
    extra: int = 1
    """an extra field"""


def test_subclass_fields_load_from_config(tmp_path):
    (tmp_path / "c.toml").write_text("extra = 5\n")
    assert parse_args(_A, ["--config", str(tmp_path / "c.toml")]).extra == 5


def test_fresh_run_sets_an_earlier_run_aside(tmp_path):
    """A run without --resume in a used run folder moves the old run to <name>.old-N instead of mixing logs."""
    from agentgym.rl.testing import tiny_echo_args
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"iteration": 1, "charts/success_rate": 0.5}\n')
    Trainer(tiny_echo_args(grpo.Args, run), algo="grpo")
    assert (tmp_path / "run.old-1" / "metrics.jsonl").read_text().startswith('{"iteration": 1')
    assert not (run / "metrics.jsonl").exists()
    (run / "metrics.jsonl").write_text("{}\n")
    Trainer(tiny_echo_args(grpo.Args, run), algo="grpo")
    assert (tmp_path / "run.old-2" / "metrics.jsonl").exists()


@pytest.mark.parametrize("master, changed", [("float32", lambda f: f > 0.5), ("same", lambda f: f < 0.05)])
def test_bf16_runs_keep_fp32_master_weights_so_small_steps_are_not_rounded_away(tmp_path, master, changed):
    """``dtype: bfloat16`` (the table configs) trains fp32 weights with bf16 compute, as verl's FSDP actor: one
    AdamW step at the tables' lr 1e-6 moves every weight that has a gradient (measured: 65% of the tiny model's;
    unused embedding rows get none). Weights held in bf16 (``master_weights: same``) lose nearly all such steps to
    rounding (bf16 keeps 8 bits of mantissa; measured: 0.8% moved)."""
    from agentgym.rl.testing import param_vector, tiny_echo_args
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    args = tiny_echo_args(
        grpo.Args, tmp_path / master, dtype="bfloat16", master_weights=master, learning_rate=1e-6, beta=0.01
    )
    tr = Trainer(args, algo="grpo")
    want = torch.float32 if master == "float32" else torch.bfloat16
    assert {p.dtype for p in tr.model.parameters()} == {want}
    b = build_batch([[5, 6, 7], [8, 9]], [[20, 21], [22]], pad_id=0)
    b.meta = [{"episode": i, "t": 0, "group": 0, "reward": r} for i, r in enumerate([1.0, 0.0])]
    tr.score(b)
    b["advantages"] = broadcast_turn_values([1.0, -1.0], b["completion_mask"])
    before = param_vector(tr.model).float()
    tr.update(b, grpo.policy_loss, iteration=0)
    after = param_vector(tr.model).float()
    fraction = (after != before).float().mean().item()
    assert changed(fraction), f"{fraction:.3f} of the weights changed with master_weights={master}"


def test_unknown_master_weights_is_an_actionable_error(tmp_path):
    from agentgym.rl.testing import tiny_echo_args
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    with pytest.raises(ValueError, match="master_weights 'fp16'.*float32 or same"):
        Trainer(tiny_echo_args(grpo.Args, tmp_path / "r", master_weights="fp16"), algo="grpo")


@pytest.mark.parametrize(
    "dtype, autocast, native, want",
    [
        ("bfloat16", True, True, torch.bfloat16),
        ("bfloat16", True, False, torch.float32),
        ("float32", True, True, torch.float32),
        ("bfloat16", False, True, torch.float32),
    ],
)
def test_cpu_computes_in_bf16_under_autocast_only_when_the_config_asks_and_the_cpu_has_bf16(
    tmp_path, monkeypatch, dtype, autocast, native, want
):
    """``dtype: bfloat16`` on CPU runs forward/backward under bf16 autocast (the cpu SmolLM2 configs: 1.7x faster
    on an AVX-512-BF16 CPU) while the trained weights stay fp32; ``bf16_autocast: false``, fp32, or a CPU that
    would only emulate bf16 (3x slower than fp32) turns it off."""
    from agentgym.rl import setup as setup_mod
    from agentgym.rl.testing import tiny_echo_args
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    monkeypatch.setattr(setup_mod, "cpu_has_native_bf16", lambda: native)
    args = tiny_echo_args(grpo.Args, tmp_path / "r", dtype=dtype, bf16_autocast=autocast, device="cpu")
    tr = Trainer(args, algo="grpo")
    assert {p.dtype for p in tr.model.parameters()} == {torch.float32}
    with tr.autocast():
        logits = tr.model(torch.tensor([[5, 6, 7]])).logits
    assert logits.dtype == want


def test_export_model_writes_the_final_policy_as_a_plain_hf_folder(tmp_path):
    """``export_model: true`` (the cpu SmolLM2 configs) leaves ``runs/<exp>/model``: the final weights, loadable by
    ``from_pretrained`` (so ``agentgym eval --agent hf:runs/<exp>/model`` and a leaderboard pin take them)."""
    from agentgym.models.loading import load_model
    from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint
    from agentgym.rl.testing import tiny_echo_args
    from baselines import grpo

    args = tiny_echo_args(grpo.Args, tmp_path / "run", total_iterations=1, export_model=True)
    grpo.train(args)
    exported, _ = load_model(tmp_path / "run" / "model", device="cpu")
    state = load_checkpoint(latest_checkpoint(tmp_path / "run"), restore_rng=False)["model"]
    mine = exported.state_dict()
    assert state and all(torch.equal(mine[k], v) for k, v in state.items())
    grpo.train(tiny_echo_args(grpo.Args, tmp_path / "again", total_iterations=1))
    assert not (tmp_path / "again" / "model").exists()  # off by default
