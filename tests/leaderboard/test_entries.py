"""Every committed board entry passes a full replay, and its rerun record (if any) checks out.

A failure here means an env changed behaviour under the same ``-vN`` (bump the version instead), or an
entry was edited. Every episode of every entry is replayed (``verify_cached``: within one run, the build
and this test share the verdict for the same bytes and sources); no sample, no trusted record.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

import agentgym.leaderboard.rerun as rerun_mod
from agentgym.core import env_family
from agentgym.leaderboard.rerun import check_rerun_cached, rerun_entry
from agentgym.leaderboard.verify import verify_cached
from tests.conftest import require_data

ENTRIES = sorted(p for p in (Path(__file__).resolve().parents[2] / "leaderboards" / "entries").glob("*") if p.is_dir())
#: Entries kept on the board to show the rerun at work: their rerun must be flagged, never agree.
ADVERSARIES = {"frozenlake-oracle-by-seed-adversary-demo-2026-12-03"}


def _data(entry: Path) -> dict:
    data = json.loads((entry / "submission.json").read_text())
    for env_id in data["envs"]:
        fam = env_family(env_id)
        if fam in ("ALFWorld", "WebShop", "HotpotQA"):
            require_data(fam.lower())
    return data


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda p: p.name)
def test_committed_entry_passes_a_full_replay(entry):
    _data(entry)
    record = verify_cached(entry, workers=2)
    assert record["ok"], record["errors"]
    assert record["full"] and record["replayed"] == record["episodes"] > 0


def test_the_adversary_is_on_the_board_and_flagged():
    from agentgym.leaderboard.build import NOT_REPRODUCED

    root = ENTRIES[0].parents[1]
    assert ADVERSARIES <= {p.name for p in ENTRIES}
    readme = (root / "README.md").read_text()
    assert "Oracle-by-seed (adversary demo)" in readme and NOT_REPRODUCED in readme
    page = (root / "site" / "frozenlake.html").read_text()
    assert NOT_REPRODUCED in page


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda p: p.name)
def test_runnable_entries_carry_a_rerun_that_checks_out(entry):
    data = _data(entry)
    if data["agent"]["runnable"].get("logs_only"):
        assert not (entry / "rerun.json").exists()
        pytest.skip(f"logs only: {data['agent']['runnable']['reason']}")
    check = check_rerun_cached(entry)
    assert check is not None, f"no rerun record: run `agentgym leaderboard verify {entry} --rerun`"
    assert check["ok"], check["errors"]
    assert check["flagged"] == (entry.name in ADVERSARIES), check["comparison"]


@pytest.mark.parametrize("name", ["frozenlake-random-agent", "sokoban-bfs-solver-expert"])
def test_honest_committed_agents_pass_a_fresh_rerun(name, tmp_path, monkeypatch):
    """What a maintainer runs, at CI size: the committed Random / Expert agents on 50 fresh seeds."""
    rng = random.Random(name)
    monkeypatch.setattr(rerun_mod, "_randbelow", lambda n: rng.randrange(n))
    (entry,) = [p for p in ENTRIES if p.name.startswith(name)]
    sub = tmp_path / entry.name
    shutil.copytree(entry, sub, ignore=shutil.ignore_patterns("rerun", "rerun.json"))
    record = rerun_entry(sub, episodes=50)
    assert record["ok"], record["errors"]
    assert not record["flagged"], record["comparison"]
    assert all(not env["failures"] for env in record["envs"].values())


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda p: p.name)
def test_committed_entry_code_points_at_something_that_exists(entry):
    """An entry's ``agent.code`` is a path in this repository, or the submitter's own URL."""
    code = json.loads((entry / "submission.json").read_text())["agent"].get("code", "")
    root = Path(__file__).resolve().parents[2]
    if code.startswith(("https://", "http://")):
        assert "github.com/agentgym/agentgym" not in code, f"{code}: that repository does not exist"
    else:
        assert code and (root / code).exists(), f"{code!r} is not a path in this repository"
