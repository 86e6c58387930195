"""Make a submission from an evaluation run and turn one into a board entry.

* :func:`run_suite` plays a suite (``agentgym eval --suite NAME --out DIR``): working logs go to
  ``DIR/logs/*.jsonl`` (resumable), then :func:`write_submission` compresses them into
  ``DIR/episodes/*.jsonl.gz`` and writes ``DIR/submission.json`` with the recomputed results and the
  agent's runnable spec (:func:`runnable_for`).
* :func:`make_entry` (``agentgym submit DIR``) fills in metadata, checks that the runnable spec is pinned
  (or marked logs only), runs the sampled pre-check, and copies the submission into
  ``leaderboards/entries/<slug>/`` to be added by pull request.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import importlib.util
import json
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgym.leaderboard.archive import (
    DEFAULT_LIMITS,
    SUBMISSION_FILE,
    Limits,
    SubmissionError,
    env_ref,
    log_name,
    open_submission,
    sha256_file,
)
from agentgym.leaderboard.schema import MODEL_PREFIXES, SCHEMA_VERSION, SCRIPTED_SPECS, runnable_errors
from agentgym.suites import Suite


def module_sha256(module: str) -> str | None:
    """sha256 of a module's source file (what ``runnable.code_sha256`` pins), None when it has no file."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    if not origin or not Path(origin).is_file():
        return None
    return sha256_file(Path(origin))


