"""Reproduce a published table: train every row's baseline, evaluate it on the suite, compare with the paper.

    python tools/reproduce.py --table sapo-alfworld-webshop                  # every row, 3 seeds, full scale
    python tools/reproduce.py --table sapo-alfworld-webshop --rows qwen2-5-1-5b-instruct-grpo --seeds 1
    python tools/reproduce.py --table erl --scale small --seeds 1,2          # a short CPU pipeline check
    python tools/reproduce.py --table seed-alfworld --list                   # rows, configs, what is missing

For each selected row, suite and seed: load the row's config (``baselines/configs/<stem>.yaml``; at
``--scale small`` ``baselines/configs/small/<stem>.yaml``, or the full config with :data:`SMALL_OVERRIDES`,
or those overrides alone), train with the baseline's ``train(args)`` (``baselines/<name>.py``; a config
may name another file with a ``_baseline:`` key), then play every task of the suite with the trained
policy (one episode per task, temperature 0.4 as the papers' validation) and write a leaderboard
submission that ``agentgym leaderboard verify`` accepts. ``--entries DIR`` also copies each run into the
board's entries. At the end it prints reported vs reproduced: mean ± std over seeds and the delta.

``--scale small`` uses a tiny random model for two iterations, on the env of the small config (Sokoban
unless a small config says otherwise), so it evaluates on *that env's* suite: it checks that training,
evaluation, submission and verification run end to end, and its numbers are not the paper's. The
board's README says which rows have been run at which scale.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python tools/reproduce.py` from anywhere
    sys.path.insert(0, str(ROOT))

CONFIGS = ROOT / "baselines" / "configs"
REPORTED = ROOT / "leaderboards" / "reported"

#: Settings of ``--scale small``: a tiny random model that answers with one action word, a few episodes.
SMALL_OVERRIDES: dict[str, Any] = {
    "model": "tiny",
    "env_id": "agentgym/Sokoban-v0",
    "env_kwargs": {},
    "task_split": None,
    "val_split": None,
    "val_extra_splits": [],
    "prompt_style": "bare",
    "restrict_vocab": ["up", "down", "left", "right"],
    "allow_eos": False,
    "max_new_tokens": 1,
    "max_prompt_tokens": 2048,
    "max_turns": None,
    "num_tasks": 4,
    "group_size": 2,
    "total_iterations": 2,
    "learning_rate": 1e-3,
    "micro_batch_size": 8,
    "val_every": 0,
    "save_every": 0,
    "plot": False,
    "progress": False,
    "dtype": "float32",
    "device": "cpu",
}
#: Envs cheap enough for a small-scale run to train and evaluate on directly.
CHEAP_ENVS = (
    "agentgym/Sokoban-v0",
    "agentgym/SokobanLetters-v0",
    "agentgym/FrozenLake-v0",
    "agentgym/FrozenLakeLetters-v0",
)
#: Small-scale settings of method-specific fields, applied where the baseline's Args has them.
SMALL_EXTRA: dict[str, Any] = {"reflection_max_new_tokens": 4, "sft_epochs": 1}

#: Validation temperature of the verl-agent protocol (REPORTED.md).
EVAL_TEMPERATURE = 0.4


@dataclass
class RowPlan:
    """How to reproduce one reported row: the baseline file and a config stem per suite."""

    baseline: str | None  # baselines/<name>.py; None: not reproducible here (closed model, no implementation)
    stems: dict[str, str] = field(default_factory=dict)  # suite -> config stem
    why_not: str = ""


def _rl(algo: str, model: str, envs: dict[str, str]) -> RowPlan:
    return RowPlan(algo.split("_")[0], {suite: f"{algo}_{env}_{model}" for suite, env in envs.items()})


_SAPO_ENVS = {"alfworld-eval": "alfworld", "webshop-test": "webshop"}
_NOT_HERE = "a prompting row: evaluate it with `agentgym eval --suite ... --agent react:hf:MODEL` instead"


def _sapo_rows() -> dict[str, RowPlan]:
    rows: dict[str, RowPlan] = {
        "gpt-4o-closed-prompting": RowPlan(None, why_not="closed model"),
        "gemini-2-5-pro-closed-prompting": RowPlan(None, why_not="closed model"),
    }
    for size, tag in (("1-5b", "qwen2.5-1.5b"), ("7b", "qwen2.5-7b")):
        p = f"qwen2-5-{size}-instruct"
        rows[f"{p}-react"] = RowPlan(None, why_not=_NOT_HERE)
        rows[f"{p}-reflexion"] = RowPlan(None, why_not=_NOT_HERE)
        rows[f"{p}-empg"] = RowPlan(None, why_not="EMPG is not implemented in baselines/")
        rows[f"{p}-rloo"] = _rl("rloo", tag, _SAPO_ENVS)
        rows[f"{p}-gigpo-w-std"] = _rl("gigpo_std", tag, _SAPO_ENVS)
        rows[f"{p}-gigpo-w-o-std"] = _rl("gigpo_nostd", tag, _SAPO_ENVS)
        rows[f"{p}-ppo-with-critic"] = _rl("ppo", tag, _SAPO_ENVS)
        rows[f"{p}-grpo"] = _rl("grpo", tag, _SAPO_ENVS)
        rows[f"{p}-sapo"] = _rl("sapo", tag, _SAPO_ENVS)
    return rows


#: table id (a file in leaderboards/reported/) -> row id -> plan.
TABLES: dict[str, dict[str, RowPlan]] = {
    "sapo-alfworld-webshop": _sapo_rows(),
    "seed-alfworld": {
        "qwen2-5-3b-grpo": RowPlan(
            "grpo",
            {
                "alfworld-eval": "seed/grpo_alfworld_qwen2.5-3b",
                "alfworld-valid_unseen": "seed/grpo_alfworld_qwen2.5-3b",
            },
        ),
        "qwen2-5-3b-seed-with-sft-stage": RowPlan(
            "seed",
            {
                "alfworld-eval": "seed/seed_alfworld_qwen2.5-3b",
                "alfworld-valid_unseen": "seed/seed_alfworld_qwen2.5-3b",
            },
        ),
        "qwen2-5-3b-seed-no-sft-stage": RowPlan("seed", {"alfworld-eval": "seed/seed_nosft_alfworld_qwen2.5-3b"}),
        "qwen2-5-3b-seed-60-of-the-training-data": RowPlan(
            "seed", {"alfworld-eval": "seed/seed_data60_alfworld_qwen2.5-3b"}
        ),
        "qwen2-5-7b-grpo": RowPlan("grpo", {"alfworld-eval": "seed/grpo_alfworld_qwen2.5-7b"}),
        "qwen2-5-7b-seed": RowPlan("seed", {"alfworld-eval": "seed/seed_alfworld_qwen2.5-7b"}),
        "qwen2-5-vl-3b-grpo": RowPlan(None, why_not="a vision-language model on image Sokoban; agentgym is text-only"),
        "qwen2-5-vl-3b-seed": RowPlan(None, why_not="a vision-language model on image Sokoban; agentgym is text-only"),
    },
    "erl": {
        # RLVR = the GRPO baseline ERL compares with (the authors' train_grpo_*.sh): baselines/grpo.py.
        "qwen3-4b-instruct-2507-rlvr": RowPlan("grpo", {"sokoban-erl": "erl/grpo_sokoban_qwen3-4b"}),
        "qwen3-4b-instruct-2507-erl": RowPlan("erl", {"sokoban-erl": "erl/erl_sokoban_qwen3-4b"}),
        "olmo-3-7b-rlvr": RowPlan("grpo", {"sokoban-erl": "erl/grpo_sokoban_olmo3-7b"}),
        "olmo-3-7b-erl": RowPlan("erl", {"sokoban-erl": "erl/erl_sokoban_olmo3-7b"}),
        "not-stated-rlvr": RowPlan("grpo", {"hotpotqa-erl": "erl/grpo_hotpotqa_qwen3-4b"}),
        "not-stated-erl": RowPlan("erl", {"hotpotqa-erl": "erl/erl_hotpotqa_qwen3-4b"}),
    },
}


def reported_table(table: str) -> dict[str, Any]:
    return json.loads((REPORTED / f"{table}.json").read_text(encoding="utf-8"))


def resolve_config(stem: str, scale: str) -> tuple[dict[str, Any], str]:
    """The config dict of a row and a description of where it came from."""
    from agentgym.rl.config import load_config_file

    full = CONFIGS / f"{stem}.yaml"
    if scale == "full":
        if not full.exists():
            raise FileNotFoundError(f"{full.relative_to(ROOT)} does not exist yet")
        return load_config_file(full) | _raw_underscore(full), str(full.relative_to(ROOT))
    small = CONFIGS / "small" / f"{stem}.yaml"
    if small.exists():
        return load_config_file(small) | _raw_underscore(small), str(small.relative_to(ROOT))
    if full.exists():
        return load_config_file(full) | _raw_underscore(
            full
        ) | SMALL_OVERRIDES, f"{full.relative_to(ROOT)} + small overrides"
    return dict(SMALL_OVERRIDES), "built-in small overrides (no config for this row yet)"


def _raw_underscore(path: Path) -> dict[str, Any]:
    # load_config_file drops "_" keys (not Args fields); keep _baseline (from the file or its bases) for choosing
    # the script.
    from agentgym.rl.config import read_config

    data = read_config(path)
    return {"_baseline": data["_baseline"]} if "_baseline" in data else {}


def load_baseline(name: str):
    """The module of baseline ``name`` (``baselines/<name>.py``), through the table of ``agentgym train``."""
    from baselines.cli import TRAINERS, load_trainer

    if name not in TRAINERS:
        raise FileNotFoundError(f"baselines/{name}.py does not exist yet")
    return load_trainer(name)


def train_capturing(module: Any, args: Any) -> tuple[Any, dict[str, float]]:
    """Run ``module.train(args)`` and return the trainer it built (to evaluate its final policy)."""
    from agentgym.rl.trainer import Trainer

    made: list[Any] = []
    original = Trainer.__init__

    def init(self, *a, **k):
        original(self, *a, **k)
        made.append(self)

    Trainer.__init__ = init  # baselines build their Trainer (or subclass) inside train()
    try:
        metrics = module.train(args)
    finally:
        Trainer.__init__ = original
    if not made:
        raise RuntimeError(f"{module.__name__}.train() built no agentgym.rl.trainer.Trainer to evaluate")
    return made[-1], metrics


def evaluate_policy(trainer: Any, suite: Any, *, seed: int, chunk: int = 100) -> list[Any]:
    """Play every task of ``suite`` once with the trainer's current policy; the episode records."""
    import torch

    from agentgym.rl.rollout import collect_rollouts

    a = trainer.args
    env_id = suite.env_ids[0]
    specs = suite.specs(env_id)
    episodes = []
    with torch.no_grad():
        for i in range(0, len(specs), chunk):
            rb = collect_rollouts(
                trainer.generator,
                trainer.tokenizer,
                env_id,
                specs[i : i + chunk],
                group_size=1,
                template=trainer.template,
                max_turns=None,  # the env's own limit: an early cut would not replay as the env ends it
                history_length=a.history_length,
                max_prompt_tokens=a.max_prompt_tokens,
                max_new_tokens=a.max_new_tokens,
                temperature=EVAL_TEMPERATURE,
                top_p=1.0,
                return_logprobs=False,
                suppress_token_ids=getattr(trainer, "exclude_ids", None) or None,
                seed=seed * 1000 + i,
                agent_name=f"{trainer.algo}:{a.model}",
            )
            episodes += rb.episodes
    return episodes


