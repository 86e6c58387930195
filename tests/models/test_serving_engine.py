"""The serving engine: time-sliced, chunk-prefilled batches give the same tokens as one ``generate`` call, and a
huge request does not hold up a small one."""

from __future__ import annotations

import threading

import torch

from agentgym.models.generation import HFGenerator
from agentgym.models.serving_engine import DoneEvent, Engine, FinishEvent, GenRequest, TokenEvent

torch.set_num_threads(1)


def _collect(engine: Engine, req: GenRequest) -> tuple[dict[int, list[int]], dict[int, str], threading.Event]:
    tokens: dict[int, list[int]] = {i: [] for i in range(req.n)}
    reasons: dict[int, str] = {}
    done = threading.Event()

    def on_event(ev):
        if isinstance(ev, TokenEvent):
            tokens[ev.index].append(ev.token)
        elif isinstance(ev, FinishEvent):
            reasons[ev.index] = ev.reason
        elif isinstance(ev, DoneEvent):
            done.set()
        else:
            raise AssertionError(f"unexpected event {ev}")

    req.on_event = on_event
    engine.submit(req)
    return tokens, reasons, done


def test_slices_and_chunked_prefill_match_one_generate_call(tiny):
    model, tok = tiny
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("look around the room " * 9, "up", "click[")]
    ref = HFGenerator(model, tok).generate(prompts, max_new_tokens=40, temperature=0)
    # 5-token slices and 8-token prefill chunks: the long prompt is prefilled over several turns.
    engine = Engine(model, tok, slice_tokens=5, prefill_chunk=8, gather_s=0.05)
    try:
        runs = [_collect(engine, GenRequest(prompt=p, max_tokens=40, temperature=0)) for p in prompts]
        for _, _, done in runs:
            assert done.wait(60)
    finally:
        engine.close()
    assert len(prompts[0]) > 3 * 8
    assert engine.batches == [3]  # one batch, decoded over several slices
    for (tokens, reasons, _), r in zip(runs, ref):
        eos = r.ids[-1:] if r.finish_reason == "stop" else []
        assert tokens[0] + eos == r.ids  # the EOS token ends a choice; it is no text token
        assert reasons[0] == r.finish_reason


def test_huge_request_does_not_starve_a_small_one(tiny):
    model, tok = tiny
    engine = Engine(model, tok, slice_tokens=8, prefill_chunk=256)
    try:
        long_prompt = tok("look around the room " * 300, add_special_tokens=False)["input_ids"]
        big = GenRequest(prompt=long_prompt, max_tokens=2000, temperature=0)
        big_tokens, _, big_done = _collect(engine, big)
        for _ in range(6000):  # until the huge request is being decoded
            if big_tokens[0]:
                break
            threading.Event().wait(0.01)
        assert big_tokens[0]
        small_tokens, small_reasons, small_done = _collect(
            engine, GenRequest(prompt=tok("up", add_special_tokens=False)["input_ids"], max_tokens=4, temperature=0)
        )
        assert small_done.wait(60)
        # The small request finished while the big one had most of its tokens still to go.
        assert not big_done.is_set() and len(big_tokens[0]) < 1000
        assert len(small_tokens[0]) + (small_reasons[0] == "stop") <= 4
        big.cancelled.set()  # a client that goes away frees its rows
    finally:
        engine.close()


def test_seeded_requests_repeat_and_n_rows_differ(tiny):
    model, tok = tiny
    engine = Engine(model, tok)
    prompt = tok("search[", add_special_tokens=False)["input_ids"]
    try:
        outs = []
        for _ in range(2):
            tokens, _, done = _collect(engine, GenRequest(prompt=prompt, n=2, max_tokens=12, temperature=1.0, seed=7))
            assert done.wait(60)
            outs.append(tokens)
    finally:
        engine.close()
    assert outs[0] == outs[1]  # the same seed, sent alone: the same samples
    assert outs[0][0] != outs[0][1]  # two choices are two samples
