"""Where data sets live, and the ``agentgym data download|prepare`` commands.

Data-backed envs read from ``$AGENTGYM_DATA`` (default: the user data dir, e.g.
``~/.local/share/agentgym``). Each family provides ``prepare(source, dest)`` (lay out a data folder
from a local copy) and ``download(dest)`` (fetch from the official source) in its own module, and
registers that module here with :func:`register_family` (``agentgym/envs/__init__.py`` does it for ours);
this module only resolves paths and dispatches, and knows no env module.

``AGENTGYM_DATA`` may point at a read-only copy (CI uses ``../shared/data``): anything that must be
unpacked or converted goes to :func:`cache_dir` (``$AGENTGYM_CACHE`` or the user cache dir) instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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