def suite_for_env(env_id: str, preferred: str):
    from agentgym.suites import SUITES

    if preferred in SUITES and SUITES[preferred].env_ids == [env_id]:
        return SUITES[preferred]
    for s in SUITES.values():
        if s.env_ids == [env_id]:
            return s
    raise KeyError(f"no suite plays {env_id}; small configs must train on a suite's env (e.g. agentgym/Sokoban-v0)")


def effective_config(plan: RowPlan, suite_name: str, scale: str) -> tuple[dict[str, Any], str, str, Any]:
    """``(Args fields, where they came from, baseline name, baseline module)`` of one row and suite."""
    config, source = resolve_config(plan.stems[suite_name], scale)
    baseline = config.pop("_baseline", plan.baseline)
    module = load_baseline(baseline)
    if scale == "small":
        from agentgym.suites import SUITES

        names = {f.name for f in dataclasses.fields(module.Args)}
        config.update({k: v for k, v in SMALL_EXTRA.items() if k in names})
        reported_envs = SUITES[suite_name].env_ids if suite_name in SUITES else []
        if "small overrides" in source and reported_envs and reported_envs[0] in CHEAP_ENVS:
            config["env_id"] = reported_envs[0]  # a procedural suite: the small run can play the paper's own env
    return config, source, baseline, module


