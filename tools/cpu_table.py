"""The CPU table of baselines/README.md ("A real model on CPU"): SmolLM2-135M-Instruct, SFT, then RL from it.

    python tools/cpu_table.py --env frozenlake --methods grpo ppo sapo --seeds 1,2,3 --jobs 2
    python tools/cpu_table.py --env frozenlake --methods grpo erl seed --seeds 1     # ERL and SEED vs GRPO
    python tools/cpu_table.py --env frozenlake --methods grpo ppo sapo --table-only  # summarise what exists
    python tools/cpu_table.py --env frozenlake --methods grpo --entries leaderboards/entries
    python tools/cpu_table.py --env frozenlake --sft mech --methods grpo seed-oracle seed erl-oracle erl sapo gigpo \\
        --seeds 1,2,3 --jobs 2 --record docs/records/cpu_mech_frozenlake.json

``--sft mech`` is the seed methods' comparison: every run starts from one fixed lesson/reflection SFT checkpoint
(``sft_smollm2_ENV_mech.yaml``: action rows plus trajectory -> lesson, failed attempt -> reflection and
reflection/lesson-in-context rows written by the privileged grid analyser), in its own folders (``runs/mech``,
``runs/heldout/ENV-mech``), so ``erl`` / ``seed`` are ERL and SEED with the model's *own* reflections and lessons
and ``erl-oracle`` / ``seed-oracle`` the same methods with the privileged analyser's (the mechanisms' upper bound;
they run the first of ``--seeds`` only: one seed is enough for them; ``--oracle-seeds N``: the first N), variants
``seed-strong-oracle`` (lambda_opd 1) and ``sapo-readout`` (the read-out rows at 100x the learning rate);
``--sft mech_plans`` the same from the recipe whose text-in-context rows sit where the text decides the move
(``runs/mech_plans``), ``--sft mech_lessons`` from that recipe with lesson rows at the cells a lesson does not name
too (``runs/mech_lessons``). The table then also reports each method's mechanism metrics (``MECHANISM``), mean
over iterations and at the last one, per seed;
``--record`` writes it all, with the paired sign test against GRPO, as the record the docs render.

Every step is skipped when its output exists, so a killed run picks up where it stopped:

1. **SFT** -- ``baselines/sft.py --config baselines/configs/cpu/sft_smollm2_ENV.yaml`` into ``runs/sft_smollm2_ENV``
   (behaviour cloning of the env expert's trajectories on training seeds 0-255).
2. **RL from it** -- per method and seed, ``baselines/METHOD.py --config baselines/configs/cpu/METHOD_smollm2_ENV.yaml
   --seed S --exp-name METHOD_smollm2_ENV_sS`` (the configs start from the SFT run: ``init_from``), at equal
   env-episode budgets (``charts/env_episodes`` where a method counts its own, e.g. ERL's second attempts).
3. **Held-out evaluation** -- ``agentgym eval --suite SUITE --agent hf:RUN/model`` with the configs' prompt
   settings, on the suite's 100 seeds (100000-100099, never trained on), at each ``--temperatures`` (default: 0.4,
   the papers' validation temperature and ``agentgym eval``'s default, then greedy), written as leaderboard
   submissions under ``runs/heldout/ENV/TAG/`` (the base model and the SFT model too).
4. **Table** -- per stage the mean success over seeds +/- spread (half the range), invalid-action rate, env episodes
   trained and wall time per iteration; ``--png`` draws it with each RL run's training curve.
5. ``--entries DIR`` -- ``agentgym submit`` every evaluation into the board (replay-verified; the checkpoints are
   not published, so the entries are logs-only: replay-verified, never re-run verified).

``--archive DIR`` (the default with ``--sft mech``: ``docs/records/runs/cpu_mech_ENV``) keeps what the table needs of
each finished run in the repository: its held-out evaluations (``submission.json`` and the gzipped episodes) and its
``metrics.jsonl``, with the SFT checkpoint's SHA-256 (``sft.json``). A later session on a fresh machine restores
them, retrains the SFT stage on one thread (there the same command gives the same weights, which the hash checks;
two threads give other weights from the same rows; a different checkpoint is refused, it would unpair the
comparison; the same one is recorded as a rebuild in ``sft.json``) and trains only the runs still missing.

``kill -USR1 PID`` drains: the runs in progress finish (trained, evaluated, archived), no other starts, the table
is written; the same command later trains the rest.

``--jobs 2`` runs two RL trainings (then their evaluations) at once with one thread each: on a 2-core machine that
gives ~1.3x the throughput of one two-thread process (HF generation is overhead-bound at these batch sizes).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import demo  # noqa: E402

ARCHIVE_DEFAULT = "docs/records/runs/cpu_{sft}_{env}"

CPU_CONFIGS = ROOT / "baselines" / "configs" / "cpu"
#: --env -> the held-out suite (100 seeds from agentgym.suites.EVAL_SEED_BASE)
SUITES = {"frozenlake": "frozenlake-notslippery", "sokoban": "sokoban"}
METHODS = (
    "grpo",
    "ppo",
    "sapo",
    "erl",
    "seed",
    "rloo",
    "gigpo",
    "erl-oracle",
    "seed-oracle",
    "seed-strong-oracle",
    "sapo-readout",
)


@dataclasses.dataclass(frozen=True)
class SftRecipe:
    """One SFT stage the RL comparisons start from (``--sft KEY``: config ``sft_smollm2_ENV_KEY.yaml``, runs in
    ``runs/KEY``; the action-only one ``sft_smollm2_ENV.yaml`` in ``runs``): what the board calls it (baked into the
    submitted entries: never renamed) and what the docs' tables call it."""

    board: str
    docs: str


#: --sft -> its recipe: "action" the action-only behaviour cloning, "mech" the lesson/reflection SFT, "mech_plans"
#: the same with context rows where the text, not the board, decides the move, "mech_lessons" mech_plans with lesson
#: rows at the cells a lesson does not name too
SFT_RECIPES = {
    "action": SftRecipe("SFT", "action-only SFT"),
    "mech": SftRecipe("SFT with lessons and reflections", "lesson/reflection SFT"),
    "mech_plans": SftRecipe("SFT with lessons, reflections and plan-reading rows", "plan-reading SFT"),
    "mech_lessons": SftRecipe(
        "SFT with plan-reading rows and lessons off their cell", "plan-reading SFT, lessons at other cells too"
    ),
}


