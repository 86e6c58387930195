"""Measure the seed methods' mechanisms on a trained model, without training: writes one JSON record.

    python tools/mechanism_probe.py --env frozenlake --model runs/mech/sft_smollm2_frozenlake_mech \\
        --out docs/records/mechanism_probe_frozenlake.json

On held-out tasks (reset seeds from 30,000,000, far from the training seeds 0-767 and the eval suite's
100000-100099) and with the CPU configs' prompt settings, it measures what each mechanism needs before RL starts:

1. **writing** -- the model's own lessons and reflections on ``--episodes`` noisy-expert episodes, greedy
   (``baselines.sft.analysis_metrics``): parse rates and agreement with the privileged analyser;
2. **ERL, oracle reflections** -- one ERL experience step (``configs/cpu/erl_oracle_smollm2_ENV.yaml``):
   first attempts on ``--tasks`` tasks x the config's group, the oracle's reflection on each failure, the second
   attempts: second-attempt success against the first-attempt success of the same tasks, and, where the first
   move was already the mistake, how often the second attempt's first move is the better one against how often
   the task's first attempts chose it (does the policy act on the reflection at all?);
3. **SEED, oracle lessons** -- one SEED collection (``seed_oracle_smollm2_ENV.yaml``): lesson-conditioned against
   lesson-free success on the same tasks. ``--self`` measures 2 and 3 with the model's own text instead
   (``erl_smollm2_ENV.yaml`` / ``seed_smollm2_ENV.yaml``).

``--readout`` asks instead whether SAPO's read-out *could* track the returns at this model size and budget: the SFT
policy plays ``--tasks`` episodes as SAPO's first iteration would (``sapo_smollm2_ENV.yaml``, temperature 1); the
read-out ``z+ - z-`` is linear in the last hidden state at the state's last token, so a ridge regression on those
hidden states, cross-validated over episodes, is the best V any training of the two read-out rows can reach with the
rest of the model as it is. Recorded beside the read-out's own correlation (random rows) at that point.

``--lessons`` measures SEED's lesson effect alone, over many tasks and paired by task (``--tasks 256``): the
lesson-conditioned episode's success minus the task's lesson-free mean, with its standard error and the p of a zero mean,
split by whether the lesson was written about a failed or a successful episode. ``--reflections`` measures ERL's
step 2 alone the same way: each second attempt against its task's other first attempts, with the first-move and
outcome counts of the full probe.

``--writing`` runs step 1 alone (``--episodes`` episodes): whether an SFT recipe's own text parses, and why not.

``--context-rows`` measures instead whether the SFT run's own text-in-context rows needed their text: on each, the
greedy move with the reflection or lesson in the prompt and without it, against the row's target.

Nothing is trained; the record holds every figure with the versions, date, machine and command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CPU_CONFIGS = ROOT / "baselines" / "configs" / "cpu"
ENVS = {"frozenlake": "agentgym/FrozenLakeNotSlippery-v0", "sokoban": "agentgym/Sokoban-v0"}
#: first reset seed of the probe's tasks and episodes
PROBE_SEED = 30_000_000


def _trainer(trainer_cls, args_cls, config: Path, model: str, tmp: str, tasks: int, seed: int, overrides: dict):
    from agentgym.rl.config import load_config_file, make_args

    cfg = load_config_file(config)
    cfg.update(init_from=model, output_dir=tmp, exp_name="probe", num_tasks=tasks, progress=False, plot=False)
    if not any(Path(model).glob("ckpt_*")) and (Path(model) / "model" / "config.json").exists():
        cfg.update(model=str(Path(model) / "model"), init_from=None)  # checkpoints pruned: the exported model
    cfg.update(seed=seed, **overrides)
    if "log_episodes" in {f.name for f in dataclasses.fields(args_cls)}:  # ERL's and SEED's episode logs: not kept
        cfg["log_episodes"] = False
    return trainer_cls(make_args(args_cls, cfg))


def probe(
    env: str, model: str, *, episodes: int, tasks: int, own: bool, seed: int = 1, overrides: dict | None = None
) -> dict:
    """All three measurements for one model folder (a run folder with a checkpoint, ``--init-from`` style);
    ``overrides`` replaces config fields (the tests' tiny model)."""
    from agentgym.agent_io import seed_specs
    from baselines import erl
    from baselines import seed as seed_mod

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        variant = "" if own else "oracle_"
        t0 = time.perf_counter()
        config = CPU_CONFIGS / f"erl_{variant}smollm2_{env}.yaml"
        tr = _trainer(erl.ErlTrainer, erl.Args, config, model, tmp, tasks, seed, overrides or {})
        out["writing"] = _writing(tr, env, episodes, seed)
        out["erl"] = erl_step(tr, seed_specs(tasks, seed=PROBE_SEED + 10_000), own=own, seed=seed)
        out["time_erl_s"] = time.perf_counter() - t0
        del tr
        t0 = time.perf_counter()
        config = CPU_CONFIGS / f"seed_{variant}smollm2_{env}.yaml"
        tr = _trainer(seed_mod.SeedTrainer, seed_mod.Args, config, model, tmp, tasks, seed, overrides or {})
        rb = tr.collect(seed_specs(tasks, seed=PROBE_SEED + 10_000), seed=seed)
        out["seed"] = {
            "analyser": "policy" if own else "oracle",
            **{k.removeprefix("seed/"): v for k, v in tr.probe_metrics.items()},
            **{k.removeprefix("seed/"): v for k, v in tr.lesson_writer.metrics().items()},
            "lessons": [ep.extras.get("lesson") for ep in rb.episodes[:3]],
        }
        out["time_seed_s"] = time.perf_counter() - t0
    return out


def _writing(tr, env: str, episodes: int, seed: int) -> dict:
    """The writing check with ``tr``'s model and prompt: its own lessons and reflections (greedy, 160 new tokens)
    on ``episodes`` held-out noisy-expert episodes (``baselines.sft.analysis_metrics``)."""
    from baselines import sft

    eps = sft.held_out_analysis_episodes(ENVS[env], episodes, seed=PROBE_SEED, noise=0.5, agent_seed=seed)
    tr.model.eval()
    with tr.autocast():
        return sft.analysis_metrics(
            tr.generator, tr.tokenizer, eps, system_prompt=tr.template.system_prompt, max_new_tokens=160
        )


def writing(env: str, model: str, *, episodes: int, seed: int = 1, overrides: dict | None = None) -> dict:
    """The writing check alone (``--writing``): whether the model's own lessons parse and its reflections close
    their tags, and why the others do not (cut at the token budget, about a solved episode)."""
    from baselines import erl

    with tempfile.TemporaryDirectory() as tmp:
        config = CPU_CONFIGS / f"erl_smollm2_{env}.yaml"
        tr = _trainer(erl.ErlTrainer, erl.Args, config, model, tmp, 1, seed, overrides or {})
        return _writing(tr, env, episodes, seed)


def erl_step(tr, specs: list, *, own: bool, seed: int) -> dict:
    """One ERL experience step on ``specs``: first attempts (the config's group per task), a reflection on each
    failure, the second attempts. Second-attempt success against the first-attempt success of the same tasks -- in
    the mean and paired by failed attempt (its second attempt against its task's other first attempts:
    :func:`paired_gain`) -- where the second attempts' first moves go, and where they end."""
    from baselines import erl

    exp = tr.experience(specs, seed=seed)
    G = tr.args.group_size
    firsts = [float(ep.success) for ep in exp.first.episodes]
    same = [erl.other_attempts_success(firsts, e, G) for e in exp.failed] if G > 1 else []
    seconds = [float(ep.success) for ep in exp.second.episodes] if exp.second else []
    pairs = [{"conditioned": c, "free": f} for c, f in zip(seconds, same, strict=True)] if same else []
    return {
        "reflector": "policy" if own else "oracle",
        "first_success": sum(firsts) / len(firsts),
        "failed_first_attempts": len(exp.failed),
        "second_success": sum(seconds) / len(seconds) if seconds else None,
        "first_success_same_tasks": sum(same) / len(same) if same else None,
        "paired": paired_gain(pairs) if pairs else None,
        "pairs": pairs,
        "reflections": [exp.reflections[e] for e in exp.failed[:3]],
        **first_move_fixes(exp.first.episodes, exp.failed, exp.second.episodes if exp.second else [], G),
        **second_attempt_outcomes(exp.first.episodes, exp.failed, exp.second.episodes if exp.second else []),
    }


def reflection_effect(
    env: str, model: str, *, tasks: int, own: bool, seed: int = 1, overrides: dict | None = None
) -> dict:
    """ERL's reflection effect alone over many tasks (:func:`erl_step` on ``tasks`` held-out tasks, reset seeds
    apart from the full probe's)."""
    from agentgym.agent_io import seed_specs
    from baselines import erl

    with tempfile.TemporaryDirectory() as tmp:
        config = CPU_CONFIGS / f"erl_{'' if own else 'oracle_'}smollm2_{env}.yaml"
        tr = _trainer(erl.ErlTrainer, erl.Args, config, model, tmp, tasks, seed, overrides or {})
        return {"tasks": tasks, **erl_step(tr, seed_specs(tasks, seed=PROBE_SEED + 30_000), own=own, seed=seed)}


def lesson_effect(
    env: str, model: str, *, tasks: int, own: bool, seed: int = 1, overrides: dict | None = None
) -> dict:
    """SEED's lesson effect at the start of RL, over many tasks and paired by task: one SEED collection
    (``seed_[oracle_]smollm2_ENV.yaml``, its group and temperature) on ``tasks`` held-out tasks, and for each task with
    a lesson one more episode with the lesson in the prompt. Per task: that episode's success minus the mean success of
    the task's lesson-free rollouts; the mean difference, its standard error and the p of a zero mean, for every
    lesson and split by whether it was written about a failed episode (:func:`lesson_gains`)."""
    from agentgym.agent_io import seed_specs
    from baselines import seed as seed_mod

    with tempfile.TemporaryDirectory() as tmp:
        config = CPU_CONFIGS / f"seed_{'' if own else 'oracle_'}smollm2_{env}.yaml"
        tr = _trainer(seed_mod.SeedTrainer, seed_mod.Args, config, model, tmp, tasks, seed, overrides or {})
        tr.collect(seed_specs(tasks, seed=PROBE_SEED + 20_000), seed=seed)
        pairs = list(tr.probe_pairs)
    return {
        "analyser": "policy" if own else "oracle",
        "tasks": tasks,
        "group_size": tr.args.group_size,
        **lesson_gains(pairs),
        "pairs": pairs,
    }


def lesson_gains(pairs: list[dict[str, float]]) -> dict[str, dict]:
    """:func:`paired_gain` over every lesson pair (``all``), those whose lesson was written about a failed episode
    (``lesson_from_failure``) and about a solved one (``lesson_from_success``)."""
    return {
        "all": paired_gain(pairs),
        "lesson_from_failure": paired_gain([p for p in pairs if not p["lesson_from_success"]]),
        "lesson_from_success": paired_gain([p for p in pairs if p["lesson_from_success"]]),
    }


def paired_gain(pairs: list[dict[str, float]]) -> dict[str, float | int | None]:
    """Mean of with-text minus without-text over the pairs, its standard error, the pairs above and below, and the
    two-sided p of the mean being zero (normal approximation, paired).

    Not a sign test: a pair is one 0/1 episode against the mean of its task's other episodes, so under no effect the
    difference has mean zero but is not symmetric (on a task solved 3 times in 4, a success is +0.25 and a failure
    -0.75), and counting signs would call a lesson that changes nothing a gain."""
    diffs = [p["conditioned"] - p["free"] for p in pairs]
    n = len(diffs)
    if n == 0:
        return {"tasks": 0, "conditioned": None, "free": None, "gain": None, "se": None, "up": 0, "down": 0, "p": None}
    mean = sum(diffs) / n
    se = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5 / n**0.5 if n > 1 else None
    if se:
        pvalue = math.erfc(abs(mean) / se / math.sqrt(2))
    else:  # every pair the same difference: no spread to test against
        pvalue = 1.0 if mean == 0 else None
    return {
        "tasks": n,
        "conditioned": sum(p["conditioned"] for p in pairs) / n,
        "free": sum(p["free"] for p in pairs) / n,
        "gain": mean,
        "se": se,
        "up": sum(d > 0 for d in diffs),
        "down": sum(d < 0 for d in diffs),
        "p": pvalue,
    }


def context_reliance(
    env: str, model: str, *, seed: int = 1, overrides: dict | None = None, lesson_off_cell_rows: int | None = None
) -> dict:
    """Do the SFT's text-in-context rows need their text? On each such row of the SFT run ``model`` (rebuilt from
    its config and ``analysis.jsonl`` by ``baselines.sft.counted_context_examples``), the greedy move with the row's
    reflection or lesson in the prompt and without it, against the row's target (the env expert's move).

    A row whose target the model picks without the text teaches nothing about reading the text; where the two moves
    agree, the text changed nothing. ``lesson_off_cell_rows`` (default: the run's own) adds rows with a lesson at its
    plan's other cells (kind ``lesson_off_cell``), where the lesson does not apply: there the record also says how
    often the model plays the lesson's move with the lesson and without it (a model that plays it anywhere has
    learnt the move, not the cell)."""
    from agentgym.episodes import read_episodes
    from agentgym.rl.config import load_config_file, make_args
    from agentgym.rl.rollout import fit_prompt
    from baselines import erl, sft

    run = Path(model)
    args = make_args(sft.Args, load_config_file(run / "config.yaml"))
    if lesson_off_cell_rows is not None:
        args = dataclasses.replace(args, lesson_off_cell_rows=lesson_off_cell_rows)
    failures = sft.context_failures(args, read_episodes(run / "analysis.jsonl"))
    with tempfile.TemporaryDirectory() as tmp:
        config = CPU_CONFIGS / f"erl_oracle_smollm2_{env}.yaml"
        tr = _trainer(erl.ErlTrainer, erl.Args, config, model, tmp, 1, seed, overrides or {})
        rows = [
            (kind, inp, context, played.steps[t].action, _expert_move(played, t))
            for kind, inp, context, played, t, _ in sft.counted_context_examples(
                failures, args, tr.template, tr.template.system_prompt
            )
        ]
        moves = {}
        tr.model.eval()
        for with_text in (True, False):
            prompts = [
                fit_prompt(
                    tr.template,
                    tr.tokenizer,
                    inp,
                    args.history_length,
                    args.max_prompt_tokens,
                    ctx if with_text else {},
                )[1]
                for _, inp, ctx, _, _ in rows
            ]
            with tr.autocast():
                outs = tr.generator.generate(
                    prompts, max_new_tokens=tr.args.max_new_tokens, temperature=0.0, seed=seed
                )
            moves[with_text] = [tr.template.parse(o.text).action for o in outs]
    out: dict = {}
    for kind in ("reflection", "lesson", "lesson_off_cell"):
        idx = [i for i, r in enumerate(rows) if r[0] == kind]
        if not idx:
            continue
        out[kind] = {
            "rows": len(idx),
            "target_with_text": sum(moves[True][i] == rows[i][3] for i in idx) / len(idx),
            "target_without_text": sum(moves[False][i] == rows[i][3] for i in idx) / len(idx),
            "same_move_with_and_without": sum(moves[True][i] == moves[False][i] for i in idx) / len(idx),
        }
        # the rows whose target is not the env expert's move: only the text can tell the model to play it
        odd = [i for i in idx if rows[i][3] != rows[i][4]]
        out[kind]["rows_not_expert"] = len(odd)
        if odd:
            out[kind]["target_with_text_not_expert"] = sum(moves[True][i] == rows[i][3] for i in odd) / len(odd)
            out[kind]["target_without_text_not_expert"] = sum(moves[False][i] == rows[i][3] for i in odd) / len(odd)
        if kind == "lesson_off_cell":
            # the rows whose target is not the lesson's move: playing that move there is the lesson misread
            named = [(i, _lesson_move(rows[i][2]["lesson"])) for i in idx]
            named = [(i, m) for i, m in named if m and m != rows[i][3]]
            out[kind]["rows_lesson_move_wrong"] = len(named)
            for with_text in (True, False) if named else ():
                key = f"lesson_move_{'with' if with_text else 'without'}_text"
                out[kind][key] = sum(moves[with_text][i] == m for i, m in named) / len(named)
    return out


def _lesson_move(lesson: str) -> str | None:
    """The move a privileged lesson about a failure names (``... From row 2 col 3 here, move down.``)."""
    import re

    m = re.search(r"From row \d+ col \d+ here, move (\w+)\.", lesson)
    return m.group(1) if m else None


def _expert_move(episode, t: int) -> str:
    """The env expert's move at step ``t`` of ``episode`` (replayed)."""
    from agentgym.agents.oracle import replay_env

    env, u, _ = replay_env(episode)
    try:
        for step in episode.steps[:t]:
            env.step(step.action)
        return u.expert_action()
    finally:
        env.close()


def readout_ceiling(
    env: str,
    model: str,
    *,
    tasks: int,
    seed: int = 1,
    folds: int = 5,
    ridge: tuple[float, ...] = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6),
    overrides: dict | None = None,
) -> dict:
    """How well a linear read-out of ``model``'s state-end hidden state can predict the discounted return (SAPO's V
    from its two read-out rows, the body held fixed): ridge regressions fitted on ``folds - 1`` folds of the episodes
    and scored on the last, for each ``ridge`` penalty (features standardised on the fitting folds).
    ``readout_minus_hidden_max``: the largest difference between the scored read-out gap and the hidden state times
    (w+ - w-), the check that the probe fits the read-out's own function class (bf16 rounding on the real model)."""
    import functools

    import torch

    from agentgym.agent_io import seed_specs
    from agentgym.rl.logprobs import _backbone_and_head, position_ids_from_mask
    from agentgym.rl.trainer import Trainer
    from baselines import sapo

    with tempfile.TemporaryDirectory() as tmp:
        config = CPU_CONFIGS / f"sapo_smollm2_{env}.yaml"
        cls = functools.partial(Trainer, algo="sapo", reserved_tokens=[sapo.W_PLUS, sapo.W_MINUS])
        tr = _trainer(cls, sapo.Args, config, model, tmp, tasks, seed, overrides or {})
        a = tr.args
        tr.model.eval()
        with torch.no_grad():
            rb = tr.collect(seed_specs(tasks, seed=PROBE_SEED + 20_000), seed=seed)
            batch = tr.make_batch(rb)
            tr.score(batch)
            v, _ = sapo.state_action_readouts(batch["readout"], batch["completion_mask"], a.tau_v, a.r_max)
            returns = sapo.discounted_returns(batch.meta, a.gamma)
            body, head = _backbone_and_head(tr.model)
            P = batch["input_ids"].shape[1] - batch["completion_mask"].shape[1]  # prompts are left-padded to P
            hidden = []
            for s0 in range(0, len(batch), 16):
                ids = batch["input_ids"][s0 : s0 + 16, :P].to(tr.device)
                mask = batch["attention_mask"][s0 : s0 + 16, :P].to(tr.device)
                with tr.autocast():
                    out = body(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask))
                hidden.append(out.last_hidden_state[:, -1].float().cpu())
            H = torch.cat(hidden)
            wp, wm = tr.reserved_ids
            gap = H @ (head.weight[wp] - head.weight[wm]).float().cpu()
            raw = batch["readout"][:, 0, 0] - batch["readout"][:, 0, 1]
    episodes = [int(m["episode"]) for m in batch.meta]
    fits = {}
    for lam in ridge:
        pred = torch.from_numpy(
            cross_validated_ridge(H.double().numpy(), returns.double().numpy(), episodes, folds, lam, seed)
        )
        fits[f"{lam:g}"] = {
            "corr": sapo.readout_corr(pred, returns.double()),
            "ev": sapo.explained_variance(pred, returns),
        }
    best = max(fits, key=lambda k: fits[k]["corr"])
    return {
        "episodes": len(set(episodes)),
        "turns": len(returns),
        "success_rate": sum(float(ep.success) for ep in rb.episodes) / len(rb.episodes),
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "readout_corr": sapo.readout_corr(v, returns),
        "readout_ev": sapo.explained_variance(v, returns),
        "readout_minus_hidden_max": float((gap - raw.float()).abs().max()),
        "folds": folds,
        "ridge": fits,
        "best_ridge": best,
        "probe_corr": fits[best]["corr"],
        "probe_ev": fits[best]["ev"],
    }


