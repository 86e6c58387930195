"""Verify a leaderboard submission (``agentgym leaderboard verify DIR``).

Checks, in order, each failure reported with the file, the episode and the field:

1. ``submission.json`` parses (size-capped) and matches the schema.
2. The suite exists at that version; the env ids are the suite's, and each env's registration
   fingerprint (``spec_hash``) matches the installed one (a wrong env version is rejected).
3. Every log file exists, matches its sha256, decompresses within the size cap, and every line is a
   complete episode record (a truncated log is rejected).
4. Every suite task appears exactly once (no missing, duplicated or foreign tasks); every episode ran
   the registered env (no kwargs overrides) and ended; its stored totals match its steps.
5. The results recomputed from the logs (:mod:`agentgym.results`) equal the claimed ones.
6. Every episode carries the agent label that ``agent.runnable.agent_name`` declares (a log made by
   another agent and relabelled in ``submission.json`` is caught here or by the rerun).
7. Episodes are replayed in the env from their seed, options and actions with
   :func:`agentgym.episodes.replay` (the one replay function): observations, rewards, end flags and the
   scored info keys must match. ``full=True`` replays every episode; the default replays a random
   sample per env and is only a quick pre-check for submitters: the board's badge comes from
   :func:`verify_cached` (a full replay made by the maintainer's build), never from a sampled run or a
   file inside the submission.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.episodes import Episode, replay
from agentgym.leaderboard.archive import (
    DEFAULT_LIMITS,
    SUBMISSION_FILE,
    Limits,
    SubmissionError,
    content_hash,
    log_name,
    open_submission,
    read_gz_capped,
    sha256_file,
    spec_hash,
)
from agentgym.leaderboard.schema import runnable_errors, schema_errors
from agentgym.results import ResultsError, compare, describe, env_results
from agentgym.suites import SuiteTask, get_suite

#: Info keys that feed the results or the task identity: replay must reproduce them too, since editing
#: ``info["success"]`` alone would otherwise change a score without touching observations or rewards.
SCORED_INFO_KEYS: tuple[str, ...] = ("success", "is_action_valid", "task_id", "task_type", "task_score", "em", "f1")

#: Seconds of replay done in the main process before worker processes are started (see ``_replay_all``).
SERIAL_BUDGET_S = 2.0

#: Episodes per env replayed by default (``full=True`` replays all).
DEFAULT_SAMPLE = 25

#: Version of the checks; a cached verification made by another version is not reused. Bump on any change
#: to what is checked.
VERIFIER_VERSION = 2


@dataclass
class VerificationReport:
    """What verification found. ``ok`` is True only without errors."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    suite: str = ""
    episodes: int = 0
    replayed: int = 0
    sample_seed: int | None = None
    full: bool = False
    seconds: float = 0.0
    results: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, where: str, message: str) -> None:
        self.errors.append(f"{where}: {message}")

    def summary(self) -> str:
        """A few lines for the terminal."""
        head = "ACCEPTED" if self.ok else f"REJECTED ({len(self.errors)} problem(s))"
        mode = "all episodes" if self.full else f"a sample (seed {self.sample_seed}): a pre-check only, never a badge"
        lines = [
            f"{head}: suite {self.suite or '?'}, {self.episodes} episode(s), {self.replayed} replayed ({mode}), "
            f"{self.seconds:.1f} s"
        ]
        lines += [f"  error: {e}" for e in self.errors[:50]]
        if len(self.errors) > 50:
            lines.append(f"  ... and {len(self.errors) - 50} more")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "errors": self.errors,
            "warnings": self.warnings,
            "suite": self.suite,
            "episodes": self.episodes,
            "replayed": self.replayed,
            "full": self.full,
            "sample_seed": self.sample_seed,
            "seconds": round(self.seconds, 3),
            "results": self.results,
        }


@dataclass
class _Loaded:
    env_id: str
    rel: str
    line: int
    raw: bytes
    episode: Episode

    @property
    def where(self) -> str:
        return f"{self.rel} line {self.line} ({describe(self.episode)})"