def sft_recipe_of(model: str) -> SftRecipe:
    """The recipe of an SFT run folder (``runs/mech_lessons/sft_smollm2_frozenlake_mech_lessons[/model]``: the
    folder under ``runs`` names it)."""
    for part in Path(model).parts:
        if part in SFT_RECIPES and part != "action":
            return SFT_RECIPES[part]
    raise ValueError(f"{model}: not under runs/KEY for an SFT recipe KEY in {sorted(SFT_RECIPES)}")


#: ``--sft-seeds``: the extra SFT runs take their 8-row steps in 2-row pieces (the same gradients, token-mean over the
#: step), so one fits beside an RL job (the lesson/reflection SFT peaked at 19 GB with 8-row pieces)
SFT_SEED_MICRO_BATCH = 2
#: a variant -> the method it changes one setting of: each run is paired with that method's run of the same RL seed
#: too (``against_base``), which says what the setting does where GRPO's pairing mixes it with the method's
VARIANT_OF = {"seed-strong-oracle": "seed-oracle", "sapo-readout": "sapo"}
#: the metrics that show each seed method's own mechanism at work (logged every iteration by the baselines)
MECHANISM = {
    "erl": (
        "erl/reflection_tagged_rate",
        "erl/second_success_rate",
        "erl/first_success_same_tasks",
        "erl/second_minus_first_same_tasks",
    ),
    "seed": (
        "seed/lesson_parse_rate",
        "seed/gate_mean",
        "seed/lesson_conditioned_success",
        "seed/lesson_free_success",
        "seed/lesson_gap",
    ),
    "sapo": ("sapo/value_return_corr", "sapo/value_return_ev", "sapo/q_return_corr", "sapo/q_return_ev"),
}
LOGS_ONLY = (
    "CPU table by tools/cpu_table.py: the SFT/RL checkpoints are not published with the entry, so there is no "
    "pinned model to re-run"
)


def script(method: str) -> str:
    """The baseline file of a table method (``erl-oracle`` runs ``baselines/erl.py``)."""
    return method.split("-")[0]


def checkout_path(path: str) -> Path:
    """``path`` (relative to the checkout, or absolute) made absolute without resolving symlinks: a ``runs`` folder
    that links elsewhere keeps its name in the commands, logs and evaluation agent names (``hf:runs/...``)."""
    return Path(os.path.abspath(ROOT / path))


def config_path(env: str, method: str, sft: str = "action") -> Path:
    """``METHOD_smollm2_ENV.yaml`` (``erl-oracle`` -> ``erl_oracle_...``; the SFT stage with ``--sft mech``:
    ``sft_smollm2_ENV_mech.yaml``)."""
    suffix = f"_{sft}" if method == "sft" and sft != "action" else ""
    return CPU_CONFIGS / f"{method.replace('-', '_')}_smollm2_{env}{suffix}.yaml"


def config(env: str, method: str, sft: str = "action") -> dict:
    from agentgym.rl.config import load_config_file

    path = config_path(env, method, sft)
    if not path.exists():
        raise SystemExit(f"no CPU config {path.relative_to(ROOT)}: write one next to the others first")
    return load_config_file(path)