def runnable_for(spec: str | None, agent: Any = None, kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``agent.runnable`` block for an agent built from ``agentgym eval --agent SPEC``.

    Scripted agents and ``module:Class`` agents (pinned by their source's sha256) are runnable as they are.
    A transformers model agent (``hf:``, ``react:``, ``reflexion:``) is pinned by what was loaded: a local
    folder by its :func:`~agentgym.models.loading.checkpoint_sha256`, a hub id by the commit it was loaded at
    (``hf:ID@COMMIT``, or the one the local HF cache holds). Otherwise (an API model, a branch or tag as the
    revision, a hub commit not known here) it is marked logs only with the reason.
    """
    name = str(getattr(agent, "name", None) or spec or "unnamed-agent")[:200]
    cfg: dict[str, Any] = {}
    fn = getattr(agent, "config", None)
    if callable(fn):
        from agentgym.episodes import to_jsonable

        cfg = to_jsonable(dict(fn()))
    if not spec:
        return {
            "logs_only": True,
            "reason": "the agent was not built from an `agentgym eval --agent` spec",
            "agent_name": name,
        }
    if spec in SCRIPTED_SPECS:
        return {"spec": spec, "kwargs": cfg if spec == "random" else {}, "agent_name": name}
    if spec.startswith(MODEL_PREFIXES):
        return _model_runnable(spec, name, cfg)
    module, _, _ = spec.partition(":")
    digest = module_sha256(module)
    if digest is None:
        return {"logs_only": True, "reason": f"{spec}: no source file found for module {module}", "agent_name": name}
    return {"spec": spec, "kwargs": {}, "agent_name": name, "code_sha256": digest}


#: Model-agent settings recorded as the runnable's kwargs (what ``from_spec`` takes to build the same agent).
_MODEL_KWARGS = ("temperature", "top_p", "max_new_tokens", "history_length")


def _model_runnable(spec: str, name: str, cfg: Mapping[str, Any]) -> dict[str, Any]:
    from agentgym.agents import model_target
    from agentgym.models import loading

    backend, model_id, revision = model_target(spec) or ("hf", "", None)

    def logs_only(why: str) -> dict[str, Any]:
        return {"logs_only": True, "reason": f"{spec}: {why}"[:500], "agent_name": name}

    if backend == "openai":
        return logs_only("an API model: the weights behind the server cannot be checked, so it cannot be re-run")
    pin: dict[str, Any] = {"id": model_id}
    try:
        folder = loading.local_checkpoint(model_id)
    except (OSError, ImportError) as exc:  # `smollm2` without its package: nothing was loaded to pin
        return logs_only(f"no checkpoint folder to pin ({exc})")
    if folder is not None:
        pin["checkpoint_sha256"] = loading.checkpoint_sha256(folder)  # the files that were just loaded
        if revision:
            pin["revision"] = revision  # load_model checked it is the snapshot's commit
    elif revision and not loading.COMMIT_RE.match(revision):
        commit = loading.hub_commit(model_id, revision)
        return logs_only(
            f"revision {revision!r} is a branch or tag, which can move; evaluate with "
            f"hf:{model_id}@{commit or 'COMMIT'} (the 40-hex commit) to make the entry re-runnable"
        )
    else:
        commit = revision or loading.hub_commit(model_id)
        if commit is None:
            return logs_only(
                f"the hub commit of {model_id} is not in the local HF cache; evaluate with hf:{model_id}@COMMIT, "
                "or give model.revision with `agentgym submit --runnable FILE`"
            )
        pin["revision"] = commit
    kwargs = {k: cfg[k] for k in _MODEL_KWARGS if cfg.get(k) is not None}
    if cfg.get("template_style"):
        kwargs["style"] = cfg["template_style"]
    templates = sorted({str(v) for k, v in cfg.items() if k.startswith("template:")})
    if "template" in cfg:  # an explicit template: its id and version
        templates = [f"{cfg['template']}@{cfg.get('template_version', '')}"]
    sampling = {k: cfg[k] for k in ("temperature", "top_p", "max_new_tokens") if isinstance(cfg.get(k), (int, float))}
    return {
        "spec": spec,
        "kwargs": kwargs,
        "agent_name": name,
        "model": pin,
        "prompt_version": ",".join(templates)[:50] or "default",
        "sampling": sampling,
    }


def default_agent_meta(agent: Any = None, runnable: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Metadata for a fresh submission; ``agentgym submit`` lets the user complete it."""
    name = getattr(agent, "name", None) or "unnamed-agent"
    cfg = {}
    fn = getattr(agent, "config", None)
    if callable(fn):
        from agentgym.episodes import to_jsonable

        cfg = to_jsonable(dict(fn()))
    scripted = name in {"expert", "random"}
    return {
        "name": str(name)[:100],
        "model": "none" if scripted else str(cfg.get("model", "unknown"))[:200],
        "model_size_b": None,
        "method": str(name)[:100],
        "method_type": "Scripted" if scripted else "Other",
        "parameters": cfg if len(cfg) <= 64 else {},
        "date": _dt.date.today().isoformat(),
        "verified": False,
        "runnable": dict(runnable) if runnable is not None else runnable_for(None, agent),
    }


# -- writing --------------------------------------------------------------------------------------
def write_submission(
    out_dir: str | Path,
    suite: Suite,
    logs: Mapping[str, str | Path],
    agent_meta: Mapping[str, Any],
    notes: str | None = None,
) -> Path:
    """Compress the logs of a suite run and write ``submission.json`` with recomputed results.

    Args:
        out_dir: the submission folder.
        suite: the suite that was played.
        logs: env id -> JSONL log holding (at least) that env's suite episodes.
        agent_meta: the ``agent`` block (see the schema).
        notes: free text stored in the submission.

    Returns:
        The path of ``submission.json``.
    """
    from agentgym.episodes import iter_episodes
    from agentgym.results import env_results
    from agentgym.version import __version__

    out = Path(out_dir)
    (out / "episodes").mkdir(parents=True, exist_ok=True)
    wanted = {t.key() for t in suite.tasks}
    files, results, envs = [], {}, {}
    for env_id in suite.env_ids:
        if env_id not in logs:
            raise SubmissionError(f"no log for {env_id}, which suite {suite.ref} needs")
        # One record per suite task, in suite order; a resumed log may hold extra or repeated episodes.
        by_key = {}
        from agentgym.suites import SuiteTask

        for ep in iter_episodes(logs[env_id]):
            key = SuiteTask(ep.env_id, _spec_of(ep)).key()
            if key in wanted:
                by_key[key] = ep
        order = [t.key() for t in suite.tasks if t.env_id == env_id]
        missing = [k for k in order if k not in by_key]
        if missing:
            raise SubmissionError(f"{logs[env_id]} lacks {len(missing)} of the suite's episodes (first: {missing[0]})")
        eps = [by_key[k] for k in order]
        rel = f"episodes/{log_name(env_id)}.jsonl.gz"
        # mtime=0 keeps the .gz (and so its sha256) a function of the content only.
        with open(out / rel, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for ep in eps:
                gz.write((json.dumps(ep.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"))
        files.append({"path": rel, "env_id": env_id, "count": len(eps), "sha256": sha256_file(out / rel)})
        results[env_id] = env_results(env_id, eps)
        envs[env_id] = env_ref(env_id)
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "agent": dict(agent_meta),
        "suite": {"name": suite.name, "version": suite.version},
        "agentgym_version": __version__,
        "envs": envs,
        "results": results,
        "episodes": files,
        "created_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if notes:
        data["notes"] = notes
    path = out / SUBMISSION_FILE
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _spec_of(ep: Any):
    from agentgym.agent_io import EpisodeSpec

    return EpisodeSpec(ep.seed, ep.options)


def run_suite(
    suite: Suite,
    agent: Any,
    out_dir: str | Path,
    *,
    batch_size: int = 8,
    resume: bool = True,
    progress: bool = False,
    agent_meta: Mapping[str, Any] | None = None,
    env_backend: str = "inprocess",
    num_workers: int = 1,
    agent_spec: str | None = None,
) -> tuple[Path, dict[str, dict[str, float]]]:
    """Play every task of ``suite`` with ``agent`` and write a submission into ``out_dir``.

    ``env_backend``/``num_workers`` choose where the envs run (see :func:`agentgym.evaluation.run_episodes`);
    ``agent_spec`` is the ``--agent`` string the agent was built from (recorded as its runnable spec).

    Returns:
        ``(path of submission.json, results by env id)``.
    """
    from agentgym.evaluation import run_episodes

    out = Path(out_dir)
    logs = {}
    for env_id in suite.env_ids:
        log = out / "logs" / f"{log_name(env_id)}.jsonl"
        if not resume and log.exists():
            log.unlink()  # a fresh run: old episodes would otherwise be picked up again
        run_episodes(
            env_id,
            agent,
            suite.specs(env_id),
            batch_size=batch_size,
            log_path=log,
            resume=resume,
            progress=progress,
            env_backend=env_backend,
            num_workers=num_workers,
        )
        logs[env_id] = log
    meta = dict(agent_meta) if agent_meta is not None else default_agent_meta(agent, runnable_for(agent_spec, agent))
    path = write_submission(out, suite, logs, meta)
    return path, json.loads(path.read_text(encoding="utf-8"))["results"]


# -- entries --------------------------------------------------------------------------------------
def slugify(text: str, limit: int | None = 60) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit] or "entry"


def entry_slug(data: Mapping[str, Any]) -> str:
    """``<suite>-<agent name>-<date>``, made filesystem- and URL-safe. A name longer than 40 characters keeps its
    first 33 and a 6-digit hash of the whole name, so two agents whose names differ only in their tails (``... seed
    1``, ``... seed 2``) never share an entry folder."""
    agent = data.get("agent", {})
    suite = slugify(str(data.get("suite", {}).get("name", "suite")))[:30]
    full = slugify(str(agent.get("name", "agent")), limit=None)
    name = full if len(full) <= 40 else f"{full[:33].strip('-')}-{hashlib.sha256(full.encode()).hexdigest()[:6]}"
    date = slugify(str(agent.get("date", "")))[:10]
    return "-".join(p for p in (suite, name, date) if p)  # the date survives long names


def make_entry(
    path: str | Path,
    entries_dir: str | Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    replay_sample: int = 10,
    workers: int = 1,
    limits: Limits = DEFAULT_LIMITS,
    overwrite: bool = True,
) -> tuple[Path | None, Any]:
    """Validate a submission and copy it into ``entries_dir/<slug>/`` (``agentgym submit``).

    The replay here is a sampled pre-check; the board replays every episode itself before it shows a badge.

    Args:
        path: submission folder or archive.
        entries_dir: ``leaderboards/entries``.
        overrides: ``agent`` metadata fields to set before validating (name, model, ..., ``runnable``).

    Raises:
        SubmissionError: the runnable spec is missing or not pinned (the message says what to add).
        replay_sample: episodes per env replayed as a spot check.
        workers: replay processes.
        limits: size caps.
        overwrite: replace an existing entry of the same slug; False raises ``SubmissionError`` instead.

    Returns:
        ``(entry folder or None when rejected, VerificationReport)``.
    """
    from agentgym.leaderboard.verify import verify_folder

    with open_submission(path, limits) as folder:
        sub = folder / SUBMISSION_FILE
        if overrides:
            try:
                data = json.loads(sub.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SubmissionError(f"{sub}: cannot read submission.json: {exc}") from exc
            if isinstance(data, dict) and isinstance(data.get("agent"), dict):
                data["agent"].update({k: v for k, v in overrides.items() if v is not None})
                _check_runnable(data)
            with tempfile.TemporaryDirectory(prefix="agentgym-entry-") as tmp:
                staged = Path(tmp)
                _copy_submission(folder, staged, data)
                report = verify_folder(staged, sample=replay_sample, workers=workers, limits=limits)
                return (_install(staged, entries_dir, data, overwrite) if report.ok else None), report
        try:
            unchecked = json.loads(sub.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            unchecked = None  # verify_folder names the problem
        _check_runnable(unchecked)
        report = verify_folder(folder, sample=replay_sample, workers=workers, limits=limits)
        if not report.ok:
            return None, report
        data = json.loads(sub.read_text(encoding="utf-8"))
        return _install(folder, entries_dir, data, overwrite), report


def _check_runnable(data: Any) -> None:
    agent = data.get("agent") if isinstance(data, dict) else None
    if not isinstance(agent, dict):
        return  # the schema check names it
    errors = runnable_errors(agent.get("runnable"))
    if errors:
        raise SubmissionError(
            "; ".join(errors) + ' (or set agent.runnable to {"logs_only": true, "reason": ..., "agent_name": ...})'
        )


def _copy_submission(src: Path, dest: Path, data: Mapping[str, Any]) -> None:
    (dest / "episodes").mkdir(parents=True, exist_ok=True)
    for f in data.get("episodes", []) if isinstance(data, dict) else []:
        rel = f.get("path") if isinstance(f, dict) else None
        if (
            isinstance(rel, str)
            and re.fullmatch(r"episodes/[A-Za-z0-9._-]+\.jsonl\.gz", rel)
            and (src / rel).is_file()
        ):
            shutil.copyfile(src / rel, dest / rel)
    (dest / SUBMISSION_FILE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _install(src: Path, entries_dir: str | Path, data: Mapping[str, Any], overwrite: bool = True) -> Path:
    target = Path(entries_dir) / entry_slug(data)
    if target.exists():
        if not overwrite:
            raise SubmissionError(
                f"entry {target} already exists; pass --force to replace it, or change --name/--model for a new one"
            )
        shutil.rmtree(target)
    _copy_submission(src, target, data)
    return target
