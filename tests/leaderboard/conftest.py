"""Fixtures for the leaderboard tests: a genuine Sokoban submission made by the expert, and forging helpers."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgym.agents import ExpertAgent, RandomAgent
from agentgym.episodes import Episode
from agentgym.leaderboard.archive import sha256_file
from agentgym.leaderboard.entry import run_suite
from agentgym.results import env_results
from agentgym.suites import get_suite


@pytest.fixture(scope="session")
def genuine_sokoban(tmp_path_factory) -> Path:
    """A submission of the expert on the whole ``sokoban`` suite (100 episodes, ~0.5 s to make)."""
    out = tmp_path_factory.mktemp("genuine") / "sokoban-expert"
    run_suite(get_suite("sokoban"), ExpertAgent(), out, agent_spec="expert")
    return out


@pytest.fixture(scope="session")
def genuine_frozenlake(tmp_path_factory) -> Path:
    """A submission of a seeded random agent on ``frozenlake``: failures and successes, slippery moves."""
    out = tmp_path_factory.mktemp("genuine") / "frozenlake-random"
    run_suite(get_suite("frozenlake"), RandomAgent(seed=3), out, agent_spec="random")
    return out


@pytest.fixture
def submission(genuine_sokoban, tmp_path) -> Path:
    """A fresh copy of the genuine Sokoban submission that a test may tamper with."""
    dest = tmp_path / "sub"
    shutil.copytree(genuine_sokoban, dest, ignore=shutil.ignore_patterns("logs"))
    return dest


def load(sub: Path) -> tuple[dict, list[dict]]:
    data = json.loads((sub / "submission.json").read_text())
    rel = data["episodes"][0]["path"]
    with gzip.open(sub / rel, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    return data, records


def save(sub: Path, data: dict, records: list[dict], *, fix_results: bool = True, raw: bytes | None = None) -> None:
    """Write tampered records back the way a careful forger would: recount, rehash and recompute results."""
    entry = data["episodes"][0]
    path = sub / entry["path"]
    payload = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records).encode()
    with gzip.open(path, "wb") as fh:
        fh.write(payload)
    entry["count"] = len(records)
    entry["sha256"] = sha256_file(path)
    if fix_results:
        eps = [Episode.from_dict(r) for r in records]
        for r, ep in zip(records, eps):
            r["totals"] = ep.totals()
        data["results"][entry["env_id"]] = env_results(entry["env_id"], eps)
        # totals changed: rewrite once more so the hash covers them
        with gzip.open(path, "wb") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in records).encode())
        entry["sha256"] = sha256_file(path)
    (sub / "submission.json").write_text(json.dumps(data, indent=2))


@pytest.fixture
def forge(submission) -> Callable[..., Path]:
    """``forge(mutate, fix_results=True)``: apply ``mutate(data, records)`` to the copy and save it."""

    def _forge(mutate: Callable[[dict, list[dict]], None], fix_results: bool = True) -> Path:
        data, records = load(submission)
        mutate(data, records)
        save(submission, data, records, fix_results=fix_results)
        return submission

    return _forge