def cross_validated_ridge(X, y, groups: list[int], folds: int, lam: float, seed: int):
    """Out-of-fold predictions of a ridge regression of ``y`` on ``X`` (numpy arrays): the ``groups`` (episodes) are
    dealt into ``folds`` at random, each fold predicted by the fit on the others (features standardised and ``y``
    centred on those)."""
    import numpy as np

    groups_arr = np.asarray(groups)
    order = np.random.default_rng(seed).permutation(np.unique(groups_arr))
    fold_of = np.zeros(len(groups_arr), dtype=int)
    for k, g in enumerate(order):
        fold_of[groups_arr == g] = k % folds
    pred = np.zeros(len(y))
    for f in range(folds):
        fit, test = fold_of != f, fold_of == f
        mu, sd = X[fit].mean(0), X[fit].std(0) + 1e-8
        Z = (X[fit] - mu) / sd
        w = np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T @ (y[fit] - y[fit].mean()))
        pred[test] = (X[test] - mu) / sd @ w + y[fit].mean()
    return pred


def first_move_fixes(firsts: list, failed: list[int], seconds: list, group_size: int) -> dict[str, float | None]:
    """Does a second attempt act on its reflection? For failed first attempts whose first move was already the
    mistake (the privileged analyser's critique), how often the second attempt's first move is the better move,
    against how often the task's other first attempts chose it anyway (the policy's own rate, no reflection)."""
    from agentgym.agents.oracle import critique

    better_first, better_second, repeat_first, repeat_second = [], [], [], []
    for i, e in enumerate(failed):
        c = critique(firsts[e])
        if c.mistake_step != 1 or not c.better or i >= len(seconds) or not seconds[i].steps:
            continue
        g = e // group_size * group_size  # the task's other first attempts (e itself made the mistake)
        moves = [firsts[j].steps[0].action for j in range(g, g + group_size) if j != e and firsts[j].steps]
        if not moves:
            continue
        better_first.append(sum(m == c.better for m in moves) / len(moves))
        repeat_first.append(sum(m == c.actions[0] for m in moves) / len(moves))
        better_second.append(float(seconds[i].steps[0].action == c.better))
        repeat_second.append(float(seconds[i].steps[0].action == c.actions[0]))

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return {
        "first_step_mistakes": len(better_second),
        "better_first_move_rate_first_attempts": mean(better_first),
        "better_first_move_rate_second_attempts": mean(better_second),
        "mistaken_first_move_rate_first_attempts": mean(repeat_first),
        "mistaken_first_move_rate_second_attempts": mean(repeat_second),
    }