# -- replay (runs in worker processes) ------------------------------------------------------------
_WORKER_ENVS: dict[str, Any] = {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool | str):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def replay_episode(episode: Episode, env: Any) -> list[str]:
    """Every difference between ``episode`` and its replay in ``env`` (:func:`agentgym.episodes.replay`)."""
    return replay(episode, env, info_keys=SCORED_INFO_KEYS).mismatches


def _worker_env(env_id: str) -> Any:
    env = _WORKER_ENVS.get(env_id)
    if env is None:
        import gymnasium as gym

        import agentgym  # noqa: F401

        env = _WORKER_ENVS[env_id] = gym.make(env_id)
    return env


def _replay_chunk(items: Sequence[tuple[str, int, bytes]]) -> list[tuple[int, list[str]]]:
    """Replay ``(env_id, index, raw record)`` items in this process, reusing one env per id."""
    out = []
    for env_id, idx, raw in items:
        ep = Episode.from_dict(json.loads(raw))
        out.append((idx, replay_episode(ep, _worker_env(env_id))))
    return out


def _replay_all(loaded: Sequence[_Loaded], workers: int) -> list[list[str]]:
    return replay_records([(x.env_id, x.raw) for x in loaded], workers)


def replay_records(records: Sequence[tuple[str, bytes]], workers: int = 1) -> list[list[str]]:
    """Replay ``(env_id, raw JSON record)`` pairs in full; every difference found, per record.

    Runs in this process first and in ``workers`` processes when much is left (see the code's comments).
    """
    items = [(env_id, i, raw) for i, (env_id, raw) in enumerate(records)]
    results: list[list[str]] = [[] for _ in records]
    if workers <= 1 or len(items) < 2:
        for idx, diffs in _replay_chunk(items):
            results[idx] = diffs
        return results
    # Starting worker processes costs seconds (spawn re-imports agentgym), more than replaying a few hundred
    # Sokoban episodes. Replay here for a short while and hand the rest to the pool only if much is left.
    start, done, warm = time.perf_counter(), 0, None
    while done < len(items) and time.perf_counter() - start < SERIAL_BUDGET_S:
        for idx, diffs in _replay_chunk(items[done : done + 8]):
            results[idx] = diffs
        done += 8
        if warm is None:  # the first chunk pays for building the env (catalogue loads, ...): not a per-episode cost
            warm = (time.perf_counter(), done)
    items = items[done:]
    t0, n0 = warm if warm is not None and done > warm[1] else (start, 0)
    remaining_s = (time.perf_counter() - t0) / max(done - n0, 1) * len(items)
    if remaining_s < 3 * SERIAL_BUDGET_S:  # not worth starting processes
        for idx, diffs in _replay_chunk(items):
            results[idx] = diffs
        items = []
    if not items:
        return results
    # Chunks of one env each, a few per worker, so each process builds each env once and loads balance.
    chunks: list[list[tuple[str, int, bytes]]] = []
    by_env: dict[str, list[tuple[str, int, bytes]]] = {}
    for it in items:
        by_env.setdefault(it[0], []).append(it)
    for group in by_env.values():
        size = max(4, math.ceil(len(group) / (workers * 3)))
        chunks += [group[i : i + size] for i in range(0, len(group), size)]
    import multiprocessing as mp

    # spawn: the verifier may run inside a threaded process (tests, servers), where fork is unsafe.
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            for part in pool.map(_replay_chunk, chunks):
                for idx, diffs in part:
                    results[idx] = diffs
    except BrokenProcessPool:
        # e.g. a script without an ``if __name__ == "__main__"`` guard: replay here rather than give up.
        for idx, diffs in _replay_chunk(items):
            results[idx] = diffs
    return results


