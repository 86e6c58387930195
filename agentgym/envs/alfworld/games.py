"""ALFWorld game files: where they live, splits, task types, and ``agentgym data prepare|download alfworld``.

Layout of ``$AGENTGYM_DATA/alfworld`` (the layout of the official release, ``$ALFWORLD_DATA``)::

    json_2.1.1/{train,valid_seen,valid_unseen,valid_train}/<task folder>/<trial>/game.tw-pddl
    logic/alfred.pddl, logic/alfred.twl2
    train.tar.gz        (optional: the train split packed; unpacked on first use into the cache)

One ``game.tw-pddl`` (JSON: PDDL domain and problem, text grammar with the task inserted, ``solvable``,
``walkthrough``) is a whole playable game. The task type is the prefix of the task folder's name.

``AGENTGYM_DATA`` may be read-only (CI points it at a shared copy), so a packed train split is unpacked
into :func:`agentgym.data.cache_dir` ``("alfworld")`` the first time the train split is listed.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from agentgym.data import (
    DataFileError,
    DataNotFoundError,
    cache_dir,
    check_file,
    download_file,
    family_dir,
    missing_message,
    read_json,
    restore_hint,
)

#: Splits of ALFWorld (json_2.1.1) and their sizes in the official release.
SPLITS: dict[str, int] = {"train": 3553, "valid_seen": 140, "valid_unseen": 134, "valid_train": 200}

#: Task folder prefix -> short task type (the names of the papers' per-type tables).
TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}

GAME_FILE = "game.tw-pddl"
JSON_DIR = "json_2.1.1"
TRAIN_TARBALL = "train.tar.gz"
#: Keys a ``game.tw-pddl`` must hold to be playable by the env.
GAME_KEYS = ("pddl_domain", "pddl_problem", "grammar", "walkthrough")

#: The game files of the official release, as alfworld 0.4.2's ``alfworld-download`` fetches them.
TW_PDDL_URL = "https://github.com/alfworld/alfworld/releases/download/0.4.0/json_2.1.2_tw-pddl.zip"


class GameFileError(DataFileError):
    """A ``game.tw-pddl`` that cannot be played (not JSON, or missing keys)."""


def task_type_of(folder_name: str) -> str:
    """Short task type (``pick``, ``look``, ``clean``, ``heat``, ``cool``, ``pick2``) of a task folder name."""
    prefix = folder_name.split("-", 1)[0]
    if prefix not in TASK_TYPES:
        raise ValueError(f"unknown ALFWorld task folder {folder_name!r}; expected a prefix in {sorted(TASK_TYPES)}")
    return TASK_TYPES[prefix]


def task_id_of(gamefile: str | os.PathLike[str]) -> str:
    """Stable id ``split/task folder/trial`` of a game file (``.../valid_seen/look_at_.../trial_T.../game.tw-pddl``)."""
    p = Path(gamefile)
    parent = p.parent if p.name == GAME_FILE else p
    return "/".join(parent.parts[-3:])


def data_root() -> Path:
    """``$AGENTGYM_DATA/alfworld``, or a :class:`~agentgym.data.DataNotFoundError` naming the command to run."""
    root = family_dir("alfworld")
    if not (root / JSON_DIR).is_dir() and not (root / TRAIN_TARBALL).is_file():
        raise DataNotFoundError(missing_message("alfworld", root / JSON_DIR))
    return root


def split_dir(split: str) -> Path:
    """Folder holding the task folders of ``split``; unpacks a packed train split into the cache on first use."""
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; choose from {', '.join(SPLITS)}")
    root = data_root()
    path = root / JSON_DIR / split
    if path.is_dir():
        return path
    if split == "train" and (root / TRAIN_TARBALL).is_file():
        return unpack_train(root / TRAIN_TARBALL)
    raise DataNotFoundError(missing_message("alfworld", path))


def unpack_train(tarball: Path, dest: Path | None = None) -> Path:
    """Unpack ``train.tar.gz`` into ``dest`` (default: the cache) once; returns ``.../json_2.1.1/train``.

    Safe when several processes (vector-env workers) race: each unpacks into its own temporary folder and
    the first atomic rename wins.
    """
    base = dest if dest is not None else cache_dir("alfworld")
    target = base / JSON_DIR / "train"
    stamp = target / ".complete"
    if stamp.is_file():
        return target
    check_file(tarball, "alfworld")  # unpacked once: check the archive against the manifest first
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".train-", dir=target.parent))
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        unpacked = tmp / JSON_DIR / "train"
        if not unpacked.is_dir():
            raise DataNotFoundError(f"{tarball} does not hold {JSON_DIR}/train/; is it the ALFWorld train split?")
        (unpacked / ".complete").write_text(str(sum(1 for _ in unpacked.glob(f"*/*/{GAME_FILE}"))))
        try:
            os.rename(unpacked, target)
        except OSError:
            if not stamp.is_file():  # someone else's half-finished copy: replace it
                shutil.rmtree(target, ignore_errors=True)
                os.rename(unpacked, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


@functools.lru_cache(maxsize=32)
def _list_games(folder: str) -> tuple[str, ...]:
    return tuple(sorted(str(p) for p in Path(folder).glob(f"*/*/{GAME_FILE}")))


def list_games(split: str) -> list[str]:
    """Sorted paths of the game files of ``split`` (index ``i`` of this list is ``{"split": split, "index": i}``)."""
    folder = split_dir(split)
    games = _list_games(str(folder))
    if not games:
        raise DataNotFoundError(f"no {GAME_FILE} files under {folder}; " + missing_message("alfworld", folder))
    return list(games)


def find_game(task_id: str) -> str:
    """The game file of a ``split/folder/trial`` task id."""
    split = task_id.split("/", 1)[0]
    path = split_dir(split).parent / task_id / GAME_FILE
    if not path.is_file():
        raise ValueError(f"no ALFWorld game with task_id {task_id!r} (looked for {path})")
    return str(path)


def load_game(path: str | os.PathLike[str]) -> dict:
    """Read and check one game file; raises :class:`GameFileError` with the path when it is not playable."""
    try:
        check_file(path, "alfworld")
        data = read_json(path, "alfworld", GameFileError)
    except OSError as exc:
        raise GameFileError(f"{path}: not a readable ALFWorld game file ({exc}): " + restore_hint("alfworld")) from exc
    if not isinstance(data, dict):
        raise GameFileError(f"{path}: expected a JSON object: " + restore_hint("alfworld"))
    missing = [k for k in GAME_KEYS if k not in data]
    if missing:
        raise GameFileError(
            f"{path}: missing {', '.join(missing)}; re-create it with `agentgym data prepare alfworld`"
        )
    if not isinstance(data["walkthrough"], list) or not all(isinstance(a, str) for a in data["walkthrough"]):
        raise GameFileError(f"{path}: 'walkthrough' must be a list of commands")
    return data


# -- agentgym data prepare / download ------------------------------------------------------------------


def _find_split_dirs(source: Path) -> dict[str, Path]:
    """Split folders in a copy laid out as ours, as ``$ALFWORLD_DATA``, or as ``json_2.1.1`` itself."""
    found: dict[str, Path] = {}
    # The release zips name their top folder after the data version (json_2.1.1/, ...): look one level down too.
    below = sorted(d for d in source.iterdir() if d.is_dir() and d.name not in SPLITS) if source.is_dir() else []
    for base in (source / JSON_DIR, source, *below):
        for split in SPLITS:
            if split not in found and (base / split).is_dir():
                found[split] = base / split
    return found


def check_games(folder: Path) -> int:
    """Check that every game file under ``folder`` parses; returns how many there are."""
    bad: list[str] = []
    n = 0
    for path in sorted(folder.glob(f"*/*/{GAME_FILE}")):
        n += 1
        try:
            load_game(path)
            task_type_of(path.parent.parent.name)
        except (GameFileError, ValueError) as exc:
            bad.append(str(exc))
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise GameFileError(f"{len(bad)} unplayable game file(s) under {folder}: " + "; ".join(bad[:5]) + more)
    return n


def prepare(source: Path, dest: Path) -> Path:
    """Lay out ``dest`` (``<data>/alfworld``) from a local copy at ``source``, checking every game file.

    ``source`` may be a folder like ours (``json_2.1.1/<split>/`` folders, ``train.tar.gz``, ``logic/``), an
    ``$ALFWORLD_DATA`` folder made by ``alfworld-download``, or a ``.zip`` of the release's game files.
    Only ``game.tw-pddl`` files (and ``traj_data.json`` where present) are copied.
    """
    source = Path(source).expanduser()
    if not source.exists():
        raise SystemExit(f"{source} does not exist; pass --from the folder that holds json_2.1.1/ (or its zip)")
    if source.is_file() and source.suffix == ".zip":
        with tempfile.TemporaryDirectory() as tmp:
            with zipfile.ZipFile(source) as zf:
                zf.extractall(tmp)
            return prepare(Path(tmp), dest)
    splits = _find_split_dirs(source)
    tarball = source / TRAIN_TARBALL
    if not splits and not tarball.is_file():
        raise SystemExit(f"no ALFWorld splits ({', '.join(SPLITS)}) under {source} or {source / JSON_DIR}")
    dest = Path(dest)
    counts: dict[str, int] = {}
    for split, folder in splits.items():
        out = dest / JSON_DIR / split
        for path in sorted(folder.glob(f"*/*/{GAME_FILE}")):
            rel = path.parent.relative_to(folder)
            (out / rel).mkdir(parents=True, exist_ok=True)
            for name in (GAME_FILE, "traj_data.json"):
                if (path.parent / name).is_file():
                    shutil.copyfile(path.parent / name, out / rel / name)
        counts[split] = check_games(out)
    if "train" not in splits and tarball.is_file():
        train = unpack_train(tarball, dest)
        (train / ".complete").unlink(missing_ok=True)  # a data folder is laid out, not a cache
        counts["train"] = check_games(train)
    logic = dest / "logic"
    logic.mkdir(parents=True, exist_ok=True)
    for name in ("alfred.pddl", "alfred.twl2"):
        src = source / "logic" / name
        if not src.is_file():
            src = _packaged_logic(name)
        if src is not None:
            shutil.copyfile(src, logic / name)
    print("alfworld games: " + ", ".join(f"{s} {n}" for s, n in counts.items()))
    return dest


def _packaged_logic(name: str) -> Path | None:
    try:
        import alfworld.info  # noqa: F401  (its import creates ~/.cache/alfworld, harmless)
    except ImportError:
        return None
    path = Path(alfworld.info.BUILTIN_DATA_PATH) / name
    return path if path.is_file() else None


def download(dest: Path) -> Path:
    """Fetch the official ALFWorld game files (the URL ``alfworld-download`` uses) and lay out ``dest``."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # kept next to dest until prepared, so an interrupted download resumes (download_file)
    zpath = dest.parent / f".alfworld-{TW_PDDL_URL.rsplit('/', 1)[-1]}"
    print(f"downloading {TW_PDDL_URL}")
    try:
        download_file(TW_PDDL_URL, zpath)
    except OSError as exc:
        raise SystemExit(
            f"download failed ({exc}); run the command again to resume, or without internet copy the data from a "
            "machine that has it and run `agentgym data prepare alfworld --from DIR`"
        ) from exc
    out = prepare(zpath, dest)
    zpath.unlink(missing_ok=True)
    return out


