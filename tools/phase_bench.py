"""How close one SmolLM2-135M RL iteration on this CPU gets to the machine: time and FLOP/s per phase.

One iteration of a CPU table config (default ``baselines/configs/cpu/gigpo_smollm2_frozenlake.yaml``, cut to
``--tasks`` x its group size episodes of at most ``--max-turns`` turns, from the base model), split into its
phases: generation (prefill + decode), the old-policy and reference log-prob passes, the update's
forward+backward, and the optimizer steps. Each phase's achieved FLOP/s (model FLOPs per token x tokens it
processed) is set against this machine's measured fp32 matmul throughput at the same thread count.

The iteration runs twice in one process, first with the old-policy pass as it was (``reuse_sampling_logprobs``
off), then with it taken from the sampler (on; see ``Trainer.sampling_logps_are_old``), so the two iteration
times are side by side. The sampler's log-probs replace the pass only in fp32: on a CPU with native bf16 the
table configs (``dtype: bfloat16``) compute under autocast and keep it (``--dtype float32`` to compare).
Writes a JSON record (value, versions, date, machine, command).

Run: ``python tools/phase_bench.py --out docs/figures/phases.json``
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from measure_record import write_record  # noqa: E402

from agentgym.models.threads import apply_threads  # noqa: E402
from agentgym.rl.config import load_config_file, make_args  # noqa: E402

CONFIG = "baselines/configs/cpu/gigpo_smollm2_frozenlake.yaml"


def matmul_flops(m: int, k: int, n: int, seconds: float = 2.0, dtype: torch.dtype = torch.float32) -> float:
    """Best FLOP/s of ``(m, k) @ (k, n)`` in ``dtype`` over repeated calls for about ``seconds``."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * m * k * n / best


def model_flops_per_token(model, context: float) -> dict[str, float]:
    """Forward FLOPs per token: 2 x matmul weights (the tied output head counted once, as it is used once) plus
    causal attention at an average ``context`` (QK^T and AV: 2 x layers x hidden x context)."""
    cfg = model.config
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n)
    if getattr(cfg, "tie_word_embeddings", False):
        weights += model.get_output_embeddings().weight.numel()
    attn = 2.0 * cfg.num_hidden_layers * cfg.hidden_size * context
    return {"matmul_weights": float(weights), "forward": 2.0 * weights + attn}


def one_iteration(args) -> dict:
    """Build a trainer for ``args``, run one iteration, return its timings, token counts and FLOP figures."""
    from agentgym.rl.trainer import Trainer
    from baselines import gigpo

    trainer = Trainer(args, algo="gigpo")
    opt_s = [0.0]
    step = trainer.optimizer.step

    def timed_step(*a, **kw):
        t0 = time.perf_counter()
        out = step(*a, **kw)
        opt_s[0] += time.perf_counter() - t0
        return out

    trainer.optimizer.step = timed_step
    t0 = time.perf_counter()
    m = trainer.train_iteration(gigpo.compute_advantages, gigpo.policy_loss)
    wall = time.perf_counter() - t0
    rows = m["rollout/num_turns"]
    tokens = m["perf/train_tokens"]  # prompt + response tokens of every row: what each full pass processes
    per_tok = model_flops_per_token(trainer.model, context=tokens / max(rows, 1) / 2)
    fwd = per_tok["forward"]
    phases = {
        "generation": (m["time/generation_s"], fwd * tokens),
        "old_logprob": (m.get("time/old_logprob_s", 0.0), 0.0 if trainer.sampling_logps_are_old else fwd * tokens),
        "ref_logprob": (m.get("time/ref_logprob_s", 0.0), fwd * tokens if trainer.ref_model is not None else 0.0),
        "forward_backward": (m["time/update_s"] - opt_s[0], 3.0 * fwd * tokens * args.update_epochs),
        "optimizer": (opt_s[0], 0.0),
    }
    out = {
        "iteration_s": round(wall, 2),
        "rows": int(rows),
        "tokens_per_pass": int(tokens),
        "generated_tokens": int(m["perf/generated_tokens"]),
        "forward_flops_per_token": fwd,
        "old_pass_skipped": bool(trainer.sampling_logps_are_old),
        "phases": {
            k: {"seconds": round(s, 3), "flops": f, "gflop_per_s": round(f / s / 1e9, 2) if s > 0 and f else None}
            for k, (s, f) in phases.items()
        },
        "success_rate": m["charts/success_rate"],
    }
    del trainer
    gc.collect()
    return out