def run(cmd: list[str], log: Path, threads: int) -> float:
    """Run ``cmd`` from the checkout with ``threads`` BLAS/OpenMP threads, output to ``log``; wall seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    print(f"$ {' '.join(cmd)}   (log: {log.relative_to(ROOT) if log.is_relative_to(ROOT) else log})", flush=True)
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {' '.join(cmd)} (see {log})")
    return time.perf_counter() - t0


def train(
    env: str,
    method: str,
    seed: int | None,
    runs: Path,
    threads: int,
    sft_epochs: int | None = None,
    sft: str = "action",
) -> Path:
    """Train one run (skipped when its exported model exists); its run folder. ``sft_epochs`` overrides the SFT
    config's one epoch (``total_iterations``) for the SFT run; ``sft`` names the SFT stage every RL run starts from
    (one fixed checkpoint: the pairing of the comparison)."""
    cfg = config(env, method, sft)
    name = cfg["exp_name"] if seed is None else f"{cfg['exp_name']}_s{seed}"
    run_dir = runs / name
    if (run_dir / "model" / "config.json").exists():
        return run_dir
    cmd = [sys.executable, f"baselines/{script(method)}.py", "--config", str(config_path(env, method, sft))]
    cmd += ["--output-dir", str(runs), "--exp-name", name, "--no-progress"]
    if seed is not None and method == "sft":  # another training seed of the SFT stage (the SFT row's own spread)
        cmd += ["--seed", str(seed), "--micro-batch-size", str(SFT_SEED_MICRO_BATCH)]
    elif seed is not None:  # an RL run from the fixed SFT checkpoint
        cmd += ["--seed", str(seed), "--init-from", str(runs / config(env, "sft", sft)["exp_name"])]
    if method == "sft" and sft_epochs:
        cmd += ["--total-iterations", str(sft_epochs)]
    cmd += ["--save-every", "1"]  # a checkpoint every iteration (SFT: epoch), so a killed run loses one at most
    if (run_dir / "metrics.jsonl").exists():
        cmd.append("--resume")  # a killed run continues from its last checkpoint
    run(cmd, run_dir.with_name(run_dir.name + ".log"), threads)
    prune_checkpoints(run_dir)
    return run_dir


def prune_checkpoints(run_dir: Path) -> None:
    """Keep a finished run's last checkpoint only (its exported model is what the evaluations read; 1.6 GB per
    SmolLM2 checkpoint with its optimizer, and the trainer keeps two while it runs)."""
    from agentgym.rl.checkpoint import list_checkpoints

    if (run_dir / "model" / "config.json").exists():
        for old in list_checkpoints(run_dir)[:-1]:
            shutil.rmtree(old)


def tag(temperature: float) -> str:
    """Folder of the evaluations at one sampling temperature: ``greedy`` or ``t0.4``."""
    return "greedy" if temperature == 0 else f"t{temperature:g}"


def evaluate(env: str, model: str, name: str, out: Path, threads: int, temperature: float) -> Path:
    """Held-out evaluation of ``model`` (a folder, or ``base``) at ``temperature`` as a submission
    ``out/TAG/name`` (agent sampling seed 0, so a rerun plays the same episodes)."""
    sub = out / tag(temperature) / name
    if (sub / "submission.json").exists():
        return sub
    cfg = config(env, "sft")
    # hf:smollm2 is the shipped model; run folders are named relative to the checkout, as in the README's commands
    spec = "smollm2" if model == "base" else os.path.relpath(model, ROOT)
    cmd = [sys.executable, "-m", "agentgym", "eval", "--suite", SUITES[env], "--agent", f"hf:{spec}"]
    cmd += ["--temperature", f"{temperature:g}", "--max-new-tokens", str(cfg["max_new_tokens"])]
    cmd += ["--history-length", str(cfg["history_length"]), "--style", cfg["prompt_style"]]
    cmd += ["--batch-size", "50", "--quiet", "--no-resume", "--out", os.path.relpath(sub, ROOT)]
    run(cmd, out / tag(temperature) / f"{name}.log", threads)
    return sub


def train_and_evaluate(
    env: str,
    method: str,
    seed: int,
    runs: Path,
    out: Path,
    threads: int,
    temperatures: list[float],
    sft: str = "action",
    archive: Path | None = None,
    sft_epochs: int | None = None,
) -> None:
    """One RL run (or, ``method`` ``sft``, one more training seed of the SFT stage), trained and evaluated at every
    temperature (nothing to do when its evaluations exist, e.g. restored from the archive: the model is only needed
    for them), then archived."""
    name = eval_name(method, seed)
    if _evaluated(out, temperatures, name):
        return
    run_dir = train(env, method, seed, runs, threads, sft_epochs, sft=sft)
    for t in temperatures:
        evaluate(env, str(run_dir / "model"), name, out, threads, t)
    if archive is not None:
        archive_run(archive, out, temperatures, name, run_dir)


def eval_name(method: str, seed: int) -> str:
    """The held-out evaluation of a run: ``smollm2-sft-grpo_s1``; ``smollm2-sft_s2`` for the SFT stage's training
    seed 2 (the fixed checkpoint every RL run starts from is ``smollm2-sft``)."""
    return f"smollm2-sft_s{seed}" if method == "sft" else f"smollm2-sft-{method}_s{seed}"


def sft_seed(env: str, sft: str) -> int:
    """The training seed of the fixed SFT checkpoint (its config's, else the trainer's default 1)."""
    from agentgym.rl.config import Args

    return int(config(env, "sft", sft).get("seed", Args.seed))


def archive_run(archive: Path, out: Path, temperatures: list[float], name: str, run_dir: Path | None) -> None:
    """Copy one finished run into ``archive``: its evaluation ``name`` at every temperature (``submission.json`` and
    the gzipped episodes) and, for an RL run, its ``metrics.jsonl``. Each folder is written aside and renamed into
    place, so a kill leaves the archive without the run, never with half of it."""
    for t in temperatures:
        src, dst = out / tag(t) / name, archive / "heldout" / tag(t) / name
        _copy_into(dst, [src / "submission.json", *sorted((src / "episodes").glob("*.jsonl*"))], src)
    if run_dir is not None:
        _copy_into(archive / "train" / run_dir.name, [run_dir / "metrics.jsonl"], run_dir)


def _copy_into(dst: Path, files: list[Path], base: Path) -> None:
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for f in files:
        (tmp / f.relative_to(base)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, tmp / f.relative_to(base))
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)


def restore_archive(archive: Path, runs: Path, out: Path) -> list[str]:
    """Copy the archived evaluations and training logs that ``out`` / ``runs`` lack back into them (a fresh machine
    continues the comparison); the names restored."""
    restored = []
    for sub in sorted(archive.glob("heldout/*/*/submission.json")):
        if sub.parent.name.endswith(".partial"):  # a copy a kill interrupted
            continue
        dst = out / sub.parent.relative_to(archive / "heldout")
        if not (dst / "submission.json").exists():
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(sub.parent, dst)
            restored.append(f"{dst.parent.name}/{dst.name}")
    for log in sorted(archive.glob("train/*/metrics.jsonl")):
        dst = runs / log.parent.name
        if not dst.exists() and not dst.name.endswith(".partial"):
            dst.mkdir(parents=True)
            shutil.copy2(log, dst / "metrics.jsonl")
            restored.append(dst.name)
    return restored


def weights_sha256(model_dir: Path) -> str:
    """SHA-256 over a saved model's weight files (``*.safetensors``, in name order): the identity of an SFT start."""
    h = hashlib.sha256()
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"no *.safetensors weights in {model_dir}")
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def sft_provenance(meta: dict) -> dict:
    """What a comparison record says of its SFT start from ``archive/sft.json``: the weights' hash, the fresh machines
    that rebuilt the same weights (``sft_rebuilds``, where any did) and, for a lesson/reflection recipe, the version
    of the privileged text it learned (archives from before the field: 1)."""
    out = {"sft_sha256": meta["sha256"]}
    if meta.get("rebuilds"):
        out["sft_rebuilds"] = meta["rebuilds"]
    if "oracle_text" in meta or "_mech" in meta["command"]:  # the lesson/reflection recipes: sft_smollm2_ENV_mech*
        out["oracle_text"] = meta.get("oracle_text", 1)
    return out


def run_started(run_dir: Path) -> str | None:
    """When a run folder's training began: the time stamp of its ``train.log``'s first line (None without one)."""
    log = run_dir / "train.log"
    first = log.read_text(encoding="utf-8").split("\n", 1)[0] if log.exists() else ""
    return first[:19] if first[:4].isdigit() else None


