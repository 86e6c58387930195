"""HotpotQA data: the official JSON files, their validation, ``agentgym data download|prepare hotpotqa``.

The official files (https://hotpotqa.github.io/) are JSON lists of questions::

    {"_id": str, "question": str, "answer": str, "type": "bridge"|"comparison", "level": str,
     "supporting_facts": [[title, sentence_index], ...], "context": [[title, [sentence, ...]], ...]}

Which file an env reads (``split`` / ``file`` arguments of :func:`resolve_file`):

* ``split="dev_distractor"`` (or ``"dev"``) -> ``hotpot_dev_distractor_v1.json`` (7,405 questions, 10
  paragraphs each: the 2 gold paragraphs and 8 retrieved distractors);
* ``split="dev_fullwiki"`` -> ``hotpot_dev_fullwiki_v1.json`` (same questions, 10 paragraphs retrieved
  by the HotpotQA IR system; the gold paragraphs are often missing);
* ``split="train"`` -> ``hotpot_train_v1.1.json`` (90,447 questions);
* ``split="sample"`` -> ``hotpot_dev_distractor_sample100.json`` (100 hard dev questions; what CI has);
* ``split=None`` (default) -> the full dev distractor file when it is present, else the sample;
* ``file=PATH`` -> that file (absolute, or relative to ``$AGENTGYM_DATA/hotpotqa``), any split name ignored.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.data import DataFileError, DownloadError, check_file, download_file, read_json

#: split name -> file name in ``$AGENTGYM_DATA/hotpotqa``.
SPLIT_FILES: dict[str, str] = {
    "train": "hotpot_train_v1.1.json",
    "dev_distractor": "hotpot_dev_distractor_v1.json",
    "dev_fullwiki": "hotpot_dev_fullwiki_v1.json",
    "sample": "hotpot_dev_distractor_sample100.json",
}

#: Other accepted names: ReAct's wrapper calls the dev set "dev".
SPLIT_ALIASES: dict[str, str] = {"dev": "dev_distractor"}

#: The official download locations, as linked from https://hotpotqa.github.io/.
OFFICIAL_URLS: dict[str, str] = {
    "hotpot_train_v1.1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_train_v1.1.json",
    "hotpot_dev_distractor_v1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
    "hotpot_dev_fullwiki_v1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_fullwiki_v1.json",
}

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "_id": str,
    "question": str,
    "answer": str,
    "supporting_facts": list,
    "context": list,
}


class HotpotQAFormatError(DataFileError):
    """A HotpotQA file is not in the official layout; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Question:
    """One HotpotQA question with its paragraphs (``context``) and supporting facts."""

    id: str
    question: str
    answer: str
    type: str
    level: str
    supporting_facts: tuple[tuple[str, int], ...]
    context: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def supporting_titles(self) -> list[str]:
        """Distinct supporting-fact titles in the order they first appear."""
        return list(dict.fromkeys(title for title, _ in self.supporting_facts))


def _fail(path: Path, where: str, problem: str) -> HotpotQAFormatError:
    return HotpotQAFormatError(
        f"{path}: {where}: {problem}. Expected the official HotpotQA layout (a JSON list of objects with "
        f"_id, question, answer, supporting_facts [[title, sent_id]], context [[title, [sentences]]]); "
        f"re-download with `agentgym data download hotpotqa`."
    )


def _parse_entry(path: Path, i: int, raw: Any) -> Question:
    if not isinstance(raw, dict):
        raise _fail(path, f"entry {i}", f"is a {type(raw).__name__}, not an object")
    where = f"entry {i} (_id={raw.get('_id', '?')!r})"
    for key, typ in _REQUIRED.items():
        if key not in raw:
            raise _fail(path, where, f"missing field {key!r}")
        if not isinstance(raw[key], typ):
            raise _fail(path, where, f"field {key!r} is a {type(raw[key]).__name__}")
    context: list[tuple[str, tuple[str, ...]]] = []
    for j, para in enumerate(raw["context"]):
        if (
            not isinstance(para, (list, tuple))
            or len(para) != 2
            or not isinstance(para[0], str)
            or not isinstance(para[1], (list, tuple))
            or not all(isinstance(s, str) for s in para[1])
        ):
            raise _fail(path, where, f"context[{j}] is not [title, [sentence, ...]]")
        context.append((para[0], tuple(para[1])))
    if not context:
        raise _fail(path, where, "context is empty")
    facts: list[tuple[str, int]] = []
    for j, fact in enumerate(raw["supporting_facts"]):
        if (
            not isinstance(fact, (list, tuple))
            or len(fact) != 2
            or not isinstance(fact[0], str)
            or not isinstance(fact[1], int)
        ):
            raise _fail(path, where, f"supporting_facts[{j}] is not [title, sentence_index]")
        facts.append((fact[0], fact[1]))
    return Question(
        id=raw["_id"],
        question=raw["question"],
        answer=raw["answer"],
        type=str(raw.get("type", "")),
        level=str(raw.get("level", "")),
        supporting_facts=tuple(facts),
        context=tuple(context),
    )


