"""VLLMGenerator against HFGenerator (GPU only; skipped without vllm or CUDA)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_vllm_greedy_matches_hf(tmp_path):
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from agentgym.models.generation import HFGenerator, VLLMGenerator, chat_prompt_ids
    from agentgym.models.tiny import make_tiny_model

    model, tok = make_tiny_model(tmp_path, seed=0)
    prompts = [chat_prompt_ids(tok, [{"role": "user", "content": t}]) for t in ("up", "say apple " * 4)]
    hf = HFGenerator(model.cuda(), tok).generate(prompts, max_new_tokens=8, temperature=0.0, return_logprobs=True)
    vl = VLLMGenerator(str(tmp_path), tok, gpu_memory_utilization=0.2, dtype="float32").generate(
        prompts, max_new_tokens=8, temperature=0.0, return_logprobs=True
    )
    for a, b in zip(hf, vl):
        assert a.ids == b.ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-3