def run_row(table: str, row: dict[str, Any], plan: RowPlan, suite_name: str, seed: int, opts: argparse.Namespace):
    """Train + evaluate one (row, suite, seed); the path of the written submission and its results."""
    from agentgym.episodes import JsonlWriter
    from agentgym.leaderboard.entry import write_submission
    from agentgym.rl.config import make_args

    config, source, baseline, module = effective_config(plan, suite_name, opts.scale)
    run_name = f"{table}--{row['id']}--{suite_name}--{opts.scale}--seed{seed}"
    config.update(exp_name=run_name, output_dir=str(Path(opts.out) / "runs"), seed=seed)
    args = make_args(module.Args, config)
    t0 = time.perf_counter()
    trainer, train_metrics = train_capturing(module, args)
    suite = suite_for_env(args.env_id, suite_name)
    episodes = evaluate_policy(trainer, suite, seed=seed)
    sub_dir = Path(opts.out) / "submissions" / run_name
    log = sub_dir / "logs" / "eval.jsonl"
    if log.exists():
        log.unlink()
    with JsonlWriter(log, fsync=False) as w:
        for ep in episodes:
            w.write(ep)
    size = row.get("model_size_b") if opts.scale == "full" else None
    meta = {
        "name": f"{row['method']} (agentgym reproduction{', small scale' if opts.scale == 'small' else ''})",
        "model": str(args.model) if opts.scale == "small" else row["model"],
        "model_size_b": size,
        "method": row["method"],
        "method_type": row["method_type"],
        "parameters": {
            "reproduce": {
                "table": table,
                "row": row["id"],
                "scale": opts.scale,
                "seeds": str(seed),
                "config": source,
                "baseline": f"baselines/{baseline}.py",
                "reported_suite": suite_name,
            },
            "train_iterations": int(getattr(args, "total_iterations", 0)),
            "eval_temperature": EVAL_TEMPERATURE,
            "final_train_success_rate": float(train_metrics.get("charts/success_rate", float("nan"))),
        },
        "code": "tools/reproduce.py",  # a path in this repository
        "date": time.strftime("%Y-%m-%d"),
        "verified": False,
        "runnable": {
            "logs_only": True,
            "reason": "the trained checkpoint is not published with the entry, so there is no pinned model to re-run",
            "agent_name": episodes[0].agent if episodes else "unknown",
        },
    }
    path = write_submission(sub_dir, suite, {suite.env_ids[0]: log}, meta)
    data = json.loads(path.read_text())
    return sub_dir, suite, data["results"][suite.env_ids[0]], time.perf_counter() - t0