# -- the checks -----------------------------------------------------------------------------------
def _load_logs(
    folder: Path, data: dict[str, Any], report: VerificationReport, limits: Limits
) -> dict[str, list[_Loaded]]:
    loaded: dict[str, list[_Loaded]] = {}
    total = 0
    seen_envs: set[str] = set()
    for entry in data["episodes"]:
        rel, env_id = entry["path"], entry["env_id"]
        if env_id in seen_envs:
            report.error(rel, f"a second log for {env_id}; one log per env")
            continue
        seen_envs.add(env_id)
        path = folder / rel
        if path.is_symlink() or not path.is_file():
            report.error(rel, "listed in submission.json but missing (or not a plain file)")
            continue
        if not path.resolve().is_relative_to(folder.resolve()):  # e.g. a symlinked episodes/ folder
            report.error(rel, "resolves outside the submission folder")
            continue
        if path.stat().st_size > limits.max_file_bytes:
            report.error(rel, f"{path.stat().st_size} bytes, over the {limits.max_file_bytes}-byte cap")
            continue
        if sha256_file(path) != entry["sha256"]:
            report.error(rel, "sha256 differs from the one in submission.json (file changed after it was written)")
            continue
        try:
            raw = read_gz_capped(path, limits)
        except SubmissionError as exc:
            report.error(rel, str(exc))
            continue
        total += len(raw)
        if total > limits.max_total_bytes:
            report.error(rel, f"the logs decompress to more than {limits.max_total_bytes} bytes (size cap)")
            return loaded
        if raw and not raw.endswith(b"\n"):
            report.error(rel, "the last line has no newline: the log is truncated")
        records: list[_Loaded] = []
        for n, line in enumerate(raw.split(b"\n"), start=1):
            if not line.strip():
                continue
            if len(line) > limits.max_line_bytes:
                report.error(f"{rel} line {n}", f"record of {len(line)} bytes, over the {limits.max_line_bytes} cap")
                continue
            try:
                ep = Episode.from_dict(json.loads(line))
            except (ValueError, TypeError) as exc:
                report.error(f"{rel} line {n}", f"not a complete episode record (truncated or edited?): {exc}")
                continue
            records.append(_Loaded(env_id, rel, n, line, ep))
        if len(records) != entry["count"]:
            report.error(rel, f"count: submission.json says {entry['count']} episodes, the log holds {len(records)}")
        loaded[env_id] = records
    return loaded


def _check_episode(x: _Loaded, report: VerificationReport) -> bool:
    ep, where = x.episode, x.where
    ok = True
    if ep.env_id != x.env_id:
        report.error(where, f"env_id: {ep.env_id!r}, but this log is for {x.env_id!r}")
        ok = False
    if ep.env_kwargs:
        report.error(where, f"env_kwargs: {ep.env_kwargs!r}; suites play the registered env without overrides")
        ok = False
    if not isinstance(ep.reset_observation, str):
        report.error(where, "reset_observation: not a string")
        ok = False
    for t, s in enumerate(ep.steps):
        if not isinstance(s.action, str) or not isinstance(s.observation, str):
            report.error(where, f"steps[{t}]: action and observation must be strings")
            ok = False
        if isinstance(s.reward, bool) or not isinstance(s.reward, (int, float)) or not math.isfinite(s.reward):
            report.error(where, f"steps[{t}].reward: {s.reward!r} is not a finite number")
            ok = False
        if not isinstance(s.info, dict):
            report.error(where, f"steps[{t}].info: not an object")
            ok = False
    if not ok:
        return False
    if not ep.done:
        report.error(where, "steps: the episode never ended (no terminated/truncated last step)")
        return False
    try:
        totals = json.loads(x.raw).get("totals")
    except ValueError:
        totals = None
    if isinstance(totals, dict):
        if "return" in totals and not _same(totals["return"], ep.total_return):
            report.error(
                where, f"totals.return: {totals['return']!r}, but the steps' rewards sum to {ep.total_return}"
            )
        if "success" in totals and bool(totals["success"]) != ep.success:
            report.error(where, f"totals.success: {totals['success']!r}, but the last step says {ep.success}")
    return True


def verify_folder(
    folder: str | Path,
    *,
    full: bool = False,
    sample: int = DEFAULT_SAMPLE,
    seed: int | None = None,
    workers: int = 1,
    limits: Limits = DEFAULT_LIMITS,
) -> VerificationReport:
    """Verify an extracted submission folder; see the module docstring for the checks.

    Args:
        folder: holds ``submission.json`` and ``episodes/``.
        full: replay every episode (default: a random sample of ``sample`` per env).
        sample: episodes per env replayed when not ``full``.
        seed: seed of the sample (random when None; the report says which, to re-run the same check).
        workers: processes for replay.
        limits: size caps.
    """
    start = time.perf_counter()
    folder = Path(folder)
    report = VerificationReport(full=full)
    try:
        _verify(folder, report, full=full, sample=sample, seed=seed, workers=workers, limits=limits)
    finally:
        report.seconds = time.perf_counter() - start
    return report


