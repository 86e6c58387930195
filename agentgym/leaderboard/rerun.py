"""Re-run verification: run the declared agent again on seeds nobody knew, and compare (``verify --rerun``).

Replay (:mod:`agentgym.leaderboard.verify`) proves *what happened* in the logs, not *who made it happen*:
logs searched offline against the public seeds, or an agent that reads the seed, replay perfectly. A
rerun closes that gap:

1. The maintainer's side draws fresh reset seeds with :mod:`secrets` (never the suite's public ones) and
   a fresh agent sampling seed. Procedural suites (Sokoban, FrozenLake, EchoBandit) get new levels;
   fixed-task suites (ALFWorld games, WebShop goals, HotpotQA questions) replay the same tasks with new
   seeds, which re-samples the agent but not the tasks, so it cannot expose an agent tuned to those tasks.
2. A model agent's pinned weights are checked first (:func:`check_model_pin`): a local checkpoint folder
   must have the submitted ``model.checkpoint_sha256``, a hub model is loaded at the submitted commit; other
   weights refuse the rerun with the reason, so the entry stays below *rerun-verified*.
3. The declared agent (``agent.runnable`` of ``submission.json``) runs in its own process
   (:mod:`agentgym.leaderboard.agent_process`) with per-step and per-episode time limits, seeing only
   observation text and the agent-facing info keys. A crash or timeout is one failed episode.
4. The rerun's logs go next to the entry (``rerun/episodes/*.jsonl.gz``), are replayed in full, and the
   record ``rerun.json`` (seeds written *after* the run, so anyone can replay the rerun) holds both scores
   and, for a model agent, the pin that was checked.
5. :func:`compare_scores`: a one-sided permutation test of "the submitted mean per-episode score is higher
   than the rerun's" (:data:`PERMUTATIONS` permutations, level :data:`ALPHA`). For an honest agent, whose
   submitted and rerun episodes are draws from the same distribution, the chance of a false alarm is at
   most :data:`ALPHA` (1%) per rerun and env. A 95% bootstrap interval of the difference is shown too.

:func:`check_rerun` is what the board runs: it re-replays the rerun logs, checks seeds and labels, and
recomputes the scores and the test from the logs, so a rerun record that does not add up earns nothing; a
model agent's record must name the submission's pins as checked.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agentgym.agent_io import EpisodeSpec
from agentgym.core import env_family
from agentgym.episodes import Episode, iter_episodes
from agentgym.leaderboard.archive import DEFAULT_LIMITS, SUBMISSION_FILE, log_name, read_gz_capped, sha256_file
from agentgym.leaderboard.schema import MODEL_PREFIXES, runnable_errors, schema_errors
from agentgym.results import env_results
from agentgym.suites import get_suite

RERUN_FILE = "rerun.json"
RERUN_DIR = "rerun"
#: Level of the one-sided test: the false-alarm rate for an honest agent is at most this, per env.
ALPHA = 0.01
#: Permutations of the test and bootstrap resamples of the interval.
PERMUTATIONS = 10_000
#: Fresh reset seeds are drawn from [FRESH_SEED_LOW, 2**31): far from the public suites' seeds (100000+).
FRESH_SEED_LOW = 2**24
#: The column a rerun compares, per env family (the one a suite's table is ranked by).
PRIMARY: dict[str | None, str] = {"ALFWorld": "All", "WebShop": "Score", "HotpotQA": "F1"}


class _KeepOpen(gym.Wrapper):
    """The rerun's env, handed to the turn loop once per episode; the loop's ``close()`` must not end it."""

    def close(self) -> None:
        pass


class RerunError(ValueError):
    """The entry cannot be re-run (logs only, unknown suite, an agent that cannot be built)."""


def primary_of(env_id: str) -> str:
    return PRIMARY.get(env_family(env_id), "Success")


def episode_score(env_id: str, episode: Episode) -> float:
    """The per-episode value (0..1) whose mean is the env's primary column / 100."""
    return env_results(env_id, [episode])[primary_of(env_id)] / 100.0


#: Source of the rerun's fresh seeds (``secrets``; tests swap in a seeded generator to be deterministic).
_randbelow = secrets.randbelow


