"""What a submission is on disk, and opening one safely: names, hashes, size caps, archive extraction.

A submission is a folder (or a .zip / .tar / .tar.gz of one)::

    submission.json              metadata, runnable agent spec, suite, env versions, claimed results, logs
    episodes/<Env-vN>.jsonl.gz   the episode logs (one agentgym.episodes.Episode per line)

:func:`open_submission` gives a folder for a folder, ``.zip``, ``.tar`` or ``.tar.gz``: archives are
extracted with no absolute paths, no ``..``, no links or devices, and caps on members and sizes.
:func:`content_hash` names the exact bytes of an entry (what a cached verification is keyed on).

This is the bottom step of the leaderboard: archive -> schema -> verify -> rerun -> entry -> table -> site -> build.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# The one file hash (data downloads, logs, agent sources and model checkpoints all use it).
from agentgym.data import sha256_file

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
    from agentgym.version import __version__

    return {"ref": f"{env_id}@{__version__}", "spec_hash": spec_hash(env_id)}


def log_name(env_id: str) -> str:
    """File stem of an env's log: ``agentgym/Sokoban-v0`` -> ``Sokoban-v0``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", env_id.split("/")[-1])


def content_hash(folder: str | Path, names: Iterator[str] | list[str] | None = None) -> str:
    """sha256 over ``submission.json`` and every log it lists (names and bytes): the identity of an entry.

    A verification cached under this hash is valid for exactly these bytes; any edit gives another hash.
    ``names`` adds further files (relative paths) to the hash, e.g. a rerun's logs.
    """
    folder = Path(folder)
    h = hashlib.sha256()
    rels = [SUBMISSION_FILE]
    try:
        data = json.loads((folder / SUBMISSION_FILE).read_text(encoding="utf-8"))
        rels += sorted(str(e["path"]) for e in data.get("episodes", []) if isinstance(e, dict) and "path" in e)
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    rels += sorted(names or [])
    for rel in rels:
        h.update(rel.encode() + b"\0")
        path = folder / rel
        h.update(sha256_file(path).encode() if path.is_file() else b"missing")
        h.update(b"\0")
    return h.hexdigest()


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
