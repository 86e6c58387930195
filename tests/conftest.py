"""Shared fixtures: the data root, and skipping data-backed tests with a clear reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# One BLAS/OpenMP thread: tiny models are 10-17x faster with one thread on a busy 2-core box (two OpenMP
# threads spin at every op barrier). Set before torch is imported by any test module.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]

# Tests read data from AGENTGYM_DATA; default to the shared copy beside the checkout (as CI does).
if "AGENTGYM_DATA" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["AGENTGYM_DATA"] = str((ROOT.parent / "shared" / "data").resolve())
os.environ.setdefault("AGENTGYM_CACHE", str(ROOT / ".cache" / "agentgym"))


def data_root() -> Path:
    """Where agentgym reads data: ``$AGENTGYM_DATA``, else the per-user data folder (the one rule)."""
    from agentgym.data import data_dir

    return data_dir()


def require_data(family: str, *parts: str) -> Path:
    """The path ``<data root>/family/parts...``, or skip the test saying what is missing."""
    path = data_root().joinpath(family, *parts)
    if not path.exists():
        pytest.skip(
            f"{path} is absent; {family} tests need it (`agentgym data download {family}`, "
            f"`agentgym data prepare {family} --from DIR`, or set AGENTGYM_DATA to a folder holding {family}/)"
        )
    return path