def second_attempt_outcomes(firsts: list, failed: list[int], seconds: list) -> dict[str, int]:
    """Where the second attempts end, against the mistake their reflection named (the privileged analyser's
    critique of the failed first attempt): solved; the named mistake again (same step, same move); or past it and
    wrong elsewhere -- a later or another mistake the reflection did not name."""
    from agentgym.agents.oracle import critique

    out = {"second_solved": 0, "second_same_mistake": 0, "second_other_mistake": 0}
    for i, e in enumerate(failed[: len(seconds)]):
        if seconds[i].success:
            out["second_solved"] += 1
            continue
        c = critique(firsts[e])
        k = c.mistake_step
        same = k is not None and len(seconds[i].steps) >= k and seconds[i].steps[k - 1].action == c.actions[k - 1]
        same = same and [s.action for s in seconds[i].steps[: k - 1]] == c.actions[: k - 1]
        out["second_same_mistake" if same else "second_other_mistake"] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", choices=sorted(ENVS), default="frozenlake")
    p.add_argument("--model", required=True, help="run folder to start from (as --init-from), e.g. an SFT run")
    p.add_argument("--episodes", type=int, default=16, help="noisy-expert episodes for the writing check")
    p.add_argument("--tasks", type=int, default=10, help="tasks of the ERL and SEED checks (x the configs' groups)")
    p.add_argument("--self", dest="own", action="store_true", help="the model's own reflections/lessons")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--context-rows",
        action="store_true",
        help="instead: the SFT run's text-in-context rows, the greedy move with and without their text",
    )
    p.add_argument(
        "--lesson-off-cell-rows",
        type=int,
        default=None,
        help="with --context-rows: also this many rows with a lesson at its plan's other cells (default: the run's)",
    )
    p.add_argument(
        "--readout",
        action="store_true",
        help="instead: how well a linear read-out of the model's hidden state (SAPO's V, body fixed) predicts the "
        "return, cross-validated over --tasks episodes",
    )
    p.add_argument(
        "--lessons",
        action="store_true",
        help="instead: SEED's lesson effect alone at the start of RL on --tasks tasks, paired by task, with the p of no gain",
    )
    p.add_argument(
        "--reflections",
        action="store_true",
        help="instead: ERL's reflection effect alone on --tasks tasks, each second attempt paired with its task's "
        "other first attempts, with the p of no gain",
    )
    p.add_argument(
        "--writing",
        action="store_true",
        help="instead: the writing check alone (the model's own lessons and reflections on --episodes episodes)",
    )
    p.add_argument("--out", default=None, help="write the record here (JSON)")
    opts = p.parse_args(argv)
    if not Path(opts.model).exists():
        raise SystemExit(f"no run folder {opts.model}: train it first (tools/cpu_table.py --sft mech)")
    from cpu_table import weights_sha256

    from agentgym.rl.runinfo import versions

    model_sha256 = weights_sha256(Path(opts.model) / "model")  # before the probe: a folder without weights fails now
    ran_on = versions()  # the checkout the probe started from (the tree may change while it runs)
    t0 = time.time()
    if opts.context_rows:
        value = {
            "context_rows": context_reliance(
                opts.env, opts.model, seed=opts.seed, lesson_off_cell_rows=opts.lesson_off_cell_rows
            )
        }
    elif opts.reflections:
        value = {
            "reflections": reflection_effect(opts.env, opts.model, tasks=opts.tasks, own=opts.own, seed=opts.seed)
        }
    elif opts.lessons:
        value = {"lessons": lesson_effect(opts.env, opts.model, tasks=opts.tasks, own=opts.own, seed=opts.seed)}
    elif opts.readout:
        value = {"readout": readout_ceiling(opts.env, opts.model, tasks=opts.tasks, seed=opts.seed)}
    elif opts.writing:
        value = {"writing": writing(opts.env, opts.model, episodes=opts.episodes, seed=opts.seed)}
    else:
        value = probe(opts.env, opts.model, episodes=opts.episodes, tasks=opts.tasks, own=opts.own, seed=opts.seed)
    from baselines.sft import oracle_text_of

    record = {
        "value": value,
        "env": ENVS[opts.env],
        "model": opts.model,
        # which build of the run folder's recipe was probed (the SFT start's identity in the comparison archives)
        "model_sha256": model_sha256,
        "oracle_text": oracle_text_of(opts.model),  # the privileged text the SFT start learned
        "versions": ran_on,
        "date": time.strftime("%Y-%m-%d", time.gmtime(t0)),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs",
        "command": "python tools/mechanism_probe.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "wall_s": time.time() - t0,
    }
    text = json.dumps(record, indent=1, default=str)
    print(text)
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