def warn_other_cpu(archive: Path, sft_dir: Path) -> None:
    """Say before an SFT start is rebuilt (hours on one thread) that the archive's start came from another CPU: its
    one-thread weights matched the same CPU's rebuilds, and another CPU gave other ones (the FrozenLake lessons start
    of 2026-12-06, rebuilt on an AMD EPYC); the hash check after training decides."""
    from agentgym.rl.runinfo import cpu_name

    meta = archive / "sft.json"
    if (sft_dir / "model" / "config.json").exists() or not meta.exists():
        return
    built_on = json.loads(meta.read_text()).get("versions", {}).get("device_name")
    if built_on != cpu_name():
        print(
            f"note: the SFT start archived in {os.path.relpath(archive, ROOT)} was built on "
            f"{built_on or 'a CPU it does not name'}, this machine is {cpu_name()}: the rebuild may give other "
            "weights, and the runs from it are then refused",
            flush=True,
        )


def check_sft(archive: Path, sft_dir: Path, command: str) -> str:
    """The SFT checkpoint's hash, written to ``archive/sft.json`` the first time (with when that run began and, for a
    lesson/reflection recipe, the version of the privileged text it learned: ``baselines.sft.oracle_text_of``, and
    its last validation, which the record reports where the run folder is not on the machine); a
    later checkpoint that differs from the archived runs' start is refused (their comparison would no longer be
    paired). One with the same hash from another run -- a fresh machine that retrained the start -- is added to the
    archive's ``rebuilds`` (its start, date, versions): the evidence that the command rebuilds the same weights. An
    archive from before ``started`` was recorded counts every run it meets as a rebuild (its first machine is gone)."""
    from agentgym.rl.runinfo import cpu_name, versions

    def machine() -> dict:  # what is written of the machine, only when something is written
        v = versions()
        return {k: v.get(k) for k in ("torch", "transformers", "numpy", "platform", "device_name")}

    digest = weights_sha256(sft_dir / "model")
    meta = archive / "sft.json"
    started = run_started(sft_dir)
    if meta.exists():
        known = json.loads(meta.read_text())
        if known["sha256"] != digest:
            built_on = known.get("versions", {}).get("device_name", "a CPU the archive does not name")
            raise SystemExit(
                f"the runs archived in {archive} started from the SFT checkpoint {known['sha256'][:12]} "
                f"({known['command']}, built on {built_on}); {sft_dir} is {digest[:12]}, built here on "
                f"{cpu_name()}. That command on one thread gives the same weights with the same versions on the "
                "same CPU, not always on another: retrain it there, or give another --archive for a new comparison"
            )
        seen = [known.get("started"), *(r["started"] for r in known.get("rebuilds", []))]
        changed = dict(known)
        if started is not None and started not in seen:
            when = time.strftime("%Y-%m-%d", time.gmtime())
            changed["rebuilds"] = [
                *known.get("rebuilds", []),
                {"started": started, "date": when, "versions": machine()},
            ]
        if "validation" not in known and (validation := last_validation(sft_dir)):
            changed["validation"] = validation  # archives from before the field: kept the first time a run is here
        if started is not None and started == known.get("started") and "device_name" not in known.get("versions", {}):
            changed["versions"] = {
                **known.get("versions", {}),
                "device_name": cpu_name(),
            }  # the run that wrote it is here
        if changed != known:
            meta.write_text(json.dumps(changed, indent=1) + "\n")
        return digest
    from baselines.sft import oracle_text_of

    archive.mkdir(parents=True, exist_ok=True)
    text = oracle_text_of(sft_dir)
    meta.write_text(
        json.dumps(
            {
                "sha256": digest,
                "command": command,
                **({"started": started} if started is not None else {}),
                **({"oracle_text": text} if text is not None else {}),
                **({"validation": validation} if (validation := last_validation(sft_dir)) else {}),
                "versions": machine(),
                "date": time.strftime("%Y-%m-%d", time.gmtime()),
            },
            indent=1,
        )
        + "\n"
    )
    return digest


def evaluate_sft(env: str, sft_dir: Path, out: Path, threads: int, temps: list[float], archive: Path | None) -> None:
    """The SFT start's held-out evaluations (then archived, also when they were run by hand first): the row every
    RL run is compared from."""
    for t in temps:
        evaluate(env, str(sft_dir / "model"), "smollm2-sft", out, threads, t)  # skipped when it exists
    if archive is not None and not all((archive / "heldout" / tag(t) / "smollm2-sft").exists() for t in temps):
        archive_run(archive, out, temps, "smollm2-sft", None)


def metrics_rows(run_dir: Path) -> list[dict]:
    """A run's ``metrics.jsonl`` rows (none when it has no log)."""
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def stage_facts(runs: Path, env: str, method: str, seeds: list[int]) -> dict[str, float]:
    """Env episodes trained and seconds per iteration of a method's runs, from their metrics.jsonl."""
    cfg = config(env, method)
    eps, secs = [], []
    for s in seeds:
        rows = [r for r in metrics_rows(runs / f"{cfg['exp_name']}_s{s}") if "time/iteration_s" in r]
        if not rows:
            continue
        counted = rows[-1].get("charts/env_episodes")
        eps.append(counted if counted else cfg["num_tasks"] * cfg.get("group_size", 1) * len(rows))
        secs += [r["time/iteration_s"] for r in rows]
    return {
        "episodes_trained": sum(eps) / len(eps) if eps else float("nan"),
        "s_per_iteration": sum(secs) / len(secs) if secs else float("nan"),
    }


#: what a training iteration's rollouts are compared by (equal in all: the same episodes, as far as the log says)
ROLLOUT_METRICS = (
    "charts/success_rate",
    "charts/episodic_return",
    "rollout/response_length",
    "rollout/num_turns",
    "rollout/invalid_action_rate",
)


def same_rollouts(runs: Path, env: str, method: str, seeds: list[int]) -> dict[str, int]:
    """Per RL seed, the leading training iterations whose rollouts equal GRPO's of the same seed (``ROLLOUT_METRICS``).
    Both draw the same sampling seeds from the same start, so they play the same episodes until their weights differ:
    the first update's difference (an advantage, a loss term) shows as the iteration where they part."""
    mine_cfg, grpo_cfg = config(env, method), config(env, "grpo")
    out = {}
    for s in seeds:
        mine = [r for r in metrics_rows(runs / f"{mine_cfg['exp_name']}_s{s}") if "charts/success_rate" in r]
        theirs = [r for r in metrics_rows(runs / f"{grpo_cfg['exp_name']}_s{s}") if "charts/success_rate" in r]
        if mine and theirs:
            same = [all(a.get(k) == b.get(k) for k in ROLLOUT_METRICS) for a, b in zip(mine, theirs)]
            out[str(s)] = same.index(False) if False in same else len(same)
    return out