def comparison_lines(
    row: dict[str, Any], reported_suite: str, run_suite: str, runs: list[dict[str, float]]
) -> list[str]:
    """Markdown rows: reported vs reproduced (mean ± std over seeds) and the delta, per column.

    Columns of the run that the paper does not report (or a run on another suite, at small scale) are
    listed with the reported cell empty and no delta.
    """
    from agentgym.results import mean_std

    mean, std = mean_std(runs)
    reported = row["results"].get(reported_suite, {})
    rep_std = row.get("std", {}).get(reported_suite, {})
    out = []
    same = reported_suite == run_suite
    cols = list(reported) if same else []
    cols += [c for c in mean if c not in cols]
    for col in cols:
        rep = reported.get(col) if same else None
        rs = "" if rep is None else f"{rep:.1f}" + (f"±{rep_std[col]:.1f}" if col in rep_std else "")
        got = mean.get(col)
        cell = "n/a" if got is None else f"{got:.1f}±{std[col]:.1f}"
        delta = "" if rep is None or got is None else f"{got - rep:+.1f}"
        out.append(f"| {row['id']} | {reported_suite} | {col} | {rs} | {run_suite} | {cell} | {delta} | {len(runs)} |")
    if not same:
        summary = ", ".join(f"{c} {v:.1f}" for c, v in reported.items())
        out.insert(0, f"| {row['id']} | {reported_suite} | (paper) | {summary} | | | | |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--table", required=True, choices=sorted(TABLES), help="published table to reproduce (required)")
    p.add_argument("--rows", help="comma-separated row ids (see --list); default: every reproducible row")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds (default 1,2,3; papers: 3)")
    p.add_argument(
        "--scale",
        choices=["full", "small"],
        default="full",
        help="full: the paper's configs (GPU); small: CPU-sized configs under baselines/configs/small (default full)",
    )
    p.add_argument("--out", default="runs/reproduce", help="runs and submissions go here (default runs/reproduce)")
    p.add_argument("--entries", help="also copy each verified run into this entries folder (leaderboards/entries)")
    p.add_argument("--list", action="store_true", help="list the table's rows and their configs, then exit")
    opts = p.parse_args(argv)
    table = reported_table(opts.table)
    plans = TABLES[opts.table]
    rows = {r["id"]: r for r in table["rows"]}
    if opts.list:
        for rid, plan in plans.items():
            if plan.baseline is None:
                print(f"{rid:45s} not reproduced here: {plan.why_not}")
                continue
            for suite_name, stem in plan.stems.items():
                full = CONFIGS / f"{stem}.yaml"
                state = "ok" if full.exists() else "missing"
                code = "" if (ROOT / "baselines" / f"{plan.baseline}.py").exists() else " (missing)"
                print(f"{rid:45s} {suite_name:22s} baselines/{plan.baseline}.py{code}  configs/{stem}.yaml ({state})")
        return 0
    wanted = opts.rows.split(",") if opts.rows else [r for r, pl in plans.items() if pl.baseline]
    unknown = [r for r in wanted if r not in plans]
    if unknown:
        raise SystemExit(f"unknown row(s) {unknown}; see --list")
    seeds = [int(s) for s in opts.seeds.split(",") if s.strip()]
    from agentgym.leaderboard.entry import make_entry
    from agentgym.leaderboard.verify import verify, write_verification

    lines = []
    failures = 0
    cache: dict[tuple, tuple] = {}  # small scale: several suites of a row may resolve to the same run
    for rid in wanted:
        plan = plans[rid]
        if plan.baseline is None:
            print(f"skip {rid}: {plan.why_not}")
            continue
        for suite_name in plan.stems:
            runs, suite = [], None
            for seed in seeds:
                try:
                    # Small runs of a row's suites often resolve to one and the same training run: do it once.
                    cfg, _, base, _ = effective_config(plan, suite_name, opts.scale)
                    cfg = {k: v for k, v in cfg.items() if k not in ("exp_name", "output_dir")}
                    key = (rid, base, json.dumps(cfg, sort_keys=True, default=str), seed)
                    if opts.scale == "small" and key in cache:
                        sub, suite, res, secs = cache[key]
                        runs.append(res)
                        continue
                    sub, suite, res, secs = run_row(opts.table, rows[rid], plan, suite_name, seed, opts)
                    cache[key] = (sub, suite, res, secs)
                except (FileNotFoundError, KeyError, ValueError, RuntimeError) as exc:
                    print(f"skip {rid} / {suite_name} / seed {seed}: {exc}")
                    failures += 1
                    continue
                report = verify(sub, full=True)
                status = "replay-verified" if report.ok else "REJECTED"
                print(f"{rid} / {suite.name} / seed {seed}: {res} ({secs:.0f} s, {status})")
                if not report.ok:
                    print(report.summary())
                    failures += 1
                elif opts.entries:
                    entry, _ = make_entry(sub, opts.entries, replay_sample=5)
                    if entry is not None:  # the full replay above passed on these very files
                        write_verification(entry, report)
                        print(f"  entry: {entry}")
                runs.append(res)
            if runs:
                lines += comparison_lines(rows[rid], suite_name, suite.name, runs)
    if lines:
        print("\n| row | reported on | column | reported | reproduced on | reproduced (mean±std) | delta | seeds |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(lines))
        if opts.scale == "small":
            print("\n(small scale: a tiny random model for a few iterations, on the small config's env: the numbers")
            print(" show that training, evaluation and verification ran, and say nothing about the paper's.)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
