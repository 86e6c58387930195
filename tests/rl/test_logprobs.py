"""Chunked per-token logprobs/entropy equal the naive full log-softmax, with padding, temperature and masks."""

from __future__ import annotations

import pytest
import torch

from agentgym.models.generation import HFGenerator
from agentgym.models.tiny import make_tiny_model
from agentgym.rl.batch import build_batch
from agentgym.rl.logprobs import entropy_from_logits, forward_completion, per_token_logps


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_model(None, seed=3)


def _naive(model, prompts, responses, temperature=1.0, exclude=None):
    """Per-row log-probs and entropies from full logits of the unpadded row."""
    lps, ents = [], []
    for p, r in zip(prompts, responses):
        logits = model(torch.tensor([p + r])).logits[0, len(p) - 1 : len(p) + len(r) - 1].float() / temperature
        if exclude:
            logits[:, exclude] = float("-inf")
        logp = torch.log_softmax(logits, -1)
        lps.append(logp[torch.arange(len(r)), torch.tensor(r)])
        prob = logp.exp()
        ents.append(-(prob * torch.where(prob > 0, logp, torch.zeros_like(logp))).sum(-1))
    return lps, ents


PROMPTS = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
RESPONSES = [[20, 21, 22], [23], [24, 25]]


@pytest.mark.parametrize("chunk_size", [1, 4, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_logprobs_and_entropy_equal_naive(tiny, chunk_size, temperature):
    model, tok = tiny
    b = build_batch(PROMPTS, RESPONSES, pad_id=tok.pad_token_id)
    with torch.no_grad():
        out = forward_completion(
            model,
            b["input_ids"],
            b["attention_mask"],
            3,
            temperature=temperature,
            chunk_size=chunk_size,
            want_entropy=True,
        )
        lps, ents = _naive(model, PROMPTS, RESPONSES, temperature)
    for i, r in enumerate(RESPONSES):
        torch.testing.assert_close(out["per_token_logps"][i, : len(r)], lps[i], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(out["entropy"][i, : len(r)], ents[i], atol=1e-4, rtol=1e-4)


def test_excluded_ids_leave_the_softmax(tiny):
    model, tok = tiny
    b = build_batch(PROMPTS, RESPONSES, pad_id=tok.pad_token_id)
    exclude = [1, 2, 3, 100, 200]
    with torch.no_grad():
        out = forward_completion(
            model, b["input_ids"], b["attention_mask"], 3, exclude_token_ids=exclude, want_entropy=True
        )
        lps, ents = _naive(model, PROMPTS, RESPONSES, exclude=exclude)
    for i, r in enumerate(RESPONSES):
        torch.testing.assert_close(out["per_token_logps"][i, : len(r)], lps[i], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(out["entropy"][i, : len(r)], ents[i], atol=1e-4, rtol=1e-4)
    # a response token that is itself excluded stays finite (masked rows must not poison sums)
    b2 = build_batch([[5, 6]], [[1]], pad_id=tok.pad_token_id)
    with torch.no_grad():
        lp = per_token_logps(model, b2["input_ids"], b2["attention_mask"], 1, exclude_token_ids=[1])
    assert torch.isfinite(lp).all()


def test_gradients_match_the_naive_computation(tiny):
    model, tok = tiny
    b = build_batch(PROMPTS, RESPONSES, pad_id=tok.pad_token_id)
    mask = b["completion_mask"]
    model.zero_grad()
    out = forward_completion(model, b["input_ids"], b["attention_mask"], 3, chunk_size=2, want_entropy=True)
    ((out["per_token_logps"] + 0.1 * out["entropy"]) * mask).sum().backward()
    g_chunked = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    lps, ents = _naive(model, PROMPTS, RESPONSES)
    sum(lp.sum() + 0.1 * e.sum() for lp, e in zip(lps, ents)).backward()
    for a, b_ in zip(g_chunked, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, b_, atol=1e-4, rtol=1e-3)
    model.zero_grad()


def test_recomputed_logprobs_match_sampling_logprobs(tiny):
    """The trainer's forward (left padding, position ids) scores what the generator sampled: ratio starts at 1."""
    model, tok = tiny
    gen = HFGenerator(model, tok)
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]
    outs = gen.generate(
        prompts, max_new_tokens=6, temperature=0.9, return_logprobs=True, seed=0, suppress_token_ids=[1, 2]
    )
    b = build_batch(prompts, [o.ids for o in outs], pad_id=tok.pad_token_id, old_logprobs=[o.logprobs for o in outs])
    with torch.no_grad():
        lp = per_token_logps(
            model, b["input_ids"], b["attention_mask"], b.completion_length, temperature=0.9, exclude_token_ids=[1, 2]
        )
    m = b["completion_mask"].bool()
    torch.testing.assert_close(lp[m], b["sampling_per_token_logps"][m], atol=1e-4, rtol=1e-4)


def test_entropy_from_logits():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1e9, 5.0]])
    ent = entropy_from_logits(logits, chunk_size=1, exclude_token_ids=[3])
    torch.testing.assert_close(ent, torch.tensor([torch.log(torch.tensor(3.0)), torch.log(torch.tensor(2.0))]))
