"""Token in, token out: the loss scores exactly the token ids the rollout sampled, after exactly the prompt ids
the model saw at that turn, on a multi-turn episode with history, under a chat template that is not
prefix-stable (Qwen3-style: reasoning of earlier assistant turns is dropped when a conversation is re-rendered).

Every prompt template here puts the history in the turn's user message (verl-agent's layout), so each turn's
prompt is rendered from scratch and turn t+1's prompt is not turn t's prompt + response: a trainer that
rebuilt one token stream per episode, or re-tokenized the decoded text, would score tokens the model never saw.
"""

from __future__ import annotations

import pytest
import torch

from agentgym.evaluation import EpisodeSpec
from agentgym.models.generation import HFGenerator
from agentgym.models.tiny import make_tiny_model
from agentgym.rl.batch import build_batch
from agentgym.rl.logprobs import per_token_logps
from agentgym.rl.rollout import collect_rollouts

torch.set_num_threads(1)  # tiny models run fastest on one thread (tests/rl/test_rollout.py)

# Written for this test: ChatML turns; an assistant message before the last user message loses everything up
# to its closing </think> (the behaviour of Qwen3's template that breaks prefix stability).
DROPS_EARLIER_REASONING = (
    "{% set ns = namespace(last_user=-1) %}"
    "{% for m in messages %}{% if m['role'] == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}"
    "{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip() %}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Spy:
    """An HFGenerator that keeps the prompt ids of every call (what the model actually saw)."""

    def __init__(self, inner: HFGenerator) -> None:
        self.inner, self.prompts = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, prompts, **kw):
        self.prompts.extend([list(p) for p in prompts])
        return self.inner.generate(prompts, **kw)


@pytest.fixture(scope="module")
def rollout():
    torch.manual_seed(0)
    model, tok = make_tiny_model(seed=11)
    tok.chat_template = DROPS_EARLIER_REASONING
    model.eval()
    gen = Spy(HFGenerator(model, tok))
    rb = collect_rollouts(
        gen,
        tok,
        "agentgym/EchoBandit-v0",
        [EpisodeSpec(seed=3)],
        group_size=2,
        history_length=2,
        max_new_tokens=8,
        temperature=1.0,
        return_logprobs=True,
        seed=5,
    )
    return model, tok, gen, rb


def test_the_template_is_not_prefix_stable(rollout):
    _, tok, _, _ = rollout
    chat = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "<think>plan</think><action>a</action>"},
    ]
    first = tok.apply_chat_template(chat, tokenize=False)
    second = tok.apply_chat_template([*chat, {"role": "user", "content": "again"}], tokenize=False)
    assert "plan" in first and "plan" not in second and not second.startswith(first)


def test_training_rows_hold_the_prompts_the_model_saw_and_the_sampled_ids(rollout):
    _, tok, gen, rb = rollout
    turns = rb.turns
    assert len(turns) > len({t.episode for t in turns})  # multi-turn episodes
    assert any(t.t >= 1 for t in turns)
    assert sorted(map(tuple, gen.prompts)) == sorted(tuple(t.prompt_ids) for t in turns)
    # history is re-rendered as text each turn: a later prompt never extends the earlier prompt + response
    by_episode: dict[int, list] = {}
    for t in turns:
        by_episode.setdefault(t.episode, []).append(t)
    for ep in by_episode.values():
        ep.sort(key=lambda t: t.t)
        for a, b in zip(ep, ep[1:]):
            assert b.prompt_ids[: len(a.prompt_ids) + len(a.response_ids)] != a.prompt_ids + a.response_ids
    # the sampled ids are kept even where decoding and re-encoding would give other ids
    retok = [tok(tok.decode(t.response_ids), add_special_tokens=False)["input_ids"] for t in turns]
    assert any(r != t.response_ids for r, t in zip(retok, turns))


def test_sampler_and_loss_log_probs_agree_in_fp32(rollout):
    model, tok, _, rb = rollout
    turns = rb.turns
    batch = build_batch(
        [t.prompt_ids for t in turns],
        [t.response_ids for t in turns],
        pad_id=tok.pad_token_id,
        old_logprobs=[t.old_logprobs for t in turns],
    )
    with torch.no_grad():
        lp = per_token_logps(model, batch["input_ids"], batch["attention_mask"], batch.completion_length)
    m = batch["completion_mask"].bool()
    diff = (lp[m] - batch["sampling_per_token_logps"][m]).abs().max()
    assert diff <= 1e-5, f"loss and sampler log-probs differ by {float(diff):.2e}"