def mechanism_facts(runs: Path, env: str, method: str, seeds: list[int]) -> dict[str, dict[str, list[float]]]:
    """Per mechanism metric of ``method`` (``MECHANISM``): each seed's mean over iterations and last value."""
    keys = MECHANISM.get(script(method), ())
    out: dict[str, dict[str, list[float]]] = {}
    cfg = config(env, method)
    for s in seeds:
        rows = metrics_rows(runs / f"{cfg['exp_name']}_s{s}")
        for k in keys:
            # ERL's rates exist only where a first attempt failed (logs before that fix wrote 0 there)
            vals = [
                float(r[k])
                for r in rows
                if k in r
                and r.get("iteration", 1) < 1_000_000
                and not (k.startswith("erl/") and r.get("erl/num_reflections") == 0)
            ]
            if vals:
                facts = out.setdefault(k, {"seeds": [], "mean": [], "last": []})
                facts["seeds"].append(float(s))
                facts["mean"].append(sum(vals) / len(vals))
                facts["last"].append(vals[-1])
    return out


def method_seeds(method: str, seeds: list[int], oracle_seeds: int = 1) -> list[int]:
    """The RL seeds a method runs: all, but the first ``oracle_seeds`` only for the oracle variants (the mechanisms'
    upper bound: one seed is enough, unless an oracle variant's own result is the claim, as from a recipe whose
    text decides the move)."""
    return seeds[:oracle_seeds] if method.endswith("-oracle") else seeds


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test: the chance of a split of the discordant pairs at least as uneven as
    ``wins``:``losses`` when each pair is a fair coin (1.0 without discordant pairs)."""
    n = wins + losses
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def outcomes(sub: Path) -> dict[int, bool]:
    """Held-out seed -> solved, from one evaluation's episode logs."""
    from agentgym.episodes import read_episodes

    return {ep.seed: bool(ep.success) for f in sorted((sub / "episodes").glob("*.jsonl*")) for ep in read_episodes(f)}


def paired_against(mine: dict[int, dict[int, bool]], theirs: dict[int, dict[int, bool]]) -> dict[str, float]:
    """Paired comparison on the same held-out seeds, RL seed by RL seed (``{rl_seed: {task: solved}}`` each):
    tasks only ``mine`` solves (wins), only ``theirs`` solves (losses), pooled over the RL seeds both have, and the
    sign test's p."""
    wins = losses = 0
    pairs = sorted(set(mine) & set(theirs))
    for s in pairs:
        for task in set(mine[s]) & set(theirs[s]):
            wins += mine[s][task] and not theirs[s][task]
            losses += theirs[s][task] and not mine[s][task]
    return {"rl_seeds": len(pairs), "wins": wins, "losses": losses, "p": sign_test(wins, losses)}


def comparison(
    env: str,
    methods: list[str],
    seeds: list[int],
    temps: list[float],
    runs: Path,
    out: Path,
    sft: str,
    sft_seeds: list[int] = (),
    oracle_seeds: int = 1,
    archive: Path | None = None,
) -> dict:
    """The seed methods' comparison as a record: the SFT start and, per method, each RL seed's held-out success at
    every temperature, mean and spread (half the range), the paired sign test against GRPO (same held-out seeds,
    same RL seed; a variant's against the method it varies too, ``VARIANT_OF``), its mechanism metrics per seed and
    its training facts. ``sft_seeds``: other training seeds of the SFT stage, reported with the start's as
    ``sft_seeds`` (the SFT row's own spread); ``archive``: where the fixed checkpoint's validation is kept."""
    sft_row = {tag(t): _success(out / tag(t) / "smollm2-sft") for t in temps}
    spread = {}
    fixed = sft_seed(env, sft)
    for t in temps:
        rates = {str(fixed): sft_row[tag(t)]} | {
            str(s): _success(out / tag(t) / eval_name("sft", s)) for s in sft_seeds if s != fixed
        }
        rates = {k: v for k, v in rates.items() if v is not None}
        if len(rates) > 1:
            spread[tag(t)] = {"per_seed": rates, **mean_spread(rates)}
    solved = {
        m: {t: {s: outcomes(out / tag(t) / eval_name(m, s)) for s in seeds if _done(out, t, m, s)} for t in temps}
        for m in methods
    }
    # the finished SFT seeds' own lessons and reflections on held-out episodes, as their validation measured them
    meta = archive / "sft.json" if archive is not None else None
    archived = json.loads(meta.read_text()).get("validation") if meta is not None and meta.exists() else None
    validation = sft_validation(
        runs, env, sft, [int(s) for s in spread.get(tag(temps[0]), {}).get("per_seed", {})], archived
    )
    stages, pending = [], []
    grpo_done = [s for s in seeds if _done(out, temps[0], "grpo", s)]  # the finished GRPO runs
    for m in methods:
        # a run counts once its headline evaluation exists (its training finished, its checkpoint evaluated)
        done = [s for s in method_seeds(m, seeds, oracle_seeds) if _done(out, temps[0], m, s)]
        pending += [f"{m} seed {s}" for s in method_seeds(m, seeds, oracle_seeds) if s not in done]
        if not done:
            continue
        per_temp = {}
        for t in temps:
            got = solved[m][t]
            rates = {str(s): sum(v.values()) / len(v) for s, v in got.items()}
            row: dict = {"per_seed": rates, **(mean_spread(rates) if rates else {})}
            if m != "grpo" and "grpo" in solved:
                row["against_grpo"] = paired_against(got, solved["grpo"][t])
            if (base := VARIANT_OF.get(m)) in solved:
                row["against_base"] = {"method": base, **paired_against(got, solved[base][t])}
            per_temp[tag(t)] = row
        facts = stage_facts(runs, env, m, done)
        stages.append(
            {
                "method": m,
                "label": entry_meta(f"smollm2-sft-{m}_s0", sft_variant=sft)["method"],
                "heldout": per_temp,
                "mechanism": mechanism_facts(runs, env, m, done) if script(m) in MECHANISM else {},
                **(
                    {"same_rollouts_as_grpo": same_rollouts(runs, env, m, [s for s in done if s in grpo_done])}
                    if m != "grpo" and "grpo" in solved
                    else {}
                ),
                **{k: None if v != v else v for k, v in facts.items()},  # NaN: no metrics to read
            }
        )
    return {
        "suite": SUITES[env],
        "sft": sft_row,
        **({"sft_seeds": spread, "sft_seed": fixed} if spread else {}),
        **({"sft_validation": validation} if validation else {}),
        "stages": stages,
        "pending": pending,
    }


