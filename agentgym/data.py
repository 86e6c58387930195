"""Where data sets live, and the ``agentgym data download|prepare`` commands.

Data files are checked: :func:`check_file` compares a file with the shipped sha256 manifest
(``data_manifest.json``, written by ``tools/make_data_manifest.py``) when an env first loads it, and
``agentgym data verify`` checks them all; parse errors (:func:`read_json`, :func:`iter_jsonl`) name the file,
the line and the remedy. :func:`download_file` is the one download helper (resume, sha256, progress bar).

Data-backed envs read from ``$AGENTGYM_DATA`` (default: the user data dir, e.g.
``~/.local/share/agentgym``). Each family provides ``prepare(source, dest)`` (lay out a data folder
from a local copy) and ``download(dest)`` (fetch from the official source) in its own module, and
registers that module here with :func:`register_family` (``agentgym/envs/__init__.py`` does it for ours);
this module only resolves paths and dispatches, and knows no env module.

``AGENTGYM_DATA`` may point at a read-only copy (CI uses ``../shared/data``): anything that must be
unpacked or converted goes to :func:`cache_dir` (``$AGENTGYM_CACHE`` or the user cache dir) instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol


class DataFamily(Protocol):
    """What a family's data module provides (e.g. ``agentgym.envs.hotpotqa.data``)."""

    def prepare(self, source: Path, dest: Path) -> Path: ...

    def download(self, dest: Path) -> Path: ...


#: family -> a function that imports and returns its :class:`DataFamily` module; filled by :func:`register_family`.
FAMILIES: dict[str, Callable[[], Any]] = {}


def register_family(name: str, load: Callable[[], DataFamily]) -> None:
    """Make ``agentgym data prepare|download NAME`` call the module that ``load()`` returns (imported on use)."""
    FAMILIES[name] = load


class DataNotFoundError(FileNotFoundError):
    """A data set an env needs is not where agentgym looks; the message names the command to fix it."""


def data_dir() -> Path:
    """Root of the data sets: ``$AGENTGYM_DATA`` or the user data dir."""
    env = os.environ.get("AGENTGYM_DATA")
    if env:
        return Path(env).expanduser().resolve()
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentgym"))