def _autocast(config: dict) -> bool:
    from agentgym.models.loading import cpu_has_native_bf16

    return str(config.get("dtype")) in ("bfloat16", "bf16") and cpu_has_native_bf16()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=CONFIG, help=f"the RL config (default {CONFIG})")
    p.add_argument("--tasks", type=int, default=1, help="tasks per iteration (default 1; x the config's group size)")
    p.add_argument("--max-turns", type=int, default=4, help="turn limit per episode (default 4)")
    p.add_argument("--beta", type=float, default=0.01, help="KL coefficient, > 0 runs the reference pass (0.01)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: the thread policy)")
    p.add_argument("--rounds", type=int, default=1, help="iterations per variant, in ABBA order (default 1)")
    p.add_argument("--dtype", help="compute dtype (default: the config's; float32 lets the old pass go)")
    p.add_argument("--out", default="docs/figures/phases.json", help="the JSON record to write")
    opts = p.parse_args(argv)
    threads = apply_threads(opts.threads).threads
    from baselines import gigpo

    config = load_config_file(ROOT / opts.config)
    config.update(
        init_from=None,  # the base model: the SFT run the table starts from need not exist here
        num_tasks=opts.tasks,
        max_turns=opts.max_turns,
        beta=opts.beta,
        total_iterations=1,
        progress=False,
        plot=False,
        export_model=False,
        save_every=0,
        threads=threads,
        output_dir=str(ROOT / "runs" / "phase_bench"),
    )
    if opts.dtype:
        config["dtype"] = opts.dtype
    autocast = _autocast(config)
    compute = torch.bfloat16 if autocast else torch.float32  # the phases' matmuls run in this dtype
    mm = {
        "square_1024": matmul_flops(1024, 1024, 1024, dtype=compute),
        "smollm2_mlp_512_tokens": matmul_flops(512, 576, 1536, dtype=compute),
    }
    print(
        f"matmul {compute} at {threads} thread(s): " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in mm.items())
    )
    peak = max(mm.values())
    runs = {}
    # under bf16 autocast the sampler's log-probs are not the old pass's numbers: both runs would be the same
    variants = (("before", False),) if autocast else (("before", False), ("after", True))
    # ABBA order over --rounds x 2 iterations per variant, so a load that drifts during the run hits both alike
    order = [v for r in range(opts.rounds) for v in (variants if r % 2 == 0 else variants[::-1])]
    samples: dict[str, list[dict]] = {}
    for label, reuse in order:
        args = make_args(gigpo.Args, {**config, "exp_name": f"phase_{label}", "reuse_sampling_logprobs": reuse})
        r = one_iteration(args)
        for ph in r["phases"].values():
            ph["share_of_matmul_peak"] = round(ph["gflop_per_s"] * 1e9 / peak, 3) if ph["gflop_per_s"] else None
        samples.setdefault(label, []).append(r)
        print(
            f"{label}: iteration {r['iteration_s']} s, "
            + ", ".join(f"{k} {v['seconds']} s ({v['gflop_per_s']} GFLOP/s)" for k, v in r["phases"].items()),
            flush=True,
        )
    for label, rs in samples.items():  # the median iteration of each variant, with every iteration's time kept
        rs = sorted(rs, key=lambda r: r["iteration_s"])
        runs[label] = {**rs[(len(rs) - 1) // 2], "iteration_s_all": [r["iteration_s"] for r in samples[label]]}
    record = {
        "what": "one SmolLM2-135M RL iteration per phase: seconds, achieved FLOP/s, share of measured matmul peak",
        "value": {label: r["iteration_s"] for label, r in runs.items()},
        "runs": runs,
        "matmul_flop_per_s": mm,
        "matmul_dtype": str(compute),
        "threads": threads,
        "settings": {"config": opts.config, "tasks": opts.tasks, "max_turns": opts.max_turns, "beta": opts.beta,
                     "rounds": opts.rounds,
                     "dtype": config.get("dtype"), "bf16_autocast_on_this_cpu": _autocast(config)},
    }  # fmt: skip
    write_record(opts.out, record, "tools/phase_bench.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