def run_jobs(calls: list[tuple], jobs: int) -> int:
    """Run ``calls`` (``(function, args)`` each) ``jobs`` at a time, in order; the number dropped by a drain.

    SIGUSR1 drains: the calls in progress finish (a run is trained, evaluated and archived), none not yet started
    begins (``kill -USR1 PID`` before a machine is taken away, so that no run is left half done)."""
    import signal

    futures: list = []
    draining = []

    def drain(signum, frame):
        draining.append(signum)  # no call submitted from now on
        for f in futures:
            f.cancel()  # those not started yet
        print("SIGUSR1: no more runs start; the ones in progress finish", flush=True)

    previous = signal.signal(signal.SIGUSR1, drain)  # before the first call starts
    try:
        with ThreadPoolExecutor(jobs) as pool:
            for fn, args in calls:
                if draining:
                    break
                futures.append(pool.submit(fn, *args))
            for f in futures:
                if not f.cancelled():
                    f.result()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    return len(calls) - sum(not f.cancelled() for f in futures)


#: what the SFT stage's last validation says of the model's own text (``baselines/sft.py``: greedy, on held-out
#: noisy-expert episodes)
SFT_VALIDATION = (
    "val/success_rate",
    "val/lesson_parse_rate",
    "val/lesson_episodes",
    "val/reflection_tagged_rate",
    "val/reflection_episodes",
)


def last_validation(run_dir: Path) -> dict[str, float] | None:
    """An SFT run's last validation (``SFT_VALIDATION``, without the ``val/``) from its ``metrics.jsonl``; None
    without one."""
    rows = [r for r in metrics_rows(run_dir) if "val/success_rate" in r]
    return {k.removeprefix("val/"): rows[-1][k] for k in SFT_VALIDATION if k in rows[-1]} if rows else None


def sft_validation(
    runs: Path, env: str, sft: str, seeds: list[int], archived: dict[str, float] | None = None
) -> dict[str, dict[str, float]]:
    """Per SFT training seed (the fixed checkpoint's first), its last validation (:func:`last_validation`); seeds
    without one are left out. ``archived``: the fixed checkpoint's, as the archive's ``sft.json`` keeps it (a machine
    that restored the archive has no SFT run folder of its own)."""
    name, fixed = config(env, "sft", sft)["exp_name"], sft_seed(env, sft)
    out = {}
    for s in seeds:
        got = last_validation(runs / (name if s == fixed else f"{name}_s{s}"))
        got = archived if got is None and s == fixed else got
        if got:
            out[str(s)] = got
    return out


def _interleave(first: list, rest: list) -> list:
    """``first``'s items each followed by one of ``rest``'s, then the rest of ``rest``."""
    out = []
    for i, x in enumerate(first):
        out += [x, *rest[i : i + 1]]
    return out + rest[len(first) :]


def mean_spread(rates: dict[str, float]) -> dict[str, float]:
    """Mean of per-seed rates and their spread (half the range)."""
    vals = list(rates.values())
    return {"mean": sum(vals) / len(vals), "spread": (max(vals) - min(vals)) / 2}


def _done(out: Path, t: float, method: str, seed: int) -> bool:
    return _evaluated(out, [t], eval_name(method, seed))


def _evaluated(out: Path, temps: list[float], name: str) -> bool:
    """Whether the evaluation ``name`` (``smollm2-sft``, ``smollm2-sft-grpo_s1``) exists at every temperature."""
    return all((out / tag(t) / name / "submission.json").exists() for t in temps)