def load_questions(path: str | os.PathLike[str]) -> list[Question]:
    """Read and validate an official HotpotQA JSON file.

    Raises:
        FileNotFoundError: the file does not exist.
        HotpotQAFormatError: the file is not JSON, not a list, or an entry lacks a field (named in the message).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"HotpotQA file {path} does not exist")
    check_file(path, "hotpotqa")
    raw = read_json(path, "hotpotqa", HotpotQAFormatError)
    if not isinstance(raw, list):
        raise _fail(path, "file", f"top level is a {type(raw).__name__}, not a list of questions")
    if not raw:
        raise _fail(path, "file", "holds no questions")
    questions = [_parse_entry(path, i, entry) for i, entry in enumerate(raw)]
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise _fail(path, "file", "has duplicate _id values")
    return questions


_CACHE: dict[tuple[str, int, int], list[Question]] = {}


def load_cached(path: str | os.PathLike[str]) -> list[Question]:
    """:func:`load_questions`, memoised per process by (path, size, mtime): many envs share one copy."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        _CACHE[key] = load_questions(path)
    return _CACHE[key]


def resolve_file(file: str | os.PathLike[str] | None = None, split: str | None = None) -> Path:
    """The HotpotQA file an env should read (see the module docstring for the rules).

    Raises:
        ValueError: unknown split name.
        agentgym.data.DataNotFoundError: the data folder or the file is absent; the message names the fix.
    """
    from agentgym.data import DataNotFoundError, data_dir, missing_message

    root = data_dir() / "hotpotqa"
    if file is not None:
        path = Path(file).expanduser()
        if not path.is_absolute():
            path = root / path
        if not path.is_file():
            raise DataNotFoundError(
                f"HotpotQA file {path} not found. Pass an existing official HotpotQA JSON file, or run "
                f"`agentgym data download hotpotqa` / `agentgym data prepare hotpotqa --from FILE`."
            )
        return path
    split = SPLIT_ALIASES.get(split, split) if split is not None else None
    if split is not None and split not in SPLIT_FILES:
        raise ValueError(f"unknown HotpotQA split {split!r}; choose from {', '.join(SPLIT_FILES)} (or pass file=)")
    if not root.is_dir():
        raise DataNotFoundError(missing_message("hotpotqa", root))
    names = [SPLIT_FILES[split]] if split is not None else [SPLIT_FILES["dev_distractor"], SPLIT_FILES["sample"]]
    for name in names:
        if (root / name).is_file():
            return root / name
    raise DataNotFoundError(
        f"HotpotQA file(s) {' or '.join(names)} not found in {root}. Run `agentgym data download hotpotqa` "
        f"(needs internet), or `agentgym data prepare hotpotqa --from FILE` with a local copy of the official file."
    )


def prepare(source: Path, dest: Path) -> Path:
    """Copy official HotpotQA file(s) from ``source`` (a file or a folder holding them) into ``dest``.

    Each file is validated first; a file whose name is not an official one keeps its name (pass it to the
    env with ``file=NAME``).
    """
    source = Path(source).expanduser()
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix == ".json" and p.name.startswith("hotpot_"))
        if not files:
            raise FileNotFoundError(
                f"no hotpot_*.json file in {source}; expected one of {', '.join(SPLIT_FILES.values())}"
            )
    elif source.is_file():
        files = [source]
    else:
        raise FileNotFoundError(f"{source} does not exist; pass an official HotpotQA JSON file or a folder of them")
    counts = {path: len(load_questions(path)) for path in files}  # validate everything before writing
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for path, n in counts.items():
            target = dest / path.name
            if target.resolve() != path.resolve():
                shutil.copyfile(path, target)
            print(f"hotpotqa: {path.name}: {n} questions -> {target}")
    except PermissionError as e:
        raise PermissionError(
            f"cannot write HotpotQA data to {dest} ({e}); pass --dest DIR or set AGENTGYM_DATA to a writable folder"
        ) from e
    return dest


def download(dest: Path, files: Sequence[str] = tuple(OFFICIAL_URLS)) -> Path:
    """Fetch the official HotpotQA files (by default all three; train is about half a gigabyte) into ``dest``.

    Files already present are kept. Each download goes to a temporary name and is validated before it is
    moved in place, so an interrupted or corrupt download leaves nothing under the official name.
    """
    unknown = [name for name in files if name not in OFFICIAL_URLS]
    if unknown:
        raise ValueError(f"unknown HotpotQA file(s) {unknown}; choose from {', '.join(OFFICIAL_URLS)}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except PermissionError as e:
        raise PermissionError(f"cannot create {dest} ({e}); pass --dest DIR or set AGENTGYM_DATA") from e
    for name in files:
        target = dest / name
        if target.is_file():
            print(f"hotpotqa: {name} already present")
            continue
        url = OFFICIAL_URLS[name]
        # fetched under another name (resumable: see download_file) and validated before it takes the official one
        tmp = dest / f".{name}.download"
        print(f"hotpotqa: downloading {url}")
        try:
            download_file(url, tmp)
            load_questions(tmp)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise DownloadError(
                f"could not download {url} ({e}). Download it by hand from https://hotpotqa.github.io/ "
                f"and run `agentgym data prepare hotpotqa --from FILE`."
            ) from e
        except PermissionError as e:
            raise PermissionError(f"cannot write to {dest} ({e}); pass --dest DIR or set AGENTGYM_DATA") from e
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(target)
    return dest