def _rng_for(*parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def compare_scores(
    submitted: Sequence[float], rerun: Sequence[float], *, rng_key: Any = 0, permutations: int = PERMUTATIONS
) -> dict[str, Any]:
    """Is the submitted mean score higher than the rerun's by more than chance allows?

    One-sided permutation test of the difference of means (submitted - rerun) over the pooled episodes,
    ``p = (1 + #{permuted diff >= observed}) / (PERMUTATIONS + 1)``; ``flagged`` when ``p < ALPHA``. The
    interval is a 95% percentile bootstrap of the difference. Deterministic for a given ``rng_key``.
    """
    a, b = np.asarray(submitted, dtype=float), np.asarray(rerun, dtype=float)
    if not len(a) or not len(b):
        raise ValueError("both samples need at least one episode")
    observed = float(a.mean() - b.mean())
    rng = _rng_for("permutation", rng_key)
    pooled = np.concatenate([a, b])
    perms = rng.permuted(np.tile(pooled, (permutations, 1)), axis=1)  # (P, n_a + n_b)
    diffs = perms[:, : len(a)].mean(axis=1) - perms[:, len(a) :].mean(axis=1)  # (P,)
    p_value = float((1 + np.sum(diffs >= observed - 1e-12)) / (permutations + 1))
    boot = _rng_for("bootstrap", rng_key)
    ba = a[boot.integers(0, len(a), size=(permutations, len(a)))].mean(axis=1)
    bb = b[boot.integers(0, len(b), size=(permutations, len(b)))].mean(axis=1)
    lo, hi = np.percentile(ba - bb, [2.5, 97.5])
    return {
        "test": f"one-sided permutation test of mean(submitted) - mean(rerun), {permutations} permutations",
        "alpha": ALPHA,
        "submitted_mean": round(float(a.mean()), 6),
        "rerun_mean": round(float(b.mean()), 6),
        "difference": round(observed, 6),
        "ci95": [round(float(lo), 6), round(float(hi), 6)],
        "p_value": round(p_value, 6),
        "n_submitted": int(len(a)),
        "n_rerun": int(len(b)),
        "flagged": bool(p_value < ALPHA),
    }


def false_alarm_rate(
    p: float, n_submitted: int, n_rerun: int, trials: int = 1000, *, seed: int = 0, permutations: int = PERMUTATIONS
) -> float:
    """Simulated share of honest reruns that :func:`compare_scores` flags: both samples Bernoulli(``p``).

    This is how the board's stated false-alarm rate is measured (leaderboards/README.md gives the command).
    """
    rng = np.random.default_rng(seed)
    alarms = sum(
        compare_scores(
            rng.random(n_submitted) < p, rng.random(n_rerun) < p, rng_key=("fa", seed, i), permutations=permutations
        )["flagged"]
        for i in range(trials)
    )
    return alarms / trials


def _load_submission(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / SUBMISSION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerunError(f"{folder / SUBMISSION_FILE}: cannot read ({exc})") from exc
    errors = schema_errors(data)
    if errors:
        raise RerunError(errors[0])
    return data


def _submitted_episodes(folder: Path, data: Mapping[str, Any]) -> dict[str, list[Episode]]:
    out: dict[str, list[Episode]] = {}
    for entry in data["episodes"]:
        raw = read_gz_capped(folder / entry["path"], DEFAULT_LIMITS)
        out[entry["env_id"]] = [Episode.from_dict(json.loads(x)) for x in raw.split(b"\n") if x.strip()]
    return out


def _fresh_specs(env_id: str, public: Sequence[EpisodeSpec], n: int) -> list[EpisodeSpec]:
    taken = {s.seed for s in public}
    seeds: list[int] = []
    while len(seeds) < n:
        s = FRESH_SEED_LOW + _randbelow(2**31 - FRESH_SEED_LOW)
        if s not in taken and s not in seeds:
            seeds.append(s)
    if all(s.options is None for s in public):  # procedural: fresh levels
        return [EpisodeSpec(s, None) for s in seeds]
    # fixed tasks: a random subset of the same tasks (all of them without --episodes), fresh seeds
    order = list(range(len(public)))
    for i in range(len(order) - 1, 0, -1):  # Fisher-Yates with secrets
        j = _randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    chosen = sorted(order[:n])
    return [EpisodeSpec(seed, public[i].options) for seed, i in zip(seeds, chosen)]


def check_model_pin(runnable: Mapping[str, Any], checkpoint: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Check that the weights a model agent's rerun would load are the submitted ones.

    Args:
        runnable: the submission's ``agent.runnable`` (a model spec with ``model.revision`` and/or
            ``model.checkpoint_sha256``).
        checkpoint: a local folder to load instead of the one the spec names (the submitted checkpoint copied
            to this machine); it must have the pinned ``checkpoint_sha256``.

    Returns:
        ``{"kwargs": ..., "record": ...}``: the agent kwargs that make the agent process load exactly the
        pinned weights (it checks them again when loading), and the pin as ``rerun.json`` records it.

    Raises:
        RerunError: one line: the pin is missing or cannot be checked, or the weights here are other ones.
    """
    from agentgym.agents import model_target
    from agentgym.models import loading

    spec = str(runnable["spec"])
    _, model_id, _ = model_target(spec) or ("hf", "", None)
    model = dict(runnable.get("model") or {})
    revision, digest = model.get("revision"), model.get("checkpoint_sha256")
    target = str(checkpoint) if checkpoint is not None else model_id
    try:
        loading.check_pin(target, revision=revision, checkpoint_sha256=digest)
    except (loading.ModelPinError, FileNotFoundError) as exc:
        raise RerunError(f"{spec}: not the submitted model: {exc}") from exc
    folder = loading.local_checkpoint(target)
    if folder is None and checkpoint is not None:
        raise RerunError(f"--checkpoint {checkpoint}: no such folder")
    if folder is None and loading.hub_commit(model_id, revision) != revision:
        raise RerunError(
            f"{spec}: commit {revision} of {model_id} is not in the local HF cache; download it first "
            f"(huggingface-cli download {model_id} --revision {revision})"
        )
    kwargs = {"revision": revision, "checkpoint_sha256": digest}
    if checkpoint is not None:
        kwargs["model_path"] = str(folder)
    if digest:
        checked = f"checkpoint_sha256 over the {len(loading.checkpoint_files(folder))} files of the folder loaded"
    elif folder is not None:
        checked = f"the folder loaded is the HF cache snapshot of commit {revision}"
    else:
        checked = f"loaded at hub commit {revision}, found in the local HF cache"
    record = {"id": model.get("id", model_id), "revision": revision, "checkpoint_sha256": digest, "checked": checked}
    return {"kwargs": {k: v for k, v in kwargs.items() if v is not None}, "record": record}


def rerun_entry(
    folder: str | os.PathLike[str],
    *,
    episodes: int | None = None,
    workers: int = 1,
    step_timeout_s: float | None = None,
    episode_timeout_s: float | None = None,
    transcript: list[str] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Re-run an entry's declared agent on fresh seeds, write ``rerun/`` and ``rerun.json``, return the record.

    Args:
        folder: the entry folder (``leaderboards/entries/<slug>``).
        episodes: episodes per env (default: as many as the suite has); fewer widen the test's interval.
        workers: replay processes for the rerun's logs.
        step_timeout_s: limit of one agent answer (default :data:`~agentgym.leaderboard.agent_process.STEP_TIMEOUT_S`).
        episode_timeout_s: limit of one episode on the agent side.
        transcript: when a list, every line sent to the agent process is appended (tests).
        checkpoint: model agents: the folder holding the submitted checkpoint on this machine (default: the
            one the spec names); its files must have the pinned ``checkpoint_sha256``.

    Raises:
        RerunError: the entry is logs only, its runnable spec is not pinned, a model agent's weights here are
            not the pinned ones (:func:`check_model_pin`), or its agent cannot be built.
    """
    from agentgym.evaluation import run_episodes
    from agentgym.leaderboard import agent_process as ap
    from agentgym.leaderboard.verify import replay_records

    folder = Path(folder)
    start = time.perf_counter()
    data = _load_submission(folder)
    runnable = data["agent"]["runnable"]
    if runnable.get("logs_only"):
        raise RerunError(f"{folder.name} is marked logs only ({runnable.get('reason')}): there is no agent to re-run")
    unpinned = runnable_errors(runnable)
    if unpinned:
        raise RerunError(unpinned[0])
    kwargs = dict(runnable.get("kwargs") or {})
    pin = None
    if runnable["spec"].startswith(MODEL_PREFIXES):
        pin = check_model_pin(runnable, checkpoint)  # before anything runs: other weights refuse the rerun
        kwargs.update(pin["kwargs"])
    elif checkpoint is not None:
        raise RerunError(f"--checkpoint is for model agents; {runnable['spec']} loads no checkpoint")
    suite = get_suite(f"{data['suite']['name']}@{data['suite']['version']}")
    submitted = _submitted_episodes(folder, data)
    agent_seed = _randbelow(2**31)
    try:
        agent = ap.ProcessAgent(
            runnable["spec"],
            kwargs,
            code_sha256=runnable.get("code_sha256"),
            agent_seed=agent_seed,
            step_timeout_s=step_timeout_s or ap.STEP_TIMEOUT_S,
            episode_timeout_s=episode_timeout_s or ap.EPISODE_TIMEOUT_S,
            transcript=transcript,
        )
    except ap.AgentFailure as exc:
        raise RerunError(f"cannot start {runnable['spec']}: {exc}") from exc

    out_dir = folder / RERUN_DIR
    if out_dir.exists():
        shutil.rmtree(out_dir)
    (out_dir / "episodes").mkdir(parents=True)
    work = out_dir / "work"
    work.mkdir()
    envs: dict[str, Any] = {}
    try:
        for env_id in suite.env_ids:
            public = suite.specs(env_id)
            n = min(len(public), episodes) if episodes else len(public)
            specs = _fresh_specs(env_id, public, n)
            log = work / f"{log_name(env_id)}.jsonl"
            failures = []
            t0 = time.perf_counter()
            env = _KeepOpen(gym.make(env_id))  # one env for the whole rerun, not one per episode
            try:
                for spec in specs:
                    try:
                        # One episode per call: a failing agent costs exactly the episode in flight.
                        run_episodes(
                            env_id, agent, [spec], batch_size=1, log_path=log, resume=False, make_env=lambda e=env: e
                        )
                    except ap.AgentFailure as exc:
                        failures.append({"seed": spec.seed, "options": spec.options, "reason": str(exc)[:500]})
                        try:
                            agent.start()
                        except ap.AgentFailure as again:
                            raise RerunError(f"the agent process cannot be restarted: {again}") from again
            finally:
                env.env.close()
            eps = list(iter_episodes(log)) if log.exists() else []
            rel = f"{RERUN_DIR}/episodes/{log_name(env_id)}.jsonl.gz"
            with open(folder / rel, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                for ep in eps:
                    gz.write((json.dumps(ep.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"))
            envs[env_id] = {
                "path": rel,
                "sha256": sha256_file(folder / rel),
                "seeds": [s.seed for s in specs],  # recorded after the run
                "options": [s.options for s in specs],
                "failures": failures,
                "seconds": round(time.perf_counter() - t0, 3),
            }
    finally:
        agent.close()
        shutil.rmtree(work, ignore_errors=True)

    record: dict[str, Any] = {
        "rerun_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rerun_by": _who(),
        "agent_spec": runnable["spec"],
        "agent_seed": agent_seed,
        "submission_sha256": sha256_file(folder / SUBMISSION_FILE),
        "envs": envs,
    }
    from agentgym.version import __version__

    record["agentgym_version"] = __version__
    if pin is not None:
        record["model"] = pin["record"]
    check = _evaluate(folder, data, record, submitted, workers=workers, replay=replay_records)
    record["results"] = check["results"]
    record["comparison"] = check["comparison"]
    record["errors"] = check["errors"]
    record["seconds"] = round(time.perf_counter() - start, 3)
    (folder / RERUN_FILE).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return {**record, "ok": not check["errors"], "flagged": check["flagged"]}


def _who() -> str:
    from agentgym.leaderboard.verify import _who as who

    return who()


def _evaluate(
    folder: Path,
    data: Mapping[str, Any],
    record: Mapping[str, Any],
    submitted: Mapping[str, list[Episode]],
    *,
    workers: int,
    replay: Any,
) -> dict[str, Any]:
    """Replay the rerun logs, check seeds and labels, recompute the rerun results and the test."""
    errors: list[str] = []
    results: dict[str, Any] = {}
    comparison: dict[str, Any] = {}
    runnable = data["agent"]["runnable"]
    label = runnable["agent_name"]
    if str(runnable.get("spec", "")).startswith(MODEL_PREFIXES):
        pins = {k: (runnable.get("model") or {}).get(k) for k in ("revision", "checkpoint_sha256")}
        rec = record.get("model")
        if not isinstance(rec, dict) or {k: rec.get(k) for k in pins} != pins:
            errors.append(
                f"{RERUN_FILE}: does not record the submission's model pins {pins} as checked (made without "
                "checking the weights, or for other ones): run `agentgym leaderboard verify --rerun` again"
            )
    suite = get_suite(f"{data['suite']['name']}@{data['suite']['version']}")
    public_seeds = {t.spec.seed for t in suite.tasks}
    for env_id in suite.env_ids:
        info = record.get("envs", {}).get(env_id)
        if not isinstance(info, dict):
            errors.append(f"{RERUN_FILE}: no rerun of {env_id}")
            continue
        path = folder / str(info.get("path", ""))
        if not path.is_file() or sha256_file(path) != info.get("sha256"):
            errors.append(f"{info.get('path')}: missing or changed since the rerun")
            continue
        raw = read_gz_capped(path, DEFAULT_LIMITS)
        lines = [x for x in raw.split(b"\n") if x.strip()]
        eps = [Episode.from_dict(json.loads(x)) for x in lines]
        seeds = list(info.get("seeds", []))
        failed = {(f.get("seed"), json.dumps(f.get("options"), sort_keys=True)) for f in info.get("failures", [])}
        played = [(e.seed, json.dumps(e.options, sort_keys=True)) for e in eps]
        wanted = list(zip(seeds, (json.dumps(o, sort_keys=True) for o in info.get("options", []))))
        if sorted(played + list(failed), key=str) != sorted(wanted, key=str):
            errors.append(f"{info['path']}: the logged and failed episodes are not the recorded seeds")
        if public_seeds & set(seeds):
            errors.append(f"{RERUN_FILE}: {env_id} reran public suite seeds, not fresh ones")
        for e in eps:
            if e.agent != label or e.env_id != env_id or e.env_kwargs or not e.done:
                errors.append(
                    f"{info['path']}: seed {e.seed}: played by {e.agent!r} on {e.env_id} (declared {label!r}); "
                    "the declared spec does not produce the submitted agent, or the episode did not end"
                )
                break
        for line, diffs in zip(lines, replay([(env_id, x) for x in lines], workers)):
            if diffs:
                errors.append(f"{info['path']}: seed {json.loads(line).get('seed')}: {diffs[0]}")
                break
        scores = [episode_score(env_id, e) for e in eps] + [0.0] * len(failed)
        if not scores:
            errors.append(f"{env_id}: the rerun has no episodes")
            continue
        col = primary_of(env_id)
        results[env_id] = {
            col: round(100.0 * sum(scores) / len(scores), 4),
            "episodes": len(scores),
            "failed": len(failed),
        }
        sub = [episode_score(env_id, e) for e in submitted.get(env_id, [])]
        if sub:
            c = compare_scores(sub, scores, rng_key=[env_id, seeds])
            comparison[env_id] = {"column": col, **c}
    flagged = any(c["flagged"] for c in comparison.values())
    return {"errors": errors, "results": results, "comparison": comparison, "flagged": flagged}


def check_rerun_cached(
    folder: str | os.PathLike[str], *, workers: int = 1, cache_dir: Any = None
) -> dict[str, Any] | None:
    """:func:`check_rerun`, reused for exactly the same entry bytes, rerun files and sources (the build's cache)."""
    from agentgym.leaderboard.verify import cache_key, cached_result

    folder = Path(folder)
    if not (folder / RERUN_FILE).is_file():
        return None
    extra = (
        [RERUN_FILE] + sorted(str(p.relative_to(folder)) for p in (folder / RERUN_DIR).rglob("*") if p.is_file())
        if (folder / RERUN_DIR).is_dir()
        else [RERUN_FILE]
    )
    key = cache_key(folder, extra)
    out = cached_result("leaderboard-rerun", key, lambda: check_rerun(folder, workers=workers) or {}, cache_dir)
    return {k: v for k, v in out.items() if k not in ("cache_key", "cached")}


def check_rerun(folder: str | os.PathLike[str], *, workers: int = 1) -> dict[str, Any] | None:
    """The board's check of an entry's rerun record; None when the entry has none.

    Returns ``{"ok", "flagged", "errors", "results", "comparison", "record"}``: ``ok`` only when the
    record belongs to this ``submission.json``, every rerun log replays, its seeds are the recorded fresh
    ones and its labels the declared agent's; ``results`` and ``comparison`` are recomputed here, never
    read from the record.
    """
    from agentgym.leaderboard.verify import replay_records

    folder = Path(folder)
    path = folder / RERUN_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        data = _load_submission(folder)
        if record.get("submission_sha256") != sha256_file(folder / SUBMISSION_FILE):
            return {
                "ok": False,
                "flagged": False,
                "errors": [f"{RERUN_FILE}: made for another submission.json (it changed after the rerun)"],
                "results": {},
                "comparison": {},
                "record": record,
            }
        submitted = _submitted_episodes(folder, data)
        check = _evaluate(folder, data, record, submitted, workers=workers, replay=replay_records)
    except (OSError, ValueError, KeyError, TypeError, RerunError) as exc:
        return {
            "ok": False,
            "flagged": False,
            "errors": [f"{RERUN_FILE}: {type(exc).__name__}: {exc}"],
            "results": {},
            "comparison": {},
            "record": {},
        }
    return {"ok": not check["errors"], **check, "record": record}