def _success(sub: Path) -> float | None:
    got = outcomes(sub) if (sub / "submission.json").exists() else {}
    return sum(got.values()) / len(got) if got else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--env", choices=sorted(SUITES), default="frozenlake", help="which CPU setting (default frozenlake)"
    )
    p.add_argument("--methods", nargs="*", default=["grpo", "ppo", "sapo"], choices=METHODS, help="RL methods")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated RL seeds (default 1,2,3)")
    p.add_argument(
        "--oracle-seeds",
        type=int,
        default=1,
        help="the oracle variants run the first N of --seeds (default 1: they are the mechanisms' upper bound)",
    )
    p.add_argument("--jobs", type=int, default=1, help="RL runs at once, threads split between them (default 1)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="CPU threads in all (default: all)")
    p.add_argument("--runs", default="runs", help="run folders (default runs)")
    p.add_argument("--out", default=None, help="held-out submissions (default runs/heldout/ENV)")
    p.add_argument(
        "--temperatures",
        default="0.4,0",
        help="evaluation temperatures; the first is the table's headline and the board's (default 0.4,0: the "
        "papers' validation temperature, then greedy)",
    )
    p.add_argument(
        "--sft-epochs",
        type=int,
        default=None,
        help="SFT epochs over the expert rows (default: the config's, 1); give another --runs and --out for them",
    )
    p.add_argument(
        "--sft",
        choices=sorted(SFT_RECIPES),
        default="action",
        help="the SFT stage every RL run starts from: action (behaviour cloning, default), mech (the "
        "lesson/reflection SFT; default folders runs/mech and runs/heldout/ENV-mech) or mech_plans (mech with "
        "context rows where the text decides the move; runs/mech_plans, runs/heldout/ENV-mech_plans) or mech_lessons "
        "(mech_plans with lesson rows at the cells a lesson does not name too; runs/mech_lessons)",
    )
    p.add_argument(
        "--sft-seeds",
        default="",
        help="also train the SFT stage with these training seeds (comma-separated; the config's own seed is the "
        "fixed checkpoint every RL run starts from) and evaluate each: the SFT row's own spread (default: none)",
    )
    p.add_argument("--table-only", action="store_true", help="train and evaluate nothing; summarise what exists")
    p.add_argument("--png", default=None, help="write the table's bars and the RL training curves here")
    p.add_argument("--json", default=None, help="write the table rows here")
    p.add_argument(
        "--record",
        default=None,
        help="write the comparison record here (per-seed held-out success at every temperature, paired sign test "
        "against GRPO, mechanism metrics; versions, date, machine, command): docs/records/cpu_mech_ENV.json",
    )
    p.add_argument("--entries", default=None, help="also submit the headline evaluations to this entries folder")
    p.add_argument(
        "--archive",
        default=None,
        help="keep each finished run's evaluations and metrics.jsonl here, and restore them on a fresh machine (default "
        f"with --sft mech or mech_plans: {ARCHIVE_DEFAULT.format(sft='SFT', env='ENV')}; 'none': no archive)",
    )
    opts = p.parse_args(argv)
    mech = opts.sft != "action"  # a seed-method comparison: its own folders (runs/mech, runs/heldout/ENV-mech)
    runs = checkout_path(opts.runs if opts.runs != "runs" or not mech else f"runs/{opts.sft}")
    out = checkout_path(opts.out or f"runs/heldout/{opts.env}{'-' + opts.sft if mech else ''}")
    archive_opt = opts.archive or (ARCHIVE_DEFAULT.format(sft=opts.sft, env=opts.env) if mech else "none")
    archive = None if archive_opt == "none" else checkout_path(archive_opt)
    sft_cmd = f"OMP_NUM_THREADS=1 python baselines/sft.py --config {config_path(opts.env, 'sft', opts.sft)}"
    sft_cmd = sft_cmd.replace(str(ROOT) + "/", "")
    if archive is not None:
        sft_here = runs / config(opts.env, "sft", opts.sft)["exp_name"]
        if (archive / "sft.json").exists() and (sft_here / "model" / "config.json").exists():
            check_sft(archive, sft_here, sft_cmd)  # another SFT start here: refused before anything is restored
        restored = restore_archive(archive, runs, out)
        if restored:
            print(f"restored from {os.path.relpath(archive, ROOT)}: {', '.join(restored)}")
    seeds = [int(s) for s in opts.seeds.split(",") if s.strip()]
    temps = [float(t) for t in opts.temperatures.split(",") if t.strip()]
    jobs = max(1, opts.jobs)
    per_job = max(1, opts.threads // jobs)
    for m in ["sft"] + opts.methods:
        config(opts.env, m, opts.sft)  # a missing config fails before hours of training
    t0 = time.perf_counter()
    fixed_sft = sft_seed(opts.env, opts.sft)
    extra_sft = [int(s) for s in opts.sft_seeds.split(",") if s.strip() and int(s) != fixed_sft]
    todo_sft = [("sft", s) for s in extra_sft if not _evaluated(out, temps, eval_name("sft", s))]
    todo = [
        (m, s)
        for s in seeds
        for m in opts.methods
        if s in method_seeds(m, seeds, opts.oracle_seeds) and not _evaluated(out, temps, eval_name(m, s))
    ]
    if not opts.table_only and (todo or todo_sft or not _evaluated(out, temps, "smollm2-sft") or not mech):
        # with an archive the SFT start trains on one thread: deterministic there, so a fresh machine with the same CPU
        # rebuilds the same one (two threads, or another CPU, can give other weights; one thread's determinism:
        # tests/baselines/test_sft.py, -m slow)
        sft_threads = 1 if archive is not None else opts.threads
        if archive is not None:
            warn_other_cpu(archive, runs / config(opts.env, "sft", opts.sft)["exp_name"])
        sft_dir = train(opts.env, "sft", None, runs, sft_threads, opts.sft_epochs, opts.sft)
        if archive is not None:
            check_sft(archive, sft_dir, sft_cmd)
        # the SFT start first, then the RL runs (seed by seed; the other SFT seeds go first, one beside each RL run:
        # an SFT on 2-row pieces fits beside one), the shipped model last: its prose episodes are the slowest to
        # play and no RL run depends on them
        calls = [(evaluate_sft, (opts.env, sft_dir, out, per_job, temps, archive))]
        calls += [
            (train_and_evaluate, (opts.env, m, s, runs, out, per_job, temps, opts.sft, archive, opts.sft_epochs))
            for m, s in _interleave(todo_sft, todo)
        ]
        if not mech:  # the shipped model does not depend on the SFT stage: the main table has its row
            calls += [(evaluate, (opts.env, "base", "smollm2-base", out, per_job, t)) for t in temps]
        dropped = run_jobs(calls, jobs)
        print(
            f"(trained and evaluated in {time.perf_counter() - t0:.0f} s"
            + (f"; {dropped} runs not started after SIGUSR1: the same command trains them)" if dropped else ")")
        )
    names = ([] if mech else ["smollm2-base"]) + ["smollm2-sft"]  # the shipped model's row is the main table's
    names += [eval_name("sft", s) for s in extra_sft]  # grouped with smollm2-sft: the SFT row's seeds
    names += [eval_name(m, s) for m in opts.methods for s in method_seeds(m, seeds, opts.oracle_seeds)]
    curves = [  # finished runs only: trained and evaluated
        str(runs / f"{config(opts.env, m)['exp_name']}_s{s}")
        for m in opts.methods
        for s in seeds
        if _done(out, temps[0], m, s) and (runs / f"{config(opts.env, m)['exp_name']}_s{s}" / "metrics.jsonl").exists()
    ]

    def finished(method: str) -> list[int]:  # a killed run's partial metrics.jsonl does not count
        return [s for s in seeds if _done(out, temps[0], method, s)]

    tables = {}
    for t in temps:
        subs = [str(out / tag(t) / n) for n in names if (out / tag(t) / n / "submission.json").exists()]
        if subs:
            print(f"\n### held-out, temperature {t:g}")
            png = Path(opts.png) if opts.png and t == temps[0] else None
            tables[t] = demo.heldout_table(subs, curves, png, env=demo.ENVS[opts.env])
    if temps[0] not in tables:
        raise SystemExit(f"nothing evaluated under {out / tag(temps[0])} yet")
    table = tables[temps[0]]
    for row in table:
        method = row["stage"].removeprefix("smollm2-sft-")
        if method in opts.methods:
            row.update(stage_facts(runs, opts.env, method, finished(method)))
        for t in temps[1:]:
            other = {r["stage"]: r for r in tables.get(t, [])}.get(row["stage"])
            if other:
                row[f"success_{tag(t)}"] = other["success_rate"]
                row[f"spread_{tag(t)}"] = other["spread"]
    cols = ["stage", "seeds", "episodes", "success_rate", "spread", "invalid_rate"]
    cols += [f"{k}_{tag(t)}" for t in temps[1:] for k in ("success", "spread")]
    print(f"\n### the table (success at temperature {temps[0]:g}; mean over seeds, spread = half the range)")
    print(demo.format_table(table, cols + ["episodes_trained", "s_per_iteration"]))
    for row in table:
        method = row["stage"].removeprefix("smollm2-sft-")
        if method in opts.methods and script(method) in MECHANISM:
            row["mechanism"] = mechanism_facts(runs, opts.env, method, finished(method))
    mech_rows = [r for r in table if r.get("mechanism")]
    if mech_rows:
        print("\n### mechanism metrics (training iterations; per seed: mean over iterations / last iteration)")
        for row in mech_rows:
            for key, f in row["mechanism"].items():
                per_seed = "  ".join(f"s{int(s)} {m:.3f}/{x:.3f}" for s, m, x in zip(f["seeds"], f["mean"], f["last"]))
                print(f"{row['stage']:<28} {key:<36} {per_seed}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(table, indent=1) + "\n")
    if opts.record:
        from agentgym.rl.runinfo import versions

        record = {
            "record": f"cpu_{opts.sft}_{opts.env}",
            "what": "SmolLM2-135M-Instruct: RL methods from one SFT checkpoint, held-out success per RL seed",
            **comparison(
                opts.env, opts.methods, seeds, temps, runs, out, opts.sft, extra_sft, opts.oracle_seeds, archive
            ),
            "runs": os.path.relpath(runs, ROOT),
            **(
                {"archive": os.path.relpath(archive, ROOT), **sft_provenance(json.loads(sft_meta.read_text()))}
                if archive is not None and (sft_meta := archive / "sft.json").exists()
                else {}
            ),
            "versions": versions(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "command": "python tools/cpu_table.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        }
        Path(opts.record).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.record).write_text(json.dumps(record, indent=1) + "\n")
    if opts.entries:
        for name in names:
            sub = out / tag(temps[0]) / name
            if not (sub / "submission.json").exists() or (opts.sft_epochs and name == "smollm2-base"):
                continue  # the shipped model's entry does not depend on the SFT stage: it is the main table's
            meta = entry_meta(name, opts.sft_epochs, opts.sft)
            cmd = [sys.executable, "-m", "agentgym", "submit", str(sub), "--entries", opts.entries, "--force"]
            cmd += ["--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--model-size", "0.135"]
            cmd += ["--code", "tools/cpu_table.py"]  # a path in this repository
            # the SFT/RL checkpoints are not published (and no fresh-seed rerun is recorded): logs-only entries
            played = json.loads((sub / "submission.json").read_text())["agent"]["runnable"]["agent_name"]
            with tempfile.TemporaryDirectory() as tmp:
                runnable = Path(tmp) / "runnable.json"
                runnable.write_text(json.dumps({"logs_only": True, "reason": LOGS_ONLY, "agent_name": played}))
                cmd += ["--runnable", str(runnable)]
                subprocess.check_call(cmd + [f"--{k.replace('_', '-')}={v}" for k, v in meta.items()], cwd=ROOT)
    return 0


def entry_meta(name: str, sft_epochs: int | None = None, sft_variant: str = "action") -> dict[str, str]:
    """Board name, method and method type of one held-out evaluation (``smollm2-base``, ``smollm2-sft-grpo_s1``);
    the suite names the env. ``sft_epochs`` (``--sft-epochs``) goes into the SFT stage's name: ``SFT (3 epochs)``;
    ``sft_variant`` (``--sft``) picks the SFT stage's board name from ``SFT_RECIPES``."""
    if name == "smollm2-base":
        return {"name": "SmolLM2-135M as shipped (CPU table)", "method": "none", "method_type": "Prompting"}
    sft = SFT_RECIPES[sft_variant].board + (f" ({sft_epochs} epochs)" if sft_epochs else "")
    if name == "smollm2-sft":
        return {"name": f"SmolLM2-135M {sft} (CPU table)", "method": "SFT", "method_type": "SFT"}
    if name.startswith("smollm2-sft_s"):  # another training seed of the SFT stage
        seed = name.removeprefix("smollm2-sft_s")
        return {"name": f"SmolLM2-135M {sft} training seed {seed} (CPU table)", "method": "SFT", "method_type": "SFT"}
    method, _, seed = name.removeprefix("smollm2-sft-").rpartition("_s")
    label = {
        "grpo": "GRPO",
        "ppo": "PPO",
        "sapo": "SAPO",
        "erl": "ERL",
        "seed": "SEED",
        "gigpo": "GiGPO",
        "erl-oracle": "ERL (oracle reflections)",
        "seed-oracle": "SEED (oracle lessons)",
        "seed-strong-oracle": "SEED (oracle lessons, lambda_opd 1)",
        "sapo-readout": "SAPO (read-out rows at 100x lr)",
    }.get(method)
    label = label or method.upper()
    return {
        "name": f"SmolLM2-135M {sft}+{label} seed {seed} (CPU table)",
        "method": f"SFT+{label}",
        "method_type": "RL+SFT",
    }


if __name__ == "__main__":
    sys.exit(main())