# -- agentgym data prepare alfworld --compile ------------------------------------------------------------------
_WORKER_LIB: Any = None


def _compile_one(path: str) -> bool:
    """Compile one game into the disk cache (in a worker process); True when it was not cached yet."""
    global _WORKER_LIB
    from agentgym.envs.alfworld import engine

    data = load_game(path)
    disk = engine._disk_path(engine.game_key(data))
    if disk is not None and disk.is_file():
        return False
    if _WORKER_LIB is None:
        _WORKER_LIB = engine._take_lib()
    key, game = engine.compiled_game(_WORKER_LIB, data)  # compiles, saves it (and the parsed grammar) to disk
    if disk is not None and not disk.is_file():  # it was in this process's memory: compiled_game did not save it
        engine._save(key, game)
    return True


def compile_split(split: str = "train", *, workers: int | None = None, progress: bool = True) -> tuple[int, int]:
    """Fill the compiled-game disk cache for every game of ``split`` (``agentgym data prepare alfworld --compile``).

    A game's first reset in a process otherwise compiles it (PDDL to SAS, ~0.3-0.6 s); with the cache filled it
    is read from disk instead. Worth running once before training on ``train`` (3,553 games, most of which a run
    meets for the first time) or evaluating on a split; the cache is keyed by each game's PDDL and the engine
    versions, so it stays valid until those change. Runs on every core, with a progress bar.

    Returns:
        (games compiled now, games that were cached already).
    """
    import multiprocessing
    import time

    from tqdm.auto import tqdm

    from agentgym.envs.alfworld import engine

    engine._require_engine()
    if engine._disk_dir() is None:
        raise SystemExit("the ALFWorld disk cache is off (AGENTGYM_ALFWORLD_DISK_CACHE=0): unset it to fill the cache")
    files = list_games(split)
    workers = max(1, min(workers or os.cpu_count() or 1, len(files)))
    t0 = time.perf_counter()
    compiled = 0
    engine.clear_caches()  # forked workers start empty, so each game and the grammar reach the disk cache
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(workers) as pool:
        results = pool.imap_unordered(_compile_one, files, chunksize=4)
        for fresh in tqdm(results, total=len(files), desc=f"compiling {split}", unit="game", disable=not progress):
            compiled += bool(fresh)
    cached = len(files) - compiled
    print(
        f"alfworld {split}: {len(files)} games, {compiled} compiled now, {cached} already cached "
        f"({time.perf_counter() - t0:.0f} s on {workers} process(es)) in {engine._disk_dir()}"
    )
    return compiled, cached