def _verify(
    folder: Path,
    report: VerificationReport,
    *,
    full: bool,
    sample: int,
    seed: int | None,
    workers: int,
    limits: Limits,
) -> None:
    sub = folder / SUBMISSION_FILE
    if not sub.is_file() or sub.is_symlink():
        report.error(SUBMISSION_FILE, "missing: a submission folder holds submission.json and episodes/")
        return
    if sub.stat().st_size > limits.max_json_bytes:
        report.error(SUBMISSION_FILE, f"{sub.stat().st_size} bytes, over the {limits.max_json_bytes}-byte cap")
        return
    try:
        data = json.loads(sub.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        report.error(SUBMISSION_FILE, f"not valid JSON: {exc}")
        return
    errors = schema_errors(data)
    if errors:
        report.errors += errors
        return
    report.errors += runnable_errors(data["agent"]["runnable"])
    label = data["agent"]["runnable"]["agent_name"]

    # -- suite and env versions
    suite_ref = f"{data['suite']['name']}@{data['suite']['version']}"
    report.suite = suite_ref
    try:
        suite = get_suite(suite_ref)
    except KeyError as exc:
        report.error("submission.json['suite']", str(exc.args[0]))
        return
    wanted_envs = suite.env_ids
    for env_id in wanted_envs:
        if env_id not in data["envs"]:
            report.error("submission.json['envs']", f"lacks {env_id}, an env of suite {suite.ref}")
    for env_id, ref in data["envs"].items():
        where = f"submission.json['envs'][{env_id!r}]"
        if env_id not in wanted_envs:
            report.error(where, f"not an env of suite {suite.ref} (expects {', '.join(wanted_envs)})")
            continue
        ref_id, _, ref_version = ref["ref"].rpartition("@")
        if ref_id != env_id:
            report.error(where + "['ref']", f"{ref['ref']!r} names another env than {env_id}")
        try:
            current = spec_hash(env_id)
        except Exception as exc:  # unregistered id
            report.error(where, f"cannot look up the installed env: {exc}")
            continue
        if ref["spec_hash"] != current:
            report.error(
                where + "['spec_hash']",
                f"{ref['spec_hash']} but the installed {env_id} has {current}: the run used another version of the env",
            )
        from agentgym.version import __version__

        if ref_version != __version__:
            report.warnings.append(f"{env_id} ran under agentgym {ref_version}; verifying with {__version__}")
    for env_id in data["results"]:
        if env_id not in wanted_envs:
            report.error(f"submission.json['results'][{env_id!r}]", f"not an env of suite {suite.ref}")
    listed = {e["env_id"] for e in data["episodes"]}
    for env_id in wanted_envs:
        if env_id not in listed:
            report.error("submission.json['episodes']", f"no log for {env_id}")
    for e in data["episodes"]:
        if e["env_id"] not in wanted_envs:
            report.error(e["path"], f"a log for {e['env_id']}, which is not in suite {suite.ref}")
        elif e["path"] != f"episodes/{log_name(e['env_id'])}.jsonl.gz":
            report.warnings.append(f"{e['path']}: expected the name episodes/{log_name(e['env_id'])}.jsonl.gz")
    if report.errors:
        return

    # -- logs, tasks
    loaded = _load_logs(folder, data, report, limits)
    tasks = {t.key(): t for t in suite.tasks}
    seen: dict[str, _Loaded] = {}
    good: dict[str, list[_Loaded]] = {}
    for env_id, records in loaded.items():
        for x in records:
            report.episodes += 1
            key = SuiteTask(x.episode.env_id, _spec(x.episode)).key()
            if key not in tasks:
                report.error(x.where, f"seed/options: not a task of suite {suite.ref}")
                continue
            if key in seen:
                report.error(x.where, f"duplicated task: {seen[key].rel} line {seen[key].line} holds it already")
                continue
            seen[key] = x
            if x.episode.agent != label:
                report.error(
                    x.where,
                    f"agent: the episode was played by {x.episode.agent!r}, but submission.json declares "
                    f"agent.runnable.agent_name {label!r}",
                )
                continue
            if _check_episode(x, report):
                good.setdefault(env_id, []).append(x)
    missing = [t for k, t in tasks.items() if k not in seen]
    if missing and loaded:
        first = ", ".join(f"{t.env_id} seed {t.spec.seed} options {t.spec.options}" for t in missing[:5])
        report.error("episodes", f"{len(missing)} task(s) of suite {suite.ref} missing, e.g. {first}")
    if report.errors:
        return

    # -- results
    for env_id in wanted_envs:
        try:
            recomputed = env_results(env_id, [x.episode for x in good.get(env_id, [])])
        except ResultsError as exc:
            report.error(f"episodes of {env_id}", str(exc))
            continue
        report.results[env_id] = recomputed
        claimed = data["results"].get(env_id)
        if claimed is None:
            report.error("submission.json['results']", f"no results for {env_id}")
            continue
        for col, msg in compare(claimed, recomputed):
            report.error(f"submission.json['results'][{env_id!r}][{col!r}]", msg)

    # -- replay
    if seed is None:
        seed = secrets.randbits(32)
    report.sample_seed = None if full else seed
    rng = random.Random(seed)
    chosen: list[_Loaded] = []
    for env_id in wanted_envs:
        records = good.get(env_id, [])
        chosen += records if full else rng.sample(records, min(sample, len(records)))
    diffs = _replay_all(chosen, workers=max(1, workers))
    report.replayed = len(chosen)
    for x, d in zip(chosen, diffs):
        for msg in d:
            report.error(x.where, msg)


def _spec(ep: Episode):
    from agentgym.agent_io import EpisodeSpec

    return EpisodeSpec(ep.seed, ep.options)


def verify(
    path: str | os.PathLike[str],
    *,
    full: bool = False,
    sample: int = DEFAULT_SAMPLE,
    seed: int | None = None,
    workers: int = 1,
    limits: Limits = DEFAULT_LIMITS,
) -> VerificationReport:
    """Verify a submission folder, ``submission.json`` path, ``.zip`` or ``.tar(.gz)``; see :func:`verify_folder`."""
    start = time.perf_counter()
    try:
        with open_submission(path, limits) as folder:
            return verify_folder(folder, full=full, sample=sample, seed=seed, workers=workers, limits=limits)
    except SubmissionError as exc:
        report = VerificationReport(full=full)
        report.error(Path(path).name, str(exc))
        report.seconds = time.perf_counter() - start
        return report


VERIFICATION_FILE = "verification.json"


def _who() -> str:
    import getpass
    import socket

    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # no user name in some containers
        return "unknown"


def verification_record(folder: str | os.PathLike[str], report: VerificationReport) -> dict[str, Any]:
    """What a full verification of ``folder`` found, who ran it and when: the record a badge links to."""
    import datetime as _dt

    from agentgym.version import __version__

    folder = Path(folder)
    return {
        "ok": report.ok,
        "full": report.full,
        "verified_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verified_by": _who(),
        "agentgym_version": __version__,
        "verifier_version": VERIFIER_VERSION,
        "episodes": report.episodes,
        "replayed": report.replayed,
        "seconds": round(report.seconds, 3),
        "content_sha256": content_hash(folder),
        "errors": report.errors[:20],
        "warnings": report.warnings[:20],
        "results": report.results,
    }


def write_verification(folder: str | os.PathLike[str], report: VerificationReport) -> Path:
    """Write the maintainer's record of a full, accepted verification into the entry (``verify --full --mark``).

    The record says who verified the entry, when and with which verifier. It is informational: the board's
    badge never reads it (the build replays every entry in full itself), so a hand-written or stale record
    changes nothing.

    Raises:
        ValueError: the report is a rejection or a sampled (not full) replay.
    """
    if not report.ok:
        raise ValueError("only an accepted submission can be marked verified")
    if not report.full:
        raise ValueError("a sampled replay is a pre-check only; mark an entry after `verify --full`")
    path = Path(folder) / VERIFICATION_FILE
    path.write_text(json.dumps(verification_record(folder, report), indent=2) + "\n", encoding="utf-8")
    return path


def verify_cached(
    folder: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None, workers: int = 1
) -> dict[str, Any]:
    """A full verification of an entry folder, reusing an earlier one made of exactly the same bytes.

    The cache key is :func:`~agentgym.leaderboard.archive.content_hash` of the entry plus
    :data:`VERIFIER_VERSION` and the installed env fingerprints, and the cache lives with the verifier
    (``$AGENTGYM_CACHE/leaderboard-verify``), never in the entry: a submitter cannot supply a cached result.

    Returns:
        :func:`verification_record` of the full verification (``"cached": True`` when reused).
    """
    folder = Path(folder)
    key = _cache_key(folder)

    def run() -> dict[str, Any]:
        return verification_record(folder, verify(folder, full=True, workers=workers))

    return cached_result("leaderboard-verify", key, run, cache_dir)


def cached_result(
    kind: str, key: str, compute: Any, cache_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """``compute()`` (a JSON-able dict), or its earlier result stored under ``key`` in the verifier's cache.

    The cache is ``cache_dir`` or ``$AGENTGYM_CACHE/<kind>``; ``"cached"`` says whether the result was reused.
    """
    if cache_dir is None:
        from agentgym.data import cache_dir as _cache_dir

        cache_dir = _cache_dir() / kind
    path = Path(cache_dir) / f"{key}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("cache_key") == key and not machine_errors(record):
            return {**record, "cached": True}
    except (OSError, ValueError):
        pass
    record = {**compute(), "cache_key": key}
    if machine_errors(record):  # a verdict on this machine, not on the entry: the next build tries again
        return {**record, "cached": False}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:  # a read-only cache only costs time
        pass
    return {**record, "cached": False}


#: What a replay error says when the verifying machine lacks something (a data set the env reads), not when
#: the entry is wrong: such a verdict is never cached, so a build run once without ``AGENTGYM_DATA`` does not
#: keep the entry unverified after the data is there.
MACHINE_ERRORS = ("raised DataNotFoundError",)


def machine_errors(record: dict[str, Any]) -> list[str]:
    """The errors of a cached verdict that come from the verifying machine (see :data:`MACHINE_ERRORS`)."""
    errors = record.get("errors") or []
    return [e for e in errors if isinstance(e, str) and any(m in e for m in MACHINE_ERRORS)]


def cache_key(folder: str | os.PathLike[str], extra: Sequence[str] = ()) -> str:
    """The key a verdict on ``folder`` is cached under: its bytes (plus ``extra`` files), the verifier, the sources."""
    return _cache_key(Path(folder), extra)


def _cache_key(folder: Path, extra: Sequence[str] = ()) -> str:
    import hashlib

    envs: list[str] = []
    try:
        data = json.loads((folder / SUBMISSION_FILE).read_text(encoding="utf-8"))
        for env_id in sorted(data.get("envs", {})):
            try:
                envs.append(f"{env_id}={spec_hash(env_id)}")
            except Exception:
                envs.append(f"{env_id}=?")
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    from agentgym.version import __version__

    blob = "\n".join(
        [
            content_hash(folder, list(extra)),
            f"verifier {VERIFIER_VERSION}",
            f"agentgym {__version__}",
            _code_hash(),
            *envs,
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


#: Sources left out of :func:`_code_hash`: they render or submit, and never take part in a replay.
_PRESENTATION = frozenset(
    {"cli.py", "leaderboard/cli.py", "leaderboard/table.py", "leaderboard/site.py", "leaderboard/build.py"}
)


@functools.lru_cache(maxsize=1)
def _code_hash() -> str:
    """sha256 of the installed agentgym sources: an env whose code changed is replayed again, not trusted."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in _PRESENTATION:  # rendering the board cannot change what a replay finds
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
