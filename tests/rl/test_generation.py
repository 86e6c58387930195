"""HFGenerator: left padding, logprobs, stop strings, suppressed ids, seeding (tiny random model)."""

from __future__ import annotations

import pytest
import torch

from agentgym.models.generation import HFGenerator, chat_prompt_ids
from agentgym.models.tiny import make_tiny_model

# Tiny models run fastest on one thread, and a busy 2-core machine makes two OpenMP threads spin at every
# op barrier: measured 20.5 s vs 1.2 s for 8 x 32 tokens under load (see the AGENTS report).
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    model, tok = make_tiny_model(seed=0)
    return model, tok, HFGenerator(model, tok)


def _prompts(tok, n=4):
    texts = ["go to fridge 1", "Say the word: apple. " * 3, "up", "search[red shirt under 30 dollars] " * 5][:n]
    return [chat_prompt_ids(tok, [{"role": "user", "content": t}]) for t in texts]


def _forward_logprobs(model, prompt, response):
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(response)[:, None]).squeeze(1)


def test_prompts_differ_in_length(tiny):
    _, tok, _ = tiny
    assert len({len(p) for p in _prompts(tok)}) == 4  # so the batch really is left-padded


def test_batched_logprobs_equal_unbatched(tiny):
    model, tok, gen = tiny
    prompts = _prompts(tok)
    batched = gen.generate(prompts, max_new_tokens=12, return_logprobs=True, seed=3)
    for p, c in zip(prompts, batched):
        assert len(c.logprobs) == len(c.ids) > 0
        # The sampled tokens, scored alone (no padding) by a plain forward pass, as the trainer will.
        ref = _forward_logprobs(model, p, c.ids)
        assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4)


def test_greedy_batched_equals_unbatched(tiny):
    _, tok, gen = tiny
    prompts = _prompts(tok)
    batched = gen.generate(prompts, max_new_tokens=10, temperature=0.0, return_logprobs=True)
    for p, c in zip(prompts, batched):
        alone = gen.generate([p], max_new_tokens=10, temperature=0.0, return_logprobs=True)[0]
        assert alone.ids == c.ids
        assert max(abs(a - b) for a, b in zip(alone.logprobs, c.logprobs)) < 1e-4


def test_logprobs_use_the_sampling_temperature(tiny):
    model, tok, gen = tiny
    p = _prompts(tok, 1)[0]
    c = gen.generate([p], max_new_tokens=6, temperature=0.5, return_logprobs=True, seed=1)[0]
    ids = torch.tensor([p + c.ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(p) - 1 : -1] / 0.5
    ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(c.ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4)


def test_length_limit_and_finish_reason(tiny):
    _, tok, gen = tiny
    out = gen.generate(_prompts(tok, 2), max_new_tokens=5, suppress_token_ids=[tok.eos_token_id], seed=0)
    assert all(len(c.ids) == 5 and c.finish_reason == "length" for c in out)
    assert all(c.logprobs is None for c in out)


def test_suppressed_ids_are_never_sampled_and_leave_the_softmax(tiny):
    model, tok, gen = tiny
    allowed = {40, 41, 42}
    banned = [i for i in range(len(tok)) if i not in allowed]
    p = _prompts(tok, 1)[0]
    c = gen.generate([p], max_new_tokens=20, return_logprobs=True, suppress_token_ids=banned, seed=0)[0]
    assert set(c.ids) <= allowed
    ids = torch.tensor([p + c.ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(p) - 1 : -1]
    logits[:, banned] = float("-inf")
    ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(c.ids)[:, None]).squeeze(1)
    assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4)


def test_same_seed_same_samples(tiny):
    _, tok, gen = tiny
    a = gen.generate(_prompts(tok), max_new_tokens=8, seed=7)
    b = gen.generate(_prompts(tok), max_new_tokens=8, seed=7)
    c = gen.generate(_prompts(tok), max_new_tokens=8, seed=8)
    assert [x.ids for x in a] == [x.ids for x in b]
    assert [x.ids for x in a] != [x.ids for x in c]


def test_stop_string_cut(tiny):
    _, tok, gen = tiny
    toks = tok("<think>a</think><action>up</action> and more", add_special_tokens=False)["input_ids"]
    pad = [gen.pad_id] * 3
    n, reason = gen._cut(toks + pad, ["</action>"])
    assert reason == "stop"
    assert tok.decode(toks[:n]).endswith("</action>") and "</action>" not in tok.decode(toks[: n - 1])
    eos = tok.eos_token_id
    assert gen._cut([5, 6, eos, gen.pad_id], None) == (3, "stop")
    assert gen._cut([5, 6, 7], None) == (3, "length")


def test_stop_string_when_pad_is_eos():
    model, tok = make_tiny_model(seed=0)
    tok.pad_token = tok.eos_token  # SmolLM2/Qwen-style: finished rows are filled with EOS
    gen = HFGenerator(model, tok)
    toks = tok("<action>up</action>", add_special_tokens=False)["input_ids"]
    assert gen._cut(toks + [tok.eos_token_id] * 2, ["</action>"]) == (len(toks), "stop")


def test_empty_prompt_is_an_error(tiny):
    _, _, gen = tiny
    with pytest.raises(ValueError, match="empty prompt"):
        gen.generate([[]], max_new_tokens=2)
    assert gen.generate([], max_new_tokens=2) == []


def test_stop_criteria_is_cached_and_fires_on_the_stop_string(tiny):
    _, tok, gen = tiny
    crit = gen._stop_criteria(["</action>"])
    assert gen._stop_criteria(["</action>"]) is crit  # built once, not on every generate call
    rows = [
        tok("<action>up</action>", add_special_tokens=False)["input_ids"],
        tok("<action>up", add_special_tokens=False)["input_ids"],
    ]
    width = max(map(len, rows))
    ids = torch.tensor([[gen.pad_id] * (width - len(r)) + r for r in rows])
    done = crit(ids, torch.zeros(2, len(tok)))
    assert done.tolist() == [True, False]