def cache_dir(*parts: str) -> Path:
    """A writable cache folder (``$AGENTGYM_CACHE`` or the user cache dir), created on demand."""
    env = os.environ.get("AGENTGYM_CACHE")
    if env:
        root = Path(env).expanduser()
    else:
        from platformdirs import user_cache_dir

        root = Path(user_cache_dir("agentgym"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def family_dir(family: str) -> Path:
    """``<data_dir>/<family>``, or a :class:`DataNotFoundError` naming the commands that create it."""
    path = data_dir() / family
    if not path.exists():
        raise DataNotFoundError(missing_message(family, path))
    return path


def missing_message(family: str, path: Path) -> str:
    return (
        f"{family} data not found at {path}. Run `agentgym data download {family}` (needs internet), or "
        f"`agentgym data prepare {family} --from DIR` with a local copy, or set AGENTGYM_DATA to the folder "
        f"that holds `{family}/`."
    )


def _module(family: str) -> DataFamily:
    if family not in FAMILIES:
        raise SystemExit(f"unknown data set {family!r}; choose from {', '.join(FAMILIES) or 'none registered'}")
    return FAMILIES[family]()


def prepare(family: str, source: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None) -> Path:
    """Lay out ``<dest or data_dir()>/<family>`` from a local copy at ``source``."""
    dest_root = Path(dest) if dest is not None else data_dir()
    return _module(family).prepare(Path(source), dest_root / family)


def download(family: str, dest: str | os.PathLike[str] | None = None) -> Path:
    """Fetch ``family`` from its official source into ``<dest or data_dir()>/<family>``."""
    dest_root = Path(dest) if dest is not None else data_dir()
    return _module(family).download(dest_root / family)


class DownloadError(ConnectionError):
    """A data download that failed (no network, the host refused); the message says how to get the files by hand."""


# -- reading data files: errors that name the file, the line and the remedy ----------------------------------
class DataFileError(ValueError):
    """A data file that does not parse or differs from the manifest; the message names the file and the fix."""


def restore_hint(family: str) -> str:
    return (
        f"restore it from a good copy with `agentgym data prepare {family} --from DIR` (or `agentgym data download "
        f"{family}`), then check with `agentgym data verify {family}`"
    )


def _line_of(raw: bytes, pos: int) -> int:
    return raw.count(b"\n", 0, pos) + 1


def read_json(path: str | os.PathLike[str], family: str, error: type[DataFileError] = DataFileError) -> Any:
    """Parse a JSON file; a truncated, corrupt or non-UTF-8 file raises :class:`DataFileError` with its line."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(
            f"{path}, line {_line_of(raw, e.start)}: not UTF-8 ({e.reason} at byte {e.start}); the file is corrupt: "
            + restore_hint(family)
        ) from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        cut = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        what = "truncated (the file ends before the JSON does)" if cut else "not valid JSON"
        raise error(f"{path}, line {e.lineno} column {e.colno}: {what} ({e.msg}): " + restore_hint(family)) from e
    except RecursionError as e:
        raise error(f"{path}: nested too deeply to be a data file: " + restore_hint(family)) from e


def iter_jsonl(
    path: str | os.PathLike[str], family: str, error: type[DataFileError] = DataFileError
) -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file; errors name the line."""
    path = Path(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise error(
                    f"{path}, line {lineno}: not UTF-8 ({e.reason} at byte {e.start} of the line); the file is "
                    "corrupt: " + restore_hint(family)
                ) from e
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                cut = not raw.endswith(b"\n")  # the last line, cut short
                what = "truncated (the file ends mid-record)" if cut else f"not valid JSON ({e.msg}, column {e.colno})"
                raise error(f"{path}, line {lineno}: {what}: " + restore_hint(family)) from e
            yield lineno, obj


# -- downloads ---------------------------------------------------------------------------------------------------
def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def download_file(
    url: str,
    dest: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Fetch ``url`` to ``dest``: resumable, checked, atomic. The one download helper of agentgym.

    Bytes go to ``dest + ".part"``; a ``.part`` left by an interrupted run is resumed with an HTTP ``Range``
    request (a server that ignores it is read from the start). When ``sha256`` is given the finished file must
    have it, otherwise the ``.part`` is removed and :class:`DataFileError` says so. Only then is the file
    renamed to ``dest``. A ``dest`` that exists with the right sum (or any, when no sum is given) is kept.
    ``progress`` shows a tqdm bar on stderr.
    """
    import urllib.error
    import urllib.request

    dest = Path(dest)
    if dest.is_file() and (sha256 is None or sha256_file(dest) == sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = getattr(response, "status", None) or response.getcode()
            resumed = have > 0 and status == 206
            length = response.headers.get("Content-Length")
            total = (int(length) + (have if resumed else 0)) if length and length.isdigit() else None
            from tqdm.auto import tqdm

            with (
                open(part, "ab" if resumed else "wb") as out,
                tqdm(
                    total=total,
                    initial=have if resumed else 0,
                    unit="B",
                    unit_scale=True,
                    desc=dest.name,
                    disable=not progress,
                ) as bar,
            ):
                while block := response.read(1 << 20):
                    out.write(block)
                    bar.update(len(block))
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the .part is already complete
            pass
        else:
            raise ConnectionError(f"could not download {url}: HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise ConnectionError(
            f"could not download {url} ({getattr(e, 'reason', e)}); run the command again to resume from "
            f"{part.stat().st_size if part.is_file() else 0:,} bytes"
        ) from e
    if sha256 is not None:
        got = sha256_file(part)
        if got != sha256:
            part.unlink(missing_ok=True)
            raise DataFileError(
                f"{url}: the download's sha256 is {got}, expected {sha256}; the file was removed. Try again, or "
                "fetch it by hand and use `agentgym data prepare`."
            )
    part.replace(dest)
    return dest


# -- the sha256 manifest: `agentgym data verify` and the check on first load ---------------------------------------
MANIFEST_PATH = Path(__file__).with_name("data_manifest.json")
_manifest: dict[str, tuple[int, str]] | None = None
#: (path, size, mtime_ns) of files found equal to the manifest, this process and (via the cache file) earlier ones.
_verified: dict[str, tuple[int, int, str]] | None = None


def manifest() -> dict[str, tuple[int, str]]:
    """``{"family/relative/path": (size, sha256)}`` of every published data file agentgym reads."""
    global _manifest
    if _manifest is None:
        raw = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["files"]
        _manifest = {k: (int(v[0]), str(v[1])) for k, v in raw.items()}
    return _manifest


def _verified_cache() -> dict[str, tuple[int, int, str]]:
    global _verified
    if _verified is None:
        _verified = {}
        try:
            raw = json.loads((cache_dir() / "verified-data.json").read_text(encoding="utf-8"))
            _verified = {k: (int(v[0]), int(v[1]), str(v[2])) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError):
            pass  # no cache yet, or a broken one: re-hash
    return _verified


def _remember(path: Path, size: int, mtime_ns: int, digest: str) -> None:
    cache = _verified_cache()
    cache[str(path)] = (size, mtime_ns, digest)
    try:
        target = cache_dir() / "verified-data.json"
    except OSError:  # no writable cache: the check is redone next process, nothing worse
        return
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(cache), encoding="utf-8")
        tmp.replace(target)  # atomic: racing workers each write a whole file; a lost entry is re-hashed later
    except OSError:
        tmp.unlink(missing_ok=True)


def _manifest_key(path: Path) -> str | None:
    try:
        return path.resolve().relative_to(data_dir()).as_posix()
    except ValueError:
        return None  # outside the agentgym data folder: the user's own file, not checked


def _mismatch(path: Path, family: str, what: str) -> DataFileError:
    return DataFileError(
        f"{path} differs from the published {family} data ({what}): "
        + restore_hint(family)
        + ". To use an edited copy on purpose, keep it outside the agentgym data folder and pass its path to the env."
    )


class DataIntegrityWarning(UserWarning):
    """A data file differs from the manifest in a data folder that is not a copy of the published data set."""


_warned: set[str] = set()


def check_file(path: str | os.PathLike[str], family: str) -> None:
    """Check a data file against the manifest before an env reads it (the cheap check on first load).

    Only files under :func:`data_dir` that the manifest lists are checked. The size is compared on every call;
    the sha256 once per (path, size, mtime), remembered in ``$AGENTGYM_CACHE/verified-data.json``, so later
    loads (in this process or the next) cost one ``stat``.

    A difference is an error in a copy of the published data set (a data folder holding its ``MANIFEST.tsv``, as
    CI's does): there an edited file would silently change scores. Elsewhere (data fetched from the official
    sources by ``agentgym data download``, which may be a later release of the same files) it is a
    :class:`DataIntegrityWarning`, once per file; ``agentgym data verify`` reports it either way.

    Raises:
        DataFileError: the file's size or sha256 is not the published one; the message says how to restore it.
    """
    path = Path(path)
    key = _manifest_key(path)
    entry = manifest().get(key) if key is not None else None
    if entry is None:
        return
    size, digest = entry
    st = path.stat()
    problem = None
    resolved = path.resolve()
    if st.st_size != size:
        problem = f"{st.st_size:,} bytes, expected {size:,}"
    elif _verified_cache().get(str(resolved)) == (size, st.st_mtime_ns, digest):
        return
    else:
        got = sha256_file(path)
        if got == digest:
            _remember(resolved, size, st.st_mtime_ns, digest)
            return
        problem = f"sha256 {got}, expected {digest}"
    error = _mismatch(path, family, problem)
    if (data_dir() / "MANIFEST.tsv").is_file():
        raise error
    if str(resolved) not in _warned:
        _warned.add(str(resolved))
        import warnings

        warnings.warn(str(error), DataIntegrityWarning, stacklevel=3)


def verify(families: list[str] | None = None, *, log: Any = print) -> list[str]:
    """``agentgym data verify``: hash every listed file of ``families`` (default all) under :func:`data_dir`.

    Returns one line per problem (a file that differs, or a game missing from a split folder that exists);
    files of a data set that is not installed are not problems (the line printed says so). Files the manifest
    does not list (an official download's raw form, your own files) are not checked.
    """
    root = data_dir()
    problems: list[str] = []
    for family in families or list(FAMILIES):
        _module(family)  # unknown names fail here, naming the choices
        entries = {k: v for k, v in manifest().items() if k.startswith(family + "/")}
        ok = absent = 0
        start = len(problems)
        for key, (size, digest) in entries.items():
            path = root / key
            if not path.is_file():
                # an ALFWorld split folder that exists must hold all its games; other files have alternatives
                # (WebShop's raw form, HotpotQA's official files), so their absence is only counted
                group = key.split("/")[:3]
                if len(key.split("/")) > 4 and (root.joinpath(*group)).is_dir():
                    problems.append(f"{path}: missing from {root.joinpath(*group)}: " + restore_hint(family))
                else:
                    absent += 1
                continue
            st = path.stat()
            got = sha256_file(path) if st.st_size == size else None
            if got != digest:
                what = f"sha256 {got}, expected {digest}" if got else f"{st.st_size:,} bytes, expected {size:,}"
                problems.append(str(_mismatch(path, family, what)))
                continue
            _remember(path.resolve(), size, st.st_mtime_ns, digest)
            ok += 1
        bad = len(problems) - start
        note = f", {absent} not installed" if absent else ""
        log(f"{family}: {ok} file(s) match the manifest, {bad} differ or are missing{note} (under {root / family})")
    for line in problems:
        log(line)
    return problems
