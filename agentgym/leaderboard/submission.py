"""Make a submission from an evaluation run, open one safely, and turn one into a board entry.

* :func:`run_suite` plays a suite (``agentgym eval --suite NAME --out DIR``): working logs go to
  ``DIR/logs/*.jsonl`` (resumable), then :func:`write_submission` compresses them into
  ``DIR/episodes/*.jsonl.gz`` and writes ``DIR/submission.json`` with the recomputed results.
* :func:`open_submission` gives a folder for a folder, ``.zip``, ``.tar`` or ``.tar.gz``: archives are
  extracted with no absolute paths, no ``..``, no links or devices, and caps on members and sizes.
* :func:`make_entry` (``agentgym submit DIR``) fills in metadata, verifies, and copies the submission
  into ``leaderboards/entries/<slug>/`` to be added by pull request.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.leaderboard.schema import SCHEMA_VERSION
from agentgym.suites import Suite

SUBMISSION_FILE = "submission.json"


class SubmissionError(ValueError):
    """A submission cannot be opened or read; the message says which file and why."""


@dataclass(frozen=True)
class Limits:
    """Size caps applied to untrusted submissions (bytes unless said otherwise)."""

    max_members: int = 64  # files in an archive
    max_file_bytes: int = 512 * 2**20  # one file after extraction / decompression
    max_total_bytes: int = 2 * 2**30  # everything after extraction and decompression
    max_json_bytes: int = 2**20  # submission.json
    max_line_bytes: int = 32 * 2**20  # one episode record


#: The caps used unless a caller passes others.
DEFAULT_LIMITS = Limits()


# -- env identity ---------------------------------------------------------------------------------
def spec_hash(env_id: str) -> str:
    """A 16-hex fingerprint of an env's registration (entry point, kwargs, step limit).

    Two runs with the same hash played the same env; a changed registration under the same id (which
    should have bumped ``-vN``) shows up as a different hash.
    """
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers ids)

    spec = gym.spec(env_id)
    entry = spec.entry_point if isinstance(spec.entry_point, str) else repr(spec.entry_point)
    payload = {"id": spec.id, "entry_point": entry, "kwargs": spec.kwargs, "max_episode_steps": spec.max_episode_steps}
    blob = json.dumps(payload, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def env_ref(env_id: str) -> dict[str, str]:
    """``{"ref": "ENV_ID@AGENTGYM_VERSION", "spec_hash": ...}`` for the env as installed now."""
    from agentgym import __version__

    return {"ref": f"{env_id}@{__version__}", "spec_hash": spec_hash(env_id)}


def log_name(env_id: str) -> str:
    """File stem of an env's log: ``agentgym/Sokoban-v0`` -> ``Sokoban-v0``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", env_id.split("/")[-1])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_agent_meta(agent: Any = None) -> dict[str, Any]:
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
    from agentgym import __version__
    from agentgym.episodes import iter_episodes
    from agentgym.results import env_results

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
    from agentgym.records import EpisodeSpec

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
) -> tuple[Path, dict[str, dict[str, float]]]:
    """Play every task of ``suite`` with ``agent`` and write a submission into ``out_dir``.

    ``env_backend``/``num_workers`` choose where the envs run (see :func:`agentgym.evaluation.run_episodes`).

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
    meta = dict(agent_meta) if agent_meta is not None else default_agent_meta(agent)
    path = write_submission(out, suite, logs, meta)
    return path, json.loads(path.read_text(encoding="utf-8"))["results"]


# -- opening untrusted submissions ----------------------------------------------------------------
def _check_member_name(name: str) -> PurePosixPath:
    p = PurePosixPath(name.replace("\\", "/"))
    if name.startswith(("/", "\\")) or p.is_absolute() or re.match(r"^[A-Za-z]:", name):
        raise SubmissionError(f"archive member {name!r} has an absolute path")
    if any(part == ".." for part in p.parts):
        raise SubmissionError(f"archive member {name!r} points outside the submission folder (..)")
    return p


def _strip_root(names: list[PurePosixPath]) -> int:
    # Accept both "submission.json" at the top and "<folder>/submission.json".
    if any(n.parts == (SUBMISSION_FILE,) for n in names):
        return 0
    tops = {n.parts[0] for n in names if n.parts}
    return 1 if len(tops) == 1 else 0


def _extract_zip(path: Path, dest: Path, limits: Limits) -> None:
    with zipfile.ZipFile(path) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) > limits.max_members:
            raise SubmissionError(f"{path.name}: {len(infos)} files, more than the {limits.max_members} allowed")
        names = [_check_member_name(i.filename) for i in infos]
        for info in infos:
            mode = (info.external_attr >> 16) & 0o170000
            if mode and mode not in (0o100000,):  # symlinks (0o120000) and anything not a regular file
                raise SubmissionError(f"{path.name}: member {info.filename!r} is a link or special file")
        skip = _strip_root(names)
        total = 0
        for info, name in zip(infos, names):
            if info.file_size > limits.max_file_bytes:
                raise SubmissionError(
                    f"{path.name}: member {info.filename!r} is {info.file_size} bytes, over the {limits.max_file_bytes} cap"
                )
            target = dest.joinpath(*name.parts[skip:])
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            # Count real bytes: the header's file_size may lie (zip bombs).
            with zf.open(info) as src, open(target, "wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    written += len(block)
                    total += len(block)
                    if written > limits.max_file_bytes:
                        raise SubmissionError(f"{path.name}: member {info.filename!r} exceeds the size cap")
                    if total > limits.max_total_bytes:
                        raise SubmissionError(f"{path.name}: extracted size exceeds {limits.max_total_bytes} bytes")
                    dst.write(block)


def _extract_tar(path: Path, dest: Path, limits: Limits) -> None:
    with tarfile.open(path, "r:*") as tf:
        members = tf.getmembers()
        files = [m for m in members if not m.isdir()]
        if len(files) > limits.max_members:
            raise SubmissionError(f"{path.name}: {len(files)} files, more than the {limits.max_members} allowed")
        for m in members:
            _check_member_name(m.name)
            if m.issym() or m.islnk():
                raise SubmissionError(f"{path.name}: member {m.name!r} is a link; submissions hold plain files only")
            if not (m.isfile() or m.isdir()):
                raise SubmissionError(f"{path.name}: member {m.name!r} is a device, fifo or other special file")
        names = [_check_member_name(m.name) for m in files]
        skip = _strip_root(names)
        total = 0
        for m, name in zip(files, names):
            if m.size > limits.max_file_bytes:
                raise SubmissionError(
                    f"{path.name}: member {m.name!r} is {m.size} bytes, over the {limits.max_file_bytes} cap"
                )
            total += m.size
            if total > limits.max_total_bytes:
                raise SubmissionError(f"{path.name}: extracted size exceeds {limits.max_total_bytes} bytes")
            target = dest.joinpath(*name.parts[skip:])
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            if src is None:
                raise SubmissionError(f"{path.name}: cannot read member {m.name!r}")
            with src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)


@contextlib.contextmanager
def open_submission(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Iterator[Path]:
    """Yield a folder holding the submission at ``path`` (a folder, .zip, .tar, .tar.gz or .tgz).

    Archives are extracted into a temporary folder removed on exit.

    Raises:
        SubmissionError: missing path, unknown format, or an unsafe or oversized archive.
    """
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"{path} does not exist")
    if path.is_dir():
        yield path
        return
    if path.name == SUBMISSION_FILE:
        yield path.parent
        return
    with tempfile.TemporaryDirectory(prefix="agentgym-submission-") as tmp:
        dest = Path(tmp)
        try:
            if zipfile.is_zipfile(path):
                _extract_zip(path, dest, limits)
            elif tarfile.is_tarfile(path):
                _extract_tar(path, dest, limits)
            else:
                raise SubmissionError(f"{path} is not a folder, .zip or .tar(.gz) archive")
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
            raise SubmissionError(f"{path.name}: damaged archive: {exc}") from exc
        yield dest


def read_gz_capped(path: Path, limits: Limits) -> bytes:
    """Decompress a .gz log, refusing more than ``limits.max_file_bytes`` of output (gzip bombs)."""
    out = bytearray()
    try:
        with gzip.open(path, "rb") as fh:
            while True:
                block = fh.read(1 << 20)
                if not block:
                    break
                out += block
                if len(out) > limits.max_file_bytes:
                    raise SubmissionError(
                        f"{path.name}: decompresses to more than {limits.max_file_bytes} bytes (size cap)"
                    )
    except (OSError, EOFError) as exc:
        raise SubmissionError(f"{path.name}: not a complete gzip file ({exc}); was the log truncated?") from exc
    return bytes(out)


# -- entries --------------------------------------------------------------------------------------
def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:60] or "entry"


def entry_slug(data: Mapping[str, Any]) -> str:
    """``<suite>-<agent name>-<date>``, made filesystem- and URL-safe."""
    agent = data.get("agent", {})
    suite = slugify(str(data.get("suite", {}).get("name", "suite")))[:30]
    name = slugify(str(agent.get("name", "agent")))[:40].strip("-")
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

    Args:
        path: submission folder or archive.
        entries_dir: ``leaderboards/entries``.
        overrides: ``agent`` metadata fields to set before validating (name, model, ...).
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
            with tempfile.TemporaryDirectory(prefix="agentgym-entry-") as tmp:
                staged = Path(tmp)
                _copy_submission(folder, staged, data)
                report = verify_folder(staged, sample=replay_sample, workers=workers, limits=limits)
                return (_install(staged, entries_dir, data, overwrite) if report.ok else None), report
        report = verify_folder(folder, sample=replay_sample, workers=workers, limits=limits)
        if not report.ok:
            return None, report
        data = json.loads(sub.read_text(encoding="utf-8"))
        return _install(folder, entries_dir, data, overwrite), report


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
